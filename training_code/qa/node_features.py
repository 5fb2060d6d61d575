"""Tokenization inside FineTune (processing.tokenize_in = "fine_tune"): on every node one process validates and
tokenizes the dataset into a node-local folder, then leaves a marker there; the node's other processes wait for it.

Every node tokenizes its own copy of the data channel (SageMaker downloads every channel to every node): no features
cross the network. A marker holds the id of the launch that wrote it (`launch_id`), so a marker left by an earlier
launch in the same folder is never taken for this one's.
Standard library only.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from qa.outputs import TOKENIZED_DONE, TOKENIZED_FAILED

LOCAL_RANK_ENV = "LOCAL_RANK"  # torchrun's (qa.distributed.prepare_environment sets it under mpirun too)
WAIT_SECONDS = 3600.0  # how long a process waits for its node's tokenizer before it gives up
POLL_SECONDS = 0.5


def tokenizes_here(env: Mapping[str, str]) -> bool:
    """Whether this process tokenizes for its node: local rank 0, or the only process (no LOCAL_RANK)."""
    return env.get(LOCAL_RANK_ENV, "0") == "0"


def launch_id(env: Mapping[str, str]) -> str:
    """What the node's processes of one launch share: under mpirun (SMDDP) its job id; else their common parent,
    torchrun's agent (which starts every local worker itself), with torchrun's run id. On SageMaker every attempt
    also runs in a fresh container, where no earlier marker exists."""
    if "OMPI_COMM_WORLD_RANK" in env:
        return f"mpi:{env.get('OMPI_MCA_ess_base_jobid', '')}"
    return f"{env.get('TORCHELASTIC_RUN_ID', '')}:{os.getppid()}"


def start(directory: Path) -> None:
    """An empty folder for this launch's features (what an earlier launch left is removed)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)


def mark(directory: Path, ok: bool, launch: str) -> None:
    """Tell the node's other processes that the features are written (ok) or will never be."""
    marker = directory / (TOKENIZED_DONE if ok else TOKENIZED_FAILED)
    partial = marker.with_name(marker.name + ".partial")
    partial.write_text(launch)
    partial.replace(marker)  # atomic: a reader sees the whole id or no marker


def wait(
    directory: Path,
    launch: str,
    timeout_seconds: float = WAIT_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """None once this launch's tokenizer marked its features done; else one line saying why there are none."""
    deadline = clock() + timeout_seconds
    while True:
        for name, ok in ((TOKENIZED_DONE, True), (TOKENIZED_FAILED, False)):
            marker = directory / name
            if written_by(marker) == launch:
                if ok:
                    return None
                return (
                    f"this node's tokenizing process (local rank 0) refused the dataset or failed ({marker}): "
                    "its messages above say why"
                )
        if clock() >= deadline:
            return (
                f"this node's tokenizing process (local rank 0) wrote no {TOKENIZED_DONE} or {TOKENIZED_FAILED} in "
                f"{directory} within {timeout_seconds:g} s: see its messages above (it may have been killed)"
            )
        sleep(POLL_SECONDS)


def written_by(marker: Path) -> str | None:
    """The launch id in `marker`, or None while there is none (an earlier launch's may be being removed)."""
    try:
        return marker.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
