"""Fixtures for the training code: the sample dataset, tokenizers and models built offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.paths import SAMPLE_DATASET
from tools.demo_models import build_tiny_model, bundled_model_dir


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
