"""Write a task's bundled sample dataset (data/<SAMPLE_DATASET>/): its two JSON Lines splits, labels as names in
train and as indices in validation (both forms exercised), and the folder's own manifest.json naming the task and
its label names (what the upload takes them from). Shared by tools/make_*_sample.py."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from qa.outputs import MANIFEST_V2_FORMAT, SPLITS, TRAIN_SPLIT, VALIDATION_SPLIT

from config.layout import DatasetLayout

TRAIN_FILE, VALIDATION_FILE = f"{TRAIN_SPLIT}/train.jsonl", f"{VALIDATION_SPLIT}/validation.jsonl"
TRAIN_RECORDS, VALIDATION_RECORDS = 240, 60
DATASET_VERSION = "v1"
# (rng, count, split, labels as indices, texts already used) -> the split's records.
RecordMaker = Callable[[random.Random, int, str, bool, set[str]], list[dict[str, object]]]


def write_task_sample(
    out_dir: Path, task: ModuleType, label_names: Sequence[str], records: RecordMaker, seed: int = 33
) -> None:
    """The sample of `task` from `records`, deterministic for `seed`; no validation text is a training text."""
    rng = random.Random(seed)
    seen: set[str] = set()
    for split in SPLITS:
        (out_dir / split).mkdir(parents=True, exist_ok=True)
    for key, split, count, as_index in (
        (TRAIN_FILE, TRAIN_SPLIT, TRAIN_RECORDS, False),
        (VALIDATION_FILE, VALIDATION_SPLIT, VALIDATION_RECORDS, True),
    ):
        lines = [json.dumps(record) for record in records(rng, count, split, as_index, seen)]
        (out_dir / key).write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = {
        "format": MANIFEST_V2_FORMAT,
        "dataset": task.SAMPLE_DATASET,
        "version": DATASET_VERSION,
        "task": task.NAME,
        "label_names": list(label_names),
        "files": [{"key": TRAIN_FILE}, {"key": VALIDATION_FILE}],
    }
    (out_dir / DatasetLayout().manifest_name).write_text(json.dumps(manifest, indent=1) + "\n")
