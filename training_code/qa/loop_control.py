"""Controlling the training loop: its length in steps, stop requests, checkpoint timing, votes across ranks."""

from __future__ import annotations

import math
import signal
import time
from typing import Any

import torch


def steps_per_epoch(batches_per_process: int, gradient_accumulation_steps: int) -> int:
    return max(1, math.ceil(batches_per_process / gradient_accumulation_steps))


class StopRequest:
    """Set by SIGTERM (a job stop, or torchrun forwarding one). Best effort: on SageMaker a spot reclaim does
    not reach the script as a signal (the container's entrypoint does not forward it), see README."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True


class Deadline:
    """--stop_after_seconds: training stops at the first vote (--control_steps) after this many seconds since
    `started` (0: never), leaving the rest of the job's MaxRuntimeInSeconds to evaluate, save and upload."""

    def __init__(self, seconds: float, started: float | None = None) -> None:
        self.seconds = seconds
        self.started = time.monotonic() if started is None else started  # a time.monotonic() reading

    def passed(self) -> bool:
        return self.seconds > 0 and time.monotonic() - self.started >= self.seconds


class CheckpointTimer:
    """Wall-clock checkpoint interval, counted from the end of the previous save (0 minutes: never due)."""

    def __init__(self, minutes: float) -> None:
        self.seconds = minutes * 60
        self.restart()

    def restart(self) -> None:
        self.since = time.monotonic()

    def due(self) -> bool:
        return self.seconds > 0 and time.monotonic() - self.since >= self.seconds


def any_rank(accelerator: Any, flags: list[bool]) -> list[bool]:
    """Per flag: is it set on any rank? One small all-reduce and one host sync; none on a single process."""
    if accelerator.num_processes == 1:
        return flags
    tensor = torch.tensor(flags, dtype=torch.float32, device=accelerator.device)
    return [value > 0 for value in accelerator.reduce(tensor, reduction="sum").tolist()]
