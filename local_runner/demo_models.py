"""Models for local runs without a hub: the bundled pretrained encoder (config.paths.bundled_model_dir) and tiny
random BERTs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from config.paths import bundled_model_dir
from local_runner.launch import job_python

# What the demo stages each model as, under the artifacts bucket's base-models/ prefix (and names it in tables).
BUNDLED_MODEL_NAME = "all-MiniLM-L6-v2"
TINY_MODEL_NAME = "tiny-bert"


def build_tiny_model(
    target: Path, hidden_size: int = 32, dropout: float = 0.1, max_position_embeddings: int = 512
) -> Path:
    """A 2-layer BERT encoder with random weights and the bundled tokenizer.

    Like a base model on a hub, it has no question-answering head: training adds one, as it does to a real one.
    """
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel
    from transformers.utils import logging as transformers_logging

    tokenizer = AutoTokenizer.from_pretrained(str(bundled_model_dir()))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=hidden_size * 2,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        max_position_embeddings=max_position_embeddings,
    )
    # save_pretrained draws a "Writing model shards" progress bar: none on the console of a local run.
    bars_were_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        BertModel(config).save_pretrained(target)
    finally:
        if bars_were_on:
            transformers_logging.enable_progress_bar()
    tokenizer.save_pretrained(target)
    return target


def build_tiny_model_in_job(target: Path) -> Path:
    """build_tiny_model's default model, built by the interpreter local jobs start with (local_runner.launch): the
    runner's own process then imports neither torch nor transformers."""
    completed = subprocess.run(
        [job_python(), "-m", "local_runner.demo_models", str(target)], capture_output=True, text=True
    )
    if completed.returncode != 0:
        raise RuntimeError(f"building the tiny model in {target} failed:\n{completed.stderr[-3000:]}")
    return target


if __name__ == "__main__":
    build_tiny_model(Path(sys.argv[1]))
