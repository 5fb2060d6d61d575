"""The task and label names a dataset folder declares, which its upload's manifest v2 carries (qa.data.manifest_v2):
from the folder's own manifest.json when it is a v2-style object with `task` / `label_names`, else, for the label
names, from the ClassLabel features of its `datasets` save_to_disk folders (their dataset_info.json). A folder that
declares neither is the pipeline's task with no label names. Standard library only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa.data import SPLITS
from qa.outputs import DATASET_MANIFEST_FILE

DATASET_INFO_FILE = "dataset_info.json"  # what Dataset.save_to_disk writes beside state.json: its features
CLASS_LABEL = "ClassLabel"


@dataclass(frozen=True)
class DeclaredTask:
    task: str | None = None  # None: the pipeline's task
    label_names: tuple[str, ...] | None = None  # ClassLabel names in index order


def declared_task(dataset_dir: Path) -> DeclaredTask:
    """What `dataset_dir` declares (module docstring); ValueError in one line naming the file and the fix when a
    declaration is malformed or its save_to_disk folders name different label names."""
    own = own_declaration(dataset_dir / DATASET_MANIFEST_FILE)
    if own.label_names is not None:
        return own
    return DeclaredTask(own.task, class_label_names(dataset_dir))


def own_declaration(manifest_path: Path) -> DeclaredTask:
    """`task` and `label_names` of a v2-style manifest.json object; nothing from a list or a missing file (the
    upload checks the file's listing itself)."""
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (FileNotFoundError, UnicodeDecodeError, json.JSONDecodeError):
        return DeclaredTask()
    if not isinstance(manifest, dict):
        return DeclaredTask()
    task, label_names = manifest.get("task"), manifest.get("label_names")
    if task is not None and not (isinstance(task, str) and task):
        raise ValueError(f"{manifest_path}: task must be a task name, got {task!r}: fix or remove it")
    return DeclaredTask(task, None if label_names is None else checked_names(label_names, f"{manifest_path}"))


def checked_names(value: Any, where: str) -> tuple[str, ...]:
    """`value` as label names: a list of strings (what they may be, the task checks: label_names_problems)."""
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ValueError(f"{where}: label_names must be a list of strings, in label index order, got {value!r:.80}")
    return tuple(value)


def class_label_names(dataset_dir: Path) -> tuple[str, ...] | None:
    """The names of the one ClassLabel feature (a column, or a sequence's items) of the save_to_disk folders under
    the splits, which must all name the same; None without one. Several different ClassLabel features (e.g. POS
    and NER tags side by side) are ambiguous: the folder's manifest.json must name the label_names."""
    found: dict[tuple[str, ...], str] = {}
    for split in SPLITS:
        for info in sorted((dataset_dir / split).rglob(DATASET_INFO_FILE)):
            try:
                features = json.loads(info.read_text(encoding="utf-8")).get("features", {})
            except (UnicodeDecodeError, json.JSONDecodeError, AttributeError) as err:
                raise ValueError(f"{info} is not a datasets info file ({err.__class__.__name__})") from None
            for column, names in class_labels(features):
                found.setdefault(names, f"{info.relative_to(dataset_dir)} column {column}")
    if len(found) > 1:
        listed = "; ".join(f"{where}: {list(names)[:4]}" for names, where in found.items())
        raise ValueError(
            f"{dataset_dir} has {len(found)} different ClassLabel features ({listed}): name the ones the task "
            f"reads as label_names in {dataset_dir / DATASET_MANIFEST_FILE}"
        )
    return next(iter(found), None)


def class_labels(features: Any, column: str = "") -> list[tuple[str, tuple[str, ...]]]:
    """(column, names) of every ClassLabel in a datasets features description, nested ones (Sequence, List)
    included."""
    if isinstance(features, dict):
        if features.get("_type") == CLASS_LABEL:
            return [(column, checked_names(features.get("names"), f"ClassLabel {column}"))]
        return [
            found
            for key, value in features.items()
            for found in class_labels(value, column if key in ("feature", "_type") else column or key)
        ]
    if isinstance(features, list):
        return [found for item in features for found in class_labels(item, column)]
    return []
