"""What the model and the machine allow, checked before any work: sequence lengths the position embeddings can
hold, and GPUs that CUDA can use (training)."""

from __future__ import annotations

import preprocess
import torch

from local_runner.demo_models import build_tiny_model
from tests.training_code.conftest import preprocess_sample_args
from tests.training_code.runner import run_training


def test_preprocessing_rejects_windows_longer_than_the_position_embeddings(tmp_path, capsys):
    code = preprocess.main(preprocess_sample_args(tmp_path, "--max-seq-length", "640"))
    assert code == 1
    [error] = capsys.readouterr().err.strip().splitlines()
    assert error.startswith("error: --max-seq-length is 640 tokens, but ")
    assert "accepts at most 512" in error and "hyperparameters.max_seq_length to 512 or less" in error
    assert not (tmp_path / "train").exists()


def test_training_rejects_features_longer_than_the_position_embeddings(tmp_path, sample_features):
    model_dir = build_tiny_model(tmp_path / "short-model", max_position_embeddings=64)
    run = run_training(model_dir, sample_features, tmp_path, {"max_steps": 1, "per_device_train_batch_size": 2})
    assert run.returncode == 1, run.output[-3000:]
    assert "error: the longest training feature is " in run.output
    assert "accepts at most 64 (max_position_embeddings)" in run.output
    assert "Traceback" not in run.output


def test_training_on_a_gpu_instance_fails_fast_when_cuda_is_unusable(tmp_path, monkeypatch, capsys):
    import train
    from qa import distributed

    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia0").touch()
    monkeypatch.setattr(distributed, "GPU_DEVICE_FILES", str(tmp_path / "dev" / "nvidia[0-9]*"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert train.main(["--output_dir", str(tmp_path / "model")]) == 1
    [error] = capsys.readouterr().err.strip().splitlines()
    assert error.startswith(
        f"error: this instance has NVIDIA GPUs ({tmp_path / 'dev' / 'nvidia0'}) but CUDA is unusable"
    )
    assert "refusing to train on the CPU" in error
    assert not (tmp_path / "model").exists()


def test_without_gpus_the_guard_stays_silent(tmp_path, monkeypatch):
    from qa import distributed

    monkeypatch.setattr(distributed, "GPU_DEVICE_FILES", str(tmp_path / "nvidia[0-9]*"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert distributed.unusable_gpus_error() is None


def test_serving_caps_windows_at_the_position_embeddings(tmp_path):
    import inference

    model = inference.model_fn(str(build_tiny_model(tmp_path / "short-model", max_position_embeddings=64)))
    context = " ".join(f"Item {i} is stored in hall {i % 7}." for i in range(60))  # ~500 tokens
    answer = inference.predict_fn({"inputs": {"question": "Where is item 42?", "context": context}}, model)
    assert isinstance(answer, dict)  # one question in, one answer out
    assert answer["answer"] and context[answer["start"] : answer["end"]] == answer["answer"]
