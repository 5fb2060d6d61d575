"""The demo models: built quietly (no progress bar on a local run's console) and loadable."""

from __future__ import annotations

from transformers import BertModel
from transformers.utils import logging as transformers_logging

from local_runner.demo_models import build_tiny_model, build_tiny_model_in_job


def test_the_tiny_model_is_saved_without_a_progress_bar(tmp_path, capsys):
    transformers_logging.enable_progress_bar()
    target = build_tiny_model(tmp_path / "tiny")
    captured = capsys.readouterr()
    assert "Writing model shards" not in captured.err + captured.out
    assert transformers_logging.is_progress_bar_enabled()  # restored for whatever runs next
    assert BertModel.from_pretrained(target).config.num_hidden_layers == 2


def test_the_job_interpreter_builds_the_same_tiny_model(tmp_path):
    from safetensors.torch import load_file

    in_process, in_job = build_tiny_model(tmp_path / "here"), build_tiny_model_in_job(tmp_path / "job")
    here, there = (load_file(str(folder / "model.safetensors")) for folder in (in_process, in_job))
    assert here.keys() == there.keys() and all(here[name].equal(there[name]) for name in here)
    assert (in_job / "tokenizer.json").read_bytes() == (in_process / "tokenizer.json").read_bytes()
