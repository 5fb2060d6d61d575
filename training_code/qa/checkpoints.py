"""Spot-safe checkpoints: atomic per-node writes, a completion manifest per rank, newest complete wins.

Layout under the checkpoint dir (synced to `checkpoint_s3_uri` by SageMaker, shared by all nodes):

    step-00000500/                      a complete checkpoint (renamed into place when every rank is done)
        model.safetensors, optimizer.bin, scheduler.bin, ...   written by Accelerate's save_state
        random_states_<rank>.pkl        one per rank (unique names: nodes never overwrite each other)
        loop_state.rank<rank>.json      epoch, position in the epoch, global step, RNG restore point
        COMPLETE.rank<rank>.json        written last: every file this rank wrote, with its size
    .partial-step-00000750/             being written (or left behind by a kill): never loaded

A checkpoint is loaded only if the COMPLETE files of all ranks exist and every listed file has its size.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger("qa.checkpoints")
STEP_DIR = re.compile(r"^step-(\d{8})$")
PARTIAL_PREFIX = ".partial-"


@dataclass(frozen=True)
class LoopState:
    """Where the training loop stood when the checkpoint was taken."""

    global_step: int
    epoch: int
    batches_in_epoch: int  # batches of the current epoch already consumed by this rank
    samples_seen: int


def step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


def _fsync_tree(directory: Path, files: list[Path]) -> None:
    for path in files:
        with path.open("rb") as handle:
            os.fsync(handle.fileno())
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def partial_dir(checkpoint_dir: Path, step: int) -> Path:
    return checkpoint_dir / f"{PARTIAL_PREFIX}{step_dir_name(step)}"


def write_rank_manifest(directory: Path, rank: int, state: LoopState, files_before: set[str]) -> None:
    """Record this rank's loop state, fsync its files and write its COMPLETE marker last."""
    (directory / f"loop_state.rank{rank}.json").write_text(json.dumps(asdict(state)))
    mine = sorted(
        p
        for p in directory.iterdir()
        if p.is_file() and p.name not in files_before and not p.name.startswith("COMPLETE")
    )
    # Accelerate writes shared files (model, optimizer) from rank 0 and random_states_<rank> from each rank.
    mine = [p for p in mine if rank == 0 or re.search(rf"_{rank}\.pkl$|\.rank{rank}\.json$", p.name)]
    _fsync_tree(directory, mine)
    manifest = {"rank": rank, "step": state.global_step, "files": {p.name: p.stat().st_size for p in mine}}
    marker = directory / f"COMPLETE.rank{rank}.json"
    tmp = directory / f".COMPLETE.rank{rank}.json.tmp"
    tmp.write_text(json.dumps(manifest))
    os.replace(tmp, marker)
    _fsync_tree(directory, [marker])


def publish(checkpoint_dir: Path, step: int) -> Path:
    """Atomically move a partial checkpoint into place (call once per node, after all its ranks wrote)."""
    final = checkpoint_dir / step_dir_name(step)
    if final.exists():  # a previous attempt of the same step published it already
        shutil.rmtree(partial_dir(checkpoint_dir, step), ignore_errors=True)
        return final
    os.replace(partial_dir(checkpoint_dir, step), final)
    fd = os.open(checkpoint_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return final


def is_complete(directory: Path, world_size: int) -> tuple[bool, str]:
    """(complete?, reason if not): every rank's marker present and every listed file of the right size."""
    for rank in range(world_size):
        marker = directory / f"COMPLETE.rank{rank}.json"
        if not marker.is_file():
            return False, f"no {marker.name} (written by a run of another size, or interrupted)"
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
    candidates = sorted(
        (p for p in checkpoint_dir.iterdir() if p.is_dir() and STEP_DIR.match(p.name)),
        key=lambda p: int(STEP_DIR.match(p.name).group(1)),
        reverse=True,
    )
    for candidate in candidates:
        complete, reason = is_complete(candidate, world_size)
        if complete:
            return candidate
        log.warning("skipping incomplete checkpoint %s: %s", candidate.name, reason)
    for partial in checkpoint_dir.glob(f"{PARTIAL_PREFIX}*"):
        log.warning("ignoring partial checkpoint %s (interrupted while writing)", partial.name)
    return None


def read_loop_state(directory: Path, rank: int) -> LoopState:
    return LoopState(**json.loads((directory / f"loop_state.rank{rank}.json").read_text()))


def prune(checkpoint_dir: Path, keep: int) -> None:
    """Keep the newest `keep` published checkpoints; remove older ones and stale partial ones."""
    published = sorted(p for p in checkpoint_dir.iterdir() if p.is_dir() and STEP_DIR.match(p.name))
    for old in published[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    newest = int(STEP_DIR.match(published[-1].name).group(1)) if published else -1
    for partial in checkpoint_dir.glob(f"{PARTIAL_PREFIX}step-*"):
        if int(partial.name.rsplit("-", 1)[1]) <= newest:
            shutil.rmtree(partial, ignore_errors=True)
