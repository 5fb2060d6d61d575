"""Fixtures for the training code: the sample dataset, tokenizers and models built offline."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from config.paths import SAMPLE_DATASET, bundled_model_dir
from local_runner.demo_models import build_tiny_model
from tests.training_code.runner import TrainRun, run_training

# One short run per process count that several tests only read: 6 steps of 4 samples per process, logged and
# checkpointed every 2 steps, then evaluated in batches of 7 (they do not split evenly over 2 processes).
FINISHED_RUN = {
    "epochs": 1,
    "max_steps": 6,
    "per_device_train_batch_size": 4,
    "logging_steps": 2,
    "checkpoint_steps": 2,
    "checkpoint_minutes": 0,
    "eval_batch_size": 7,
}


@pytest.fixture(scope="session")
def pretrained_dir() -> Path:
    return bundled_model_dir()


@pytest.fixture(scope="session")
def tokenizer(pretrained_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(pretrained_dir))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer BERT with random weights, no dropout (deterministic across process counts)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-bert"), dropout=0.0)


@pytest.fixture(scope="session")
def tiny_dropout_model_dir(tmp_path_factory) -> Path:
    """The same tiny model with dropout on: resumed runs must restore RNG state to match exactly."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-bert-dropout"), dropout=0.1)


@pytest.fixture(scope="session")
def sample_features(tmp_path_factory, tokenizer) -> Path:
    """The bundled sample dataset, preprocessed once: <dir>/train, <dir>/validation, <dir>/stats."""
    import preprocess

    out = tmp_path_factory.mktemp("features")
    assert preprocess.main(preprocess_sample_args(out)) == 0
    return out


def preprocess_sample_args(output_dir: Path, *extra: str) -> list[str]:
    """preprocess.py's arguments for the bundled sample dataset and tokenizer."""
    return [
        "--manifest",
        str(SAMPLE_DATASET / "manifest.json"),
        "--data-dir",
        str(SAMPLE_DATASET),
        "--tokenizer-dir",
        str(bundled_model_dir()),
        "--output-dir",
        str(output_dir),
        *extra,
    ]


@pytest.fixture(scope="session")
def finished_run(tiny_model_dir, sample_features, tmp_path_factory) -> Callable[[int], tuple[Path, TrainRun]]:
    """Process count -> (work dir, run) of the FINISHED_RUN on the sample features, trained on first use. Its
    readers' modules form one work unit (tests/conftest.py), so one worker trains it once."""
    runs: dict[int, tuple[Path, TrainRun]] = {}

    def get(processes: int) -> tuple[Path, TrainRun]:
        if processes not in runs:
            work = tmp_path_factory.mktemp(f"finished-run-{processes}")
            run = run_training(tiny_model_dir, sample_features, work, FINISHED_RUN, processes)
            assert run.returncode == 0, run.output[-3000:]
            runs[processes] = (work, run)
        return runs[processes]

    return get
