"""What the tasks with label names share (text- and token-classification): checks of a label given as a name or
an index into the manifest's `label_names`, of the names themselves, their heads' config, and the log-softmax their
cross-entropy and probabilities read. Standard library at import time (numpy inside log_softmax), as every task
module."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qa.data import Problem

MAX_SHOWN_NAMES = 10  # label names a hint lists
LABEL_NAMES_HINT = "add label_names to the manifest: the label names in index order, as ClassLabel keeps them"


def names_shown(label_names: tuple[str, ...]) -> str:
    shown = ", ".join(label_names[:MAX_SHOWN_NAMES])
    return shown + (f", ... ({len(label_names)} in all)" if len(label_names) > MAX_SHOWN_NAMES else "")


def label_problem(label: Any, label_names: tuple[str, ...] | None) -> tuple[str, str] | None:
    """(message, hint) when `label` (present) is neither one of `label_names` nor an index into them."""
    from qa.data import shown_id

    if isinstance(label, bool) or not isinstance(label, str | int):
        return f"must be a label name or an integer index, got {type(label).__name__}", "use a name or its index"
    kind = "a name" if isinstance(label, str) else "an index"
    if label_names is None:
        return f"is {kind}, but the manifest has no label_names", LABEL_NAMES_HINT
    if isinstance(label, str) and label not in label_names:
        return (
            f"{shown_id(label)} is not one of the manifest's {len(label_names)} label_names",
            f"use one of {names_shown(label_names)}, or add it to the manifest's label_names",
        )
    if isinstance(label, int) and not 0 <= label < len(label_names):
        return (
            f"index {label} is out of range: the manifest has {len(label_names)} label_names",
            f"use an index from 0 to {len(label_names) - 1}, or the label's name",
        )
    return None


def label_index(label: str | int, label_names: tuple[str, ...]) -> int:
    """The index of a valid label (a name or already an index)."""
    return label if isinstance(label, int) else label_names.index(label)


def label_names_problems(label_names: tuple[str, ...] | None, file: str, task_name: str) -> list[Problem]:
    """The manifest's label names: required (by task `task_name`), not empty, each a non-empty string, no name
    twice."""
    from qa.data import Problem, shown_id

    def problem(message: str, hint: str) -> Problem:
        return Problem(file, "", None, "label_names", message, hint)

    if label_names is None:
        return [problem(f"{task_name} needs the label names, and the manifest has none", LABEL_NAMES_HINT)]
    if not label_names:
        return [problem("is empty", "list every label name, in index order")]
    problems = []
    first: dict[str, int] = {}
    for index, name in enumerate(label_names):
        if not isinstance(name, str) or not name.strip():
            problems.append(problem(f"label_names[{index}] is empty or not a string", "give every label a name"))
        elif name in first:
            problems.append(
                problem(
                    f"label_names[{index}] ({shown_id(name)}) repeats label_names[{first[name]}]",
                    "list each label once: a label's index is its position",
                )
            )
        else:
            first[name] = index
    return problems


def log_softmax(logits: Any) -> Any:
    """log softmax over the last axis, in float64."""
    import numpy as np

    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def head_config(label_names: Sequence[str]) -> dict[str, Any]:
    """The model config of a classification head over `label_names`: num_labels, id2label, label2id (saved in
    config.json, so the served model names its labels)."""
    return {
        "num_labels": len(label_names),
        "id2label": dict(enumerate(label_names)),
        "label2id": {name: index for index, name in enumerate(label_names)},
    }


def unreadable(record: Any, file: str, location: str) -> list[Problem]:
    """The one problem of a record that cannot be read as an object (an unparsable line, a value that is no JSON
    object), else none."""
    from qa.data import Problem, UnparsableLine

    if isinstance(record, UnparsableLine):
        return [Problem(file, location, None, None, record.message, "one JSON object per line", record_level=True)]
    if not isinstance(record, dict):
        return [Problem(file, location, None, None, "record is not a JSON object", "one object per record", True)]
    return []


def id_problem(record: dict[str, Any], record_id: str | None) -> tuple[str, str, str] | None:
    """(field, message, hint) when the record gives an id that cannot name it; a record without one is named by its
    location."""
    if "id" in record and record["id"] is not None and (record_id is None or not record_id.strip()):
        return (
            "id",
            "must be a non-empty string or an integer",
            "give every record a unique id, or none (it is then named by its location)",
        )
    return None


FieldProblem = tuple[str, str, str]  # (field, message, hint)


def record_problems(
    record: Any, file: str, location: str, field_problems: Callable[[dict[str, Any]], list[FieldProblem]]
) -> list[Problem]:
    """Every problem of one record of a task with optional ids: an unreadable record's one problem, else the id's
    and `field_problems(record)`'s, each a record-level problem naming the record by its id when it has one."""
    from qa.data import Problem, given_id

    unread = unreadable(record, file, location)
    if unread:
        return unread
    record_id = given_id(record)
    bad_id = id_problem(record, record_id)
    found = [*([bad_id] if bad_id else []), *field_problems(record)]
    shown = record_id if record_id and record_id.strip() else None
    return [Problem(file, location, shown, name, message, hint, record_level=True) for name, message, hint in found]
