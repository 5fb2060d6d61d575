"""The memory model behind `per_device_train_batch_size auto` (training_code/qa/memory.py) and the recipe."""

from __future__ import annotations

import pytest
from qa.cost import BERT_LARGE, ModelShape
from qa.memory import CPU_PER_DEVICE_BATCH, GIB, HEADROOM, MemoryPlan, per_device_batch
from qa.recipe import CPU_LEARNING_RATE, RECIPE_LEARNING_RATE, learning_rate, recipe_learning_rate, warmup_ratio

from config.instance_types import GPU_MODELS

BERT = ModelShape.from_config(BERT_LARGE)


@pytest.mark.parametrize(
    ("gpu", "batch"),
    [
        ("A100", 32),
        ("V100", 16),
        ("V100-32GB", 32),
        ("A10G", 32),
        ("H100", 32),
        ("A100-80GB", 32),
        ("L4", 32),
        ("L40S", 32),
    ],
)
def test_bert_large_at_384_gets_the_recipes_32_where_it_fits(gpu, batch):
    assert per_device_batch(BERT, GPU_MODELS[gpu].memory_gb, 384, cap=32) == batch


def test_the_gpus_people_have_get_batches_that_grow_with_their_memory():
    """Issue 32: A10G and L4 (24 GB), L40S (48 GB), H100 (80 GB), without the recipe's cap: the batch fits each and
    grows with the memory (BERT-large's fixed ~9 GB leaves ~14 GB on a 24 GB GPU: 32 sequences of 384 tokens)."""
    batches = {gpu: per_device_batch(BERT, GPU_MODELS[gpu].memory_gb, 384, cap=1024) for gpu in GPU_MODELS}
    assert batches["A10G"] == batches["L4"] == 32
    assert batches["L40S"] == 64 and batches["H100"] == 128
    for gpu in ("A10G", "L4", "L40S", "H100"):
        plan, budget = MemoryPlan.of(BERT, 384), HEADROOM * GPU_MODELS[gpu].memory_gb * GIB
        assert plan.step_bytes(batches[gpu]) <= budget < plan.step_bytes(2 * batches[gpu])


def test_the_batch_is_the_largest_power_of_two_that_fits():
    plan = MemoryPlan.of(BERT, 384)
    batch = per_device_batch(BERT, 40, 384, cap=1024)
    assert batch & (batch - 1) == 0
    assert plan.step_bytes(batch) <= HEADROOM * 40 * GIB < plan.step_bytes(2 * batch)


def test_the_plan_counts_weights_gradients_moments_and_korthikanti_activations():
    plan = MemoryPlan.of(BERT, 384)
    assert plan.weights == plan.gradients == 4 * 334_094_338  # gradients as bucket views: one copy
    assert plan.optimizer == 8 * 334_094_338
    assert plan.activations_per_sequence == 34 * 384 * 1024 * 24
    assert MemoryPlan.of(BERT, 384, activation_bytes=4).activations_per_sequence == 2 * plan.activations_per_sequence


def test_a_model_too_large_for_the_gpu_is_refused_in_one_line():
    huge = ModelShape(layers=48, hidden=8192, intermediate=32768, vocab_size=50_000)
    with pytest.raises(ValueError, match=r"needs [\d.]+ GB per GPU .* more than 90% of the GPU's 16 GiB: choose"):
        per_device_batch(huge, 16, 384, cap=32)


def test_cpu_runs_keep_the_demos_batch_learning_rate_and_warm_up():
    assert CPU_PER_DEVICE_BATCH == 8
    assert learning_rate("auto", 8, gpu=False) == CPU_LEARNING_RATE == 3e-5
    assert warmup_ratio("auto", gpu=False) == 0.1


def test_gpu_runs_follow_the_recipe_for_the_global_batch():
    assert learning_rate("auto", 256, gpu=True) == RECIPE_LEARNING_RATE == 4.6e-5
    assert warmup_ratio("auto", gpu=True) == 0.2
    assert recipe_learning_rate(512) == pytest.approx(4.6e-5 * 2**0.5, rel=1e-2)  # square-root rule
    assert learning_rate(1e-4, 256, gpu=True) == 1e-4 and warmup_ratio(0.05, gpu=True) == 0.05  # numbers override
