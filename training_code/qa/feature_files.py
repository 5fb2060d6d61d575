"""The feature files preprocess.py writes per split and the training job reads: numpy only, no pickle.

The processing image (huggingface-pytorch-inference CPU) has numpy but neither `datasets` nor `pyarrow`, so a
split folder holds:
- FEATURES_FILE: a compressed numpy `.npz` (read with `allow_pickle=False`) with, per token column (`input_ids`,
  `token_type_ids`, `attention_mask`, a task's per-token columns such as token classification's `labels` and
  `word_ids`; QA's validation `offset_mapping` as (tokens, 2) with -1 where a token has no context offset), one flat
  array of every feature's tokens; ROW_OFFSETS (features + 1 cumulative token counts) cutting it into features; one
  value per feature for the scalar columns (QA's `start_positions`, `end_positions`, text classification's
  `labels`), named in PER_FEATURE_COLUMNS.
- EXAMPLE_IDS_FILE: a JSON list, the example id of each feature, in order.
- EXAMPLES_FILE (validation only): the examples, one JSON object per line.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np

FEATURES_FILE = "features.npz"
EXAMPLE_IDS_FILE = "example_ids.json"
EXAMPLES_FILE = "examples.jsonl"
ROW_OFFSETS = "row_offsets"
PER_FEATURE_COLUMNS = "per_feature_columns"  # the names of the columns with one value per feature
OFFSET_MAPPING = "offset_mapping"
EXAMPLE_ID = "example_id"
NO_OFFSET = -1  # an offset_mapping entry of None (a question or special token)
NO_OFFSET_PAIR = (NO_OFFSET, NO_OFFSET)
# 0/1 columns fit a byte; token ids and character offsets fit int32 (vocabularies and contexts are far smaller).
DTYPES = {"attention_mask": np.uint8, "token_type_ids": np.uint8}
DEFAULT_DTYPE = np.int32


def write_features(directory: Path, columns: dict[str, list[Any]]) -> None:
    """Write one split's feature columns (as prepare_*_features returns them, concatenated) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    lengths = np.asarray([len(ids) for ids in columns["input_ids"]], dtype=np.int64)
    arrays: dict[str, Any] = {ROW_OFFSETS: np.concatenate(([0], np.cumsum(lengths)))}  # Any: numpy's savez stub
    per_feature = [name for name, values in columns.items() if values and not isinstance(values[0], list | tuple)]
    arrays[PER_FEATURE_COLUMNS] = np.asarray([name for name in per_feature if name != EXAMPLE_ID], dtype=str)
    for name, values in columns.items():
        dtype = DTYPES.get(name, DEFAULT_DTYPE)
        if name == EXAMPLE_ID:
            (directory / EXAMPLE_IDS_FILE).write_text(json.dumps(values, ensure_ascii=False), encoding="utf-8")
        elif name == OFFSET_MAPPING:
            pairs = [NO_OFFSET_PAIR if pair is None else pair for row in values for pair in row]
            arrays[name] = np.asarray(pairs, dtype=dtype).reshape(-1, 2)
        elif name in per_feature:
            arrays[name] = np.asarray(values, dtype=dtype)
        else:
            arrays[name] = np.fromiter((token for row in values for token in row), dtype=dtype, count=lengths.sum())
    np.savez_compressed(directory / FEATURES_FILE, **arrays)  # zip-deflated: about Parquet's size (bench/RESULTS.md)


def read_features(directory: Path, names: tuple[str, ...] | None = None) -> dict[str, list[Any]]:
    """The columns `write_features` wrote (all, or those of `names` that exist) as Python lists, as they were
    given: token columns a list per feature, offset_mapping pairs as lists or None, example ids as strings."""
    path = directory / FEATURES_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {FEATURES_FILE} in {directory} (run preprocess.py first)")
    columns: dict[str, list[Any]] = {}
    with np.load(path, allow_pickle=False) as stored:
        bounds = stored[ROW_OFFSETS].tolist()
        rows = list(itertools.pairwise(bounds))
        per_feature = set(stored[PER_FEATURE_COLUMNS].tolist())
        for name in stored.files:
            if name in (ROW_OFFSETS, PER_FEATURE_COLUMNS) or (names is not None and name not in names):
                continue
            values = stored[name].tolist()
            if name == OFFSET_MAPPING:
                values = [None if pair[0] == NO_OFFSET else pair for pair in values]
            columns[name] = values if name in per_feature else [values[a:b] for a, b in rows]
    if (names is None or EXAMPLE_ID in names) and (directory / EXAMPLE_IDS_FILE).is_file():
        columns[EXAMPLE_ID] = json.loads((directory / EXAMPLE_IDS_FILE).read_text(encoding="utf-8"))
    return columns
