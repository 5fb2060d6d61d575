"""A spot reclaim as a training job experiences it: every process dies at once, by SIGKILL, at any moment.

SageMaker gives the instance back to EC2 after a two-minute notice that the training script never sees (the
container entrypoint does not forward SIGTERM); whatever the job was doing, a checkpoint write included, stops.
"""

from __future__ import annotations

import contextlib
import re
import signal
from dataclasses import dataclass

import psutil
from qa.outputs import CHECKPOINT_WRITING, TRAINING_STEP

CHECKPOINT_WRITE = re.compile(CHECKPOINT_WRITING)
STEP_LINE = re.compile(TRAINING_STEP)


@dataclass(frozen=True)
class SpotInterruption:
    """When to reclaim: once the job logs optimizer step `after_step`, or, with `mid_checkpoint`, as soon as it
    starts writing the first checkpoint at or after that step."""

    after_step: int
    mid_checkpoint: bool = False

    def describe(self) -> str:
        when = "as the first checkpoint at or after" if self.mid_checkpoint else "after"
        return f"SIGKILL {when} step {self.after_step}"

    def due(self, line: str) -> bool:
        if self.mid_checkpoint:
            match = CHECKPOINT_WRITE.search(line)
            return match is not None and int(match.group(1)) >= self.after_step
        match = STEP_LINE.match(line)
        return match is not None and int(match.group(1)) >= self.after_step


def reclaim(pid: int) -> int:
    """SIGKILL a process and every descendant; the number killed. torchrun starts each worker in a session of
    its own, so killing the launcher's process group alone would leave the workers running. The tree is frozen
    (SIGSTOP) first, so nothing reacts to its parent's death or starts new processes in between."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    for proc_signal in (signal.SIGSTOP, signal.SIGKILL):
        for process in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(proc_signal)
    # The root is the caller's child: its exit status stays for the caller's wait(); the others are awaited here.
    psutil.wait_procs(tree[1:], timeout=30)
    return len(tree)
