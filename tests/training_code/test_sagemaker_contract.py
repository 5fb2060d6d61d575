"""The entry points honour the SageMaker contract: --key value hyperparameters, SM_* paths, --help."""

from __future__ import annotations

import subprocess
import sys

import pytest
import train

from config.paths import TRAINING_CODE


@pytest.mark.parametrize("script", ["preprocess.py", "train.py"])
def test_help(script):
    result = subprocess.run([sys.executable, script, "--help"], cwd=TRAINING_CODE, capture_output=True, text=True)
    assert result.returncode == 0
    assert "usage:" in result.stdout


def test_paths_default_to_sagemaker_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("SM_CHANNEL_TRAIN", str(tmp_path / "train"))
    monkeypatch.setenv("SM_CHANNEL_MODEL", str(tmp_path / "model"))
    monkeypatch.setenv("SM_MODEL_DIR", str(tmp_path / "out"))
    monkeypatch.delenv("QA_CHECKPOINT_DIR", raising=False)
    args = train.parse_args(["--epochs", "1", "--group_by_length", "false", "--precision", "fp16"])
    assert args.train_dir == tmp_path / "train"
    assert args.model_name_or_path == str(tmp_path / "model")
    assert args.output_dir == tmp_path / "out"
    assert str(args.checkpoint_dir) == "/opt/ml/checkpoints"
    assert args.group_by_length is False and args.precision == "fp16"


def test_a_sagemaker_style_run_writes_model_metrics_lines_and_checkpoints(finished_run):
    """The shared 1-process run: 6 steps, logged and checkpointed every 2; the newest two checkpoints kept."""
    work, run = finished_run(1)
    assert run.lines("step=")[0].split()[0] == "step=2"
    assert all(len(line.split()) == 5 for line in run.lines("step="))
    assert sorted(p.name for p in (work / "checkpoints").iterdir()) == ["step-00000004", "step-00000006"]
    assert (work / "model" / "model.safetensors").is_file()


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--epochs", "-1", "argument --epochs: must be > 0, got -1"),
        ("--epochs", "two", "argument --epochs: expected a number, got 'two'"),
        ("--learning_rate", "0", "argument --learning_rate: must be > 0, got 0"),
        ("--learning_rate", "nan", "argument --learning_rate: must be > 0, got nan"),
        ("--max_steps", "0", "argument --max_steps: must be >= 1 (or -1), got 0"),
        ("--warmup_ratio", "1.5", "argument --warmup_ratio: must be >= 0 and <= 1, got 1.5"),
        ("--per_device_train_batch_size", "0", "argument --per_device_train_batch_size: must be >= 1, got 0"),
        ("--eval_batch_size", "8.5", "argument --eval_batch_size: expected an integer, got '8.5'"),
        ("--checkpoint_epochs", "-2", "argument --checkpoint_epochs: must be >= 0, got -2"),
    ],
)
def test_nonsensical_hyperparameters_stop_the_job_with_one_line(capsys, flag, value, message):
    with pytest.raises(SystemExit) as stopped:
        train.parse_args([flag, value])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f": error: {message}")


def test_sentinels_and_bounds_are_accepted():
    args = train.parse_args(["--max_steps", "-1", "--warmup_ratio", "0", "--checkpoint_minutes", "0"])
    assert (args.max_steps, args.warmup_ratio, args.checkpoint_minutes) == (-1, 0.0, 0.0)
