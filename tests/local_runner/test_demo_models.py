"""The demo models: built quietly (no progress bar on a local run's console) and loadable."""

from __future__ import annotations

from transformers import BertModel
from transformers.utils import logging as transformers_logging

from local_runner.demo_models import build_tiny_model


def test_the_tiny_model_is_saved_without_a_progress_bar(tmp_path, capsys):
    transformers_logging.enable_progress_bar()
    target = build_tiny_model(tmp_path / "tiny")
    captured = capsys.readouterr()
    assert "Writing model shards" not in captured.err + captured.out
    assert transformers_logging.is_progress_bar_enabled()  # restored for whatever runs next
    assert BertModel.from_pretrained(target).config.num_hidden_layers == 2
