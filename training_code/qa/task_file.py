"""TASK_FILE: the task a folder's data is for and its label names, written beside what the next step reads: the
pinned dataset (ClaimManifest), each feature split (preprocess.py) and the model (train.py, read by inference.py).
Standard library only (the claim's Lambda function writes it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa.outputs import TASK_FILE


@dataclass(frozen=True)
class TaskFile:
    task: str
    label_names: tuple[str, ...] | None = None  # in index order; None for a task without labels

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> TaskFile:
        names = document.get("label_names")
        return cls(str(document["task"]), None if names is None else tuple(str(name) for name in names))

    def document(self) -> dict[str, Any]:
        return {"task": self.task, "label_names": None if self.label_names is None else list(self.label_names)}

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / TASK_FILE).write_text(json.dumps(self.document(), indent=1, ensure_ascii=False), encoding="utf-8")


def read_task_file(folder: Path, default_task: str) -> TaskFile:
    """The folder's TASK_FILE; a folder without one holds `default_task`'s data without label names (what the
    pipeline wrote before tasks had labels)."""
    path = folder / TASK_FILE
    if not path.is_file():
        return TaskFile(default_task)
    return TaskFile.from_document(json.loads(path.read_text(encoding="utf-8")))
