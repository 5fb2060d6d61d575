"""The GPU benchmark's FLOP count and its measuring loop, run on CPU with a tiny BERT (no GPU in CI)."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import BertForQuestionAnswering

from bench.gpu_throughput import (
    bert_large_config,
    matmul_parameters,
    measure,
    measure_loop,
    training_flops_per_token,
)
from config.paths import bundled_model_dir


def test_matmul_parameters_leave_out_the_embedding_tables():
    config = bert_large_config()
    with torch.device("meta"):
        model = BertForQuestionAnswering(config)
    tables = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * config.hidden_size
    total = sum(p.numel() for p in model.parameters())
    assert total == pytest.approx(334e6, rel=0.01)  # BERT-large with a QA head
    assert matmul_parameters(model) == total - tables


def test_measure_runs_the_training_step_and_reports_consistent_rates():
    config = bert_large_config(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
    result = measure(config, batch=2, seq_len=32, steps=2, warmup=1, device="cpu", use_compile=False)
    assert result["samples_per_second"] > 0
    assert result["tokens_per_second"] == pytest.approx(32 * result["samples_per_second"])
    flops_per_token = training_flops_per_token(config, 32, result["matmul_parameters"])
    assert result["achieved_tflops"] * 1e12 == pytest.approx(result["tokens_per_second"] * flops_per_token)
    assert math.isfinite(result["final_loss"]) and result["final_loss"] > 0


def test_loop_mode_runs_train_py_and_reports_its_rates_and_checkpoint_time(tmp_path):
    config = bert_large_config(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
    result = measure_loop(config, bundled_model_dir(), batch=2, seq_len=32, steps=2, work=tmp_path)
    assert result["samples_per_second"] > 0
    assert result["tokens_per_second"] == pytest.approx(32 * result["samples_per_second"])
    flops_per_token = training_flops_per_token(config, 32, result["matmul_parameters"])
    assert result["achieved_tflops"] * 1e12 == pytest.approx(result["tokens_per_second"] * flops_per_token)
    assert result["checkpoint_seconds"] >= 0
    assert math.isfinite(result["final_loss"]) and result["final_loss"] > 0
