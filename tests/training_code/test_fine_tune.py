"""The phases of train.py on their own: where a resumed run starts, and what a checkpoint records."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from qa import checkpoints
from qa.fine_tune import LossInterval, Progress, resume


@dataclass
class Prepared:
    """A one-process CPU Accelerator with a model, optimizer and scheduler registered for save/load."""

    accelerator: Accelerator
    model: torch.nn.Module

    def label(self, value: float) -> None:
        """Fill every weight with `value`: a checkpoint's weights then say which one was loaded."""
        with torch.no_grad():
            for parameter in self.model.parameters():
                parameter.fill_(value)

    def loaded_label(self) -> float:
        return next(self.model.parameters()).flatten()[0].item()

    def checkpoint(self, checkpoint_dir: Path, position: checkpoints.LoopState, complete: bool = True) -> None:
        """A checkpoint of the current weights as train.py writes one; without its marker when not complete
        (a kill during the save)."""
        target = checkpoints.step_dir(checkpoint_dir, position.global_step)
        checkpoints.begin(target, 0)
        self.accelerator.save_state(str(target), safe_serialization=True)
        checkpoints.write_rank_manifest(target, 0, position)
        if not complete:
            (target / "COMPLETE.rank0.json").unlink()


@pytest.fixture
def prepared() -> Iterator[Prepared]:
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    yield Prepared(accelerator, model)
    AcceleratorState._reset_state(reset_partial_state=True)  # as accelerate's own tests do


def test_resume_loads_the_newest_complete_checkpoint_and_starts_at_its_position(prepared, tmp_path, caplog):
    for step, complete in ((4, True), (6, True), (9, False)):
        prepared.label(step)
        prepared.checkpoint(tmp_path, checkpoints.LoopState(step, step // 4, step % 4, step * 16), complete)
    prepared.label(0)

    progress = resume(prepared.accelerator, tmp_path)

    assert prepared.loaded_label() == 6
    assert (progress.global_step, progress.epoch, progress.batches_in_epoch, progress.samples_seen) == (6, 1, 2, 96)
    assert progress.complete_steps == [6]
    assert progress.resume_rng is not None  # mid-epoch: re-applied after the first batch of the resumed iterator
    assert "skipping incomplete checkpoint step-00000009" in caplog.text


def test_resume_at_the_start_of_an_epoch_keeps_the_rng_as_loaded(prepared, tmp_path):
    prepared.checkpoint(tmp_path, checkpoints.LoopState(8, 2, 0, 128))
    progress = resume(prepared.accelerator, tmp_path)
    assert (progress.global_step, progress.epoch, progress.batches_in_epoch) == (8, 2, 0)
    assert progress.resume_rng is None


def test_without_a_complete_checkpoint_training_starts_from_scratch(prepared, tmp_path):
    prepared.label(5)
    prepared.checkpoint(tmp_path, checkpoints.LoopState(5, 0, 5, 80), complete=False)
    prepared.label(1)

    assert resume(prepared.accelerator, tmp_path) == Progress()
    assert resume(prepared.accelerator, tmp_path / "missing") == Progress()
    assert prepared.loaded_label() == 1


@pytest.mark.parametrize(
    ("batches_in_epoch", "recorded"),
    [(3, checkpoints.LoopState(10, 1, 3, 160)), (5, checkpoints.LoopState(10, 2, 0, 160))],
)
def test_a_checkpoint_at_the_end_of_an_epoch_resumes_at_the_start_of_the_next(batches_in_epoch, recorded):
    progress = Progress(global_step=10, epoch=1, batches_in_epoch=batches_in_epoch, samples_seen=160)
    assert progress.position(batches_per_epoch=5) == recorded


class DeviceStillBusy:
    """A reduced loss whose `.item()` returns only when the device has finished, `seconds` from now."""

    def __init__(self, value: float, seconds: float) -> None:
        self.value, self.seconds = value, seconds

    def item(self) -> float:
        time.sleep(self.seconds)
        return self.value


def test_throughput_is_measured_after_the_device_finished_the_interval(capsys):
    accelerator = SimpleNamespace(
        reduce=lambda tensor, reduction: DeviceStillBusy(float(tensor), 0.3), num_processes=1, is_main_process=True
    )
    run = SimpleNamespace(
        accelerator=accelerator,
        args=SimpleNamespace(per_device_train_batch_size=8),
        schedule=SimpleNamespace(updates_per_epoch=4),
        scheduler=SimpleNamespace(get_last_lr=lambda: [1e-5]),
    )
    interval = LossInterval(torch.zeros(()))
    interval.add(torch.tensor(1.0))
    interval.add(torch.tensor(3.0))
    interval.log_and_restart(run, step=2)  # type: ignore[arg-type]
    line = capsys.readouterr().out.strip()
    assert line.startswith("step=2 epoch=0.500 loss=2.0000 learning_rate=1.000e-05 samples_per_second=")
    # 16 samples whose work ends 0.3 s after the log call: at most 16 / 0.3 samples per second.
    assert float(line.rsplit("=", 1)[1]) <= 16 / 0.3
    assert interval.batches == 0 and float(interval.total) == 0.0
