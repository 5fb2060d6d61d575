"""The checkpoint policies a job can choose: none, at epoch ends, every N steps, every N minutes."""

from __future__ import annotations

import re

import pytest

from tests.training_code.runner import run_training

pytestmark = pytest.mark.slow

NO_PERIODIC = {"checkpoint_minutes": 0, "checkpoint_steps": 0, "checkpoint_epochs": 0}


def steps_per_epoch(output: str) -> int:
    match = re.search(r"optimizer steps \((\d+) per epoch\)", output)
    assert match, output[-3000:]
    return int(match.group(1))


def test_once_per_epoch_checkpoints_each_epoch_end_but_the_last(tmp_path, tiny_model_dir, sample_features):
    hps = {**NO_PERIODIC, "epochs": 3, "per_device_train_batch_size": 16, "checkpoint_epochs": 1}
    run = run_training(tiny_model_dir, sample_features, tmp_path, hps)
    assert run.returncode == 0, run.output[-3000:]
    per_epoch = steps_per_epoch(run.output)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        f"step-{per_epoch:08d}",
        f"step-{2 * per_epoch:08d}",
    ]


def test_no_periodic_checkpoints(tmp_path, tiny_model_dir, sample_features):
    run = run_training(tiny_model_dir, sample_features, tmp_path, {**NO_PERIODIC, "epochs": 2})
    assert run.returncode == 0, run.output[-3000:]
    assert "writing checkpoint" not in run.output
    assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").iterdir())
    assert (tmp_path / "model" / "model.safetensors").is_file()
