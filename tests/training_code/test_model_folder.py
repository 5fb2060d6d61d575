"""qa.model_folder: whether a model folder's tokenizer fits its config.json (make stage-model, make train)."""

from __future__ import annotations

import json

import pytest
from qa.model_folder import tokenizer_mismatch

from tests.tools.conftest import small_model


def tokenizer_folder(folder, vocab: list[str], config: dict, pad: str = "[PAD]"):
    small_model(folder, config)
    (folder / "vocab.txt").write_text("".join(f"{token}\n" for token in vocab))
    (folder / "tokenizer_config.json").write_text(json.dumps({"pad_token": pad}))
    return folder


@pytest.mark.parametrize(
    ("vocab", "config", "pad", "says"),
    [
        (["[PAD]", "[UNK]", "a"], {"model_type": "bert", "vocab_size": 3, "pad_token_id": 0}, "[PAD]", ""),
        (
            ["[PAD]", "[UNK]", "a", "b"],
            {"model_type": "bert", "vocab_size": 3},
            "[PAD]",
            "its token ids reach 3, and config.json (model_type 'bert') has vocab_size 3",
        ),
        (
            ["<s>", "<pad>", "a"],
            {"model_type": "bert", "vocab_size": 3, "pad_token_id": 0},
            "<pad>",
            "its padding token '<pad>' is id 1, and config.json (model_type 'bert') has pad_token_id 0",
        ),
    ],
)
def test_a_tokenizer_that_does_not_fit_its_config_is_named_with_the_fix(tmp_path, vocab, config, pad, says):
    problem = tokenizer_mismatch(tokenizer_folder(tmp_path / "m", vocab, config, pad), config)
    assert (says in problem) if says else problem == ""
    if says:
        assert "save the model and its own tokenizer from one checkpoint" in problem and "\n" not in problem


def test_a_tokenizer_json_with_added_tokens_is_read(tmp_path):
    folder = small_model(tmp_path / "m", {})
    (folder / "vocab.txt").unlink()
    tokenizer = {"model": {"vocab": {"a": 0, "b": 1}}, "added_tokens": [{"id": 5, "content": "<extra>"}]}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert "its token ids reach 5" in tokenizer_mismatch(folder, {"vocab_size": 4})
