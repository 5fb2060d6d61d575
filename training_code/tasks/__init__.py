"""The fine-tuning tasks, named as Hugging Face pipelines name them: one module per task owns its record schema and
validation, features, model head, evaluation and metrics, and what its endpoint takes and returns (the contract is
in the README's task section). Everything else reads the facts a task module declares and never branches on a
task's name.

Standard library only at import time, here and at the top of every task module: the pipeline's Lambda functions
(Python runtime with boto3 only) import the record validation; numpy, torch and transformers are imported inside
the functions that need them.
"""

from __future__ import annotations

import difflib
import importlib
from types import ModuleType

TASK_NAMES = ("question-answering", "text-classification", "token-classification")
DEFAULT_TASK = "question-answering"


def task(name: str) -> ModuleType:
    """The module of task `name` (`tasks.<name with - as _>`); an unknown name raises ValueError in one line."""
    if name not in TASK_NAMES:
        close = difflib.get_close_matches(name, TASK_NAMES, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ValueError(f"unknown task {name!r}{hint} (tasks: {', '.join(TASK_NAMES)})")
    return importlib.import_module(f"{__name__}.{name.replace('-', '_')}")
