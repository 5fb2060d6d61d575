"""Small helpers shared by the entry points: SageMaker-style flags and paths."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tasks import task

from qa.outputs import TRAINING_CHANNELS_DIR, channel_env


def str2bool(value: str | bool) -> bool:
    """Explicit booleans: SageMaker passes hyperparameters as `--flag true|false`, never bare flags."""
    if isinstance(value, bool):
        return value
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def number(
    kind: type[int] | type[float],
    low: float,
    high: float | None = None,
    low_exclusive: bool = False,
    also: tuple[float, ...] = (),
) -> Callable[[str], Any]:
    """An argparse type: a finite `kind` number in [low, high] (low excluded with `low_exclusive`), or one of
    the sentinels `also`. A bad value stops the job before any work with one line naming flag, value and rule."""
    rule = f"{'>' if low_exclusive else '>='} {low:g}" + (f" and <= {high:g}" if high is not None else "")
    rule += "".join(f" (or {value:g})" for value in also)

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if value in also:
            return value
        in_range = value > low if low_exclusive else value >= low
        if not math.isfinite(value) or not in_range or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
        return value

    return parse


def task_name(name: str) -> str:
    """--task: a task name (tasks.TASK_NAMES); an unknown one stops the job in one line."""
    try:
        task(name)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return name


def or_auto(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type: "auto" (resolved later, for the device the job runs on) or what `parse` accepts."""

    def parse_or_auto(text: str) -> Any:
        return "auto" if text.strip().lower() == "auto" else parse(text)

    return parse_or_auto


def auto_bool(text: str) -> bool | str:
    """ "auto", true or false (an explicit boolean, as SageMaker passes them)."""
    return or_auto(str2bool)(text)


def env_path(name: str, default: str) -> str:
    """A path from a SageMaker variable (SM_MODEL_DIR, SM_CHANNEL_TRAIN, ...) or the container default."""
    return os.environ.get(name, default)


def channel_path(channel: str) -> Path:
    """A training job's input channel folder: SM_CHANNEL_<NAME>, else /opt/ml/input/data/<name>."""
    return Path(env_path(channel_env(channel), f"{TRAINING_CHANNELS_DIR}/{channel}"))


def setup_logging(is_main_process: bool = True) -> logging.Logger:
    logging.basicConfig(
        level=logging.INFO if is_main_process else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stdout,
    )
    for noisy in ("datasets", "transformers", "accelerate", "torch.distributed"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from transformers.utils import logging as transformers_logging

    # transformers' reports go to its own stderr handler only; it also propagates them to the root logger
    # (stdout here) when CI=true is set, which would print each report twice.
    transformers_logging.disable_propagation()
    if not is_main_process:  # one copy of library reports (e.g. transformers' load report), not one per rank
        transformers_logging.set_verbosity_error()
    return logging.getLogger("qa")
