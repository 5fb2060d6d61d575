"""train.py under test instruments, started like train.py itself (directly or by torchrun).

QA_TEST_SYNC_LOG=<dir>: count, per training batch, every host sync the loop's code asks for (`.item()`,
`.tolist()`, tensor truth/float/int, from training_code, Accelerate or transformers' masking_utils) and every
Python-level collective (torch.distributed.*); each rank writes <dir>/rank<r>.json as [[batch, name], ...].
Calls are attributed to the batch whose forward pass ran last (0: before the first). DDP's gradient all-reduce
runs in C++, unseen.

QA_TEST_PAUSE_IN_CHECKPOINT=<step>: the highest rank stops before writing its completion marker of that step's
checkpoint (every file written, no marker), prints `PAUSED in checkpoint <step>` and waits to be killed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

TRAINING_CODE = Path(__file__).resolve().parents[2] / "training_code"

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "broadcast",
    "broadcast_object_list",
    "barrier",
    "reduce",
    "reduce_scatter_tensor",
    "gather",
    "scatter",
)
HOST_SYNCS = ("item", "tolist", "__bool__", "__float__", "__int__")
# The loop's own code, Accelerate, and transformers' attention-mask construction (masking_utils asks the device
# whether a 2-D mask has padding, in every forward pass, unless the mask comes prepared).
WATCHED_CODE = (str(TRAINING_CODE), f"{os.sep}accelerate{os.sep}", f"{os.sep}transformers{os.sep}masking_utils.py")
events: list[tuple[int, str]] = []
batches = 0


def record(owner: object, name: str, only_from_watched_code: bool) -> None:
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        caller = sys._getframe(1).f_code.co_filename
        if not only_from_watched_code or any(part in caller for part in WATCHED_CODE):
            events.append((batches, name))
        return original(*args, **kwargs)

    setattr(owner, name, counted)


def count_syncs(log_dir: Path) -> None:
    from transformers import BertForQuestionAnswering

    forward = BertForQuestionAnswering.forward

    def counting_forward(self, *args, **kwargs):
        global batches
        batches += 1
        return forward(self, *args, **kwargs)

    BertForQuestionAnswering.forward = counting_forward
    for name in COLLECTIVES:
        record(dist, name, only_from_watched_code=False)
    for name in HOST_SYNCS:
        record(torch.Tensor, name, only_from_watched_code=True)
    log_dir.mkdir(parents=True, exist_ok=True)


def pause_in_checkpoint(step: int) -> None:
    from qa import checkpoints

    write = checkpoints.write_rank_manifest

    def paused(directory, rank, state):
        if state.global_step == step and rank == int(os.environ.get("WORLD_SIZE", "1")) - 1:
            print(f"PAUSED in checkpoint {step}", flush=True)
            time.sleep(600)
        write(directory, rank, state)

    checkpoints.write_rank_manifest = paused


if __name__ == "__main__":
    sync_log = os.environ.get("QA_TEST_SYNC_LOG")
    if sync_log:
        count_syncs(Path(sync_log))
    if os.environ.get("QA_TEST_PAUSE_IN_CHECKPOINT"):
        pause_in_checkpoint(int(os.environ["QA_TEST_PAUSE_IN_CHECKPOINT"]))
    import train

    code = train.main()
    if sync_log:
        (Path(sync_log) / f"rank{os.environ.get('RANK', '0')}.json").write_text(json.dumps(events))
    sys.exit(code)
