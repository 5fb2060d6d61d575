"""Spot-safe checkpoints: written in place, a completion manifest per rank written last, newest complete wins.

Layout under the checkpoint dir (synced to `checkpoint_s3_uri` by SageMaker; every node writes its own copy):

    step-00000500/                      one checkpoint, written straight into its final folder
        model.safetensors, optimizer.bin, scheduler.bin, ...   written by Accelerate's save_state (rank 0)
        random_states_<rank>.pkl        one per rank (unique names: nodes never overwrite each other)
        loop_state.rank<rank>.json      epoch, position in the epoch, global step, early stopping's state
        log_history.json                the log history so far (rank 0)
        COMPLETE.rank<rank>.json        written last: every file this rank wrote, with its size

No temporary folder and no rename: SageMaker uploads each file once, as it appears. A checkpoint is loaded only
if the COMPLETE files of all ranks exist and every listed file has its size, so a folder left half-written by
a kill (SIGKILL on a spot reclaim) is skipped. When a later attempt reaches the same step again, each rank
first removes its own old marker, so a folder being rewritten never looks complete.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from qa.outputs import LOG_HISTORY_FILE

log = logging.getLogger("qa.checkpoints")
STEP_DIR = re.compile(r"^step-(\d{8})$")
# Per-rank files: Accelerate's random_states_<rank>.pkl and our <name>.rank<rank>.json; the rest is rank 0's.
RANK_FILE = re.compile(r"_(\d+)\.pkl$|\.rank(\d+)\.json$")


@dataclass(frozen=True)
class LoopState:
    """Where the training loop stood when the checkpoint was taken."""

    global_step: int
    epoch: int
    batches_in_epoch: int  # batches of the current epoch already consumed by this rank
    samples_seen: int
    # Early stopping (qa/fine_tune.py): the best validation score of the task's gate metric so far, the step of its
    # checkpoint (kept by `prune`: the model saved at the end), evaluations since. Defaults: a checkpoint written
    # before they were recorded.
    best_score: float | None = None
    best_step: int | None = None
    evaluations_since_best: int = 0


def step_dir(checkpoint_dir: Path, step: int) -> Path:
    return checkpoint_dir / f"step-{step:08d}"


def _step_of(path: Path) -> int | None:
    match = STEP_DIR.match(path.name)
    return int(match.group(1)) if match and path.is_dir() else None


def _fsync(paths: Iterable[Path]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _owner(name: str) -> int:
    match = RANK_FILE.search(name)
    return int(match.group(1) or match.group(2)) if match else 0


def begin(directory: Path, rank: int) -> None:
    """Before writing: create the folder and drop this rank's marker left by an earlier attempt."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"COMPLETE.rank{rank}.json").unlink(missing_ok=True)


def write_rank_manifest(directory: Path, rank: int, state: LoopState) -> None:
    """Record this rank's loop state, fsync its files and write its COMPLETE marker last."""
    (directory / f"loop_state.rank{rank}.json").write_text(json.dumps(asdict(state)))
    mine = sorted(
        p for p in directory.iterdir() if p.is_file() and not p.name.startswith("COMPLETE") and _owner(p.name) == rank
    )
    _fsync([*mine, directory])
    manifest = {"rank": rank, "step": state.global_step, "files": {p.name: p.stat().st_size for p in mine}}
    marker = directory / f"COMPLETE.rank{rank}.json"
    marker.write_text(json.dumps(manifest))  # a marker torn by a kill is unreadable JSON: incomplete
    _fsync([marker, directory])


def is_complete(directory: Path, world_size: int) -> tuple[bool, str]:
    """(complete?, reason if not): every rank's marker present and every listed file of the right size."""
    for rank in range(world_size):
        marker = directory / f"COMPLETE.rank{rank}.json"
        if not marker.is_file():
            return False, f"no {marker.name} (interrupted while writing, or written by a run of another size)"
        try:
            manifest = json.loads(marker.read_text())
        except (OSError, json.JSONDecodeError) as err:
            return False, f"{marker.name} unreadable: {err}"
        for name, size in manifest["files"].items():
            path = directory / name
            if not path.is_file() or path.stat().st_size != size:
                return False, f"{name} missing or truncated"
    if not (directory / "loop_state.rank0.json").is_file():
        return False, "no loop state"
    return True, ""


def find_latest_complete(checkpoint_dir: Path, world_size: int) -> Path | None:
    """The newest complete checkpoint; incomplete ones are reported and skipped, never loaded."""
    if not checkpoint_dir.is_dir():
        return None
    steps = {p: step for p in checkpoint_dir.iterdir() if (step := _step_of(p)) is not None}
    candidates = sorted(steps, key=steps.__getitem__, reverse=True)
    for candidate in candidates:
        complete, reason = is_complete(candidate, world_size)
        if complete:
            return candidate
        log.warning("skipping incomplete checkpoint %s: %s", candidate.name, reason)
    return None


def model_weights(directory: Path) -> Path:
    """The prepared model's weights in a checkpoint: Accelerate's save_state file (safetensors, rank 0)."""
    return directory / "model.safetensors"


def read_loop_state(directory: Path, rank: int) -> LoopState:
    return LoopState(**json.loads((directory / f"loop_state.rank{rank}.json").read_text()))


def write_log_history(directory: Path, history: list[dict[str, float]]) -> None:
    """The log history so far (rank 0's file), so that a resumed run's LOG_HISTORY_FILE starts at step 1."""
    (directory / LOG_HISTORY_FILE).write_text(json.dumps(history))


def read_log_history(directory: Path) -> list[dict[str, float]]:
    """The log history a checkpoint holds; empty for a checkpoint written before it was recorded."""
    path = directory / LOG_HISTORY_FILE
    return json.loads(path.read_text()) if path.is_file() else []


def prune(checkpoint_dir: Path, complete_steps: list[int], keep: int, best_step: int | None = None) -> None:
    """Keep the newest `keep` of `complete_steps` (known complete by this run) and the best one (`best_step`, the
    model early stopping keeps); remove every other checkpoint older than the newest of them, complete or torn.
    Decided from the run's own record, not from the folder:
    on multi-node jobs a node's folder holds only its own ranks' files. SageMaker mirrors the deletions to S3
    (https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html) when the job's role may
    s3:DeleteObject under the checkpoint prefix; without it the S3 copies stay (see training_code/README.md).
    """
    kept = set(sorted(complete_steps)[-keep:]) | ({best_step} if best_step is not None else set())
    newest = max(complete_steps)
    for path in checkpoint_dir.iterdir():
        step = _step_of(path)
        if step is not None and step < newest and step not in kept:
            shutil.rmtree(path, ignore_errors=True)
