"""The learning rate and warm-up of a published BERT-large SQuAD v1.1 recipe, for a run's global batch.

Stdlib only (train.py at run time, config/ for the pipeline's LearningRate default). The recipe: NVIDIA
DeepLearningExamples, PyTorch/LanguageModeling/BERT, scripts/configs/squad_config.sh `dgxa100-80g_8gpu_fp16`:
batch_size 32 per GPU x num_gpu 8 (global batch 256), learning_rate 4.6e-5, warmup_proportion 0.2, epochs 2.0,
from NVIDIA's BERT-large uncased checkpoint (`bert_uncased.pt`, not whole word masking). Its README ("Fine-tuning
accuracy results: NVIDIA DGX A100 (8x A100 80GB)", pytorch:21.11-py3) reports F1 90.96 with mixed precision
(90.93 TF32) for that configuration. The project's base model is Hugging Face's whole-word-masking BERT-large;
the recipe's F1 is NVIDIA's checkpoint's, not a figure measured here.

Another global batch B: the square-root scaling rule for Adam-type optimizers, lr x sqrt(B / 256) (S. Malladi,
K. Lyu, A. Panigrahi, S. Arora 2022, "On the SDEs and Scaling Rules for Adaptive Gradient Algorithms",
NeurIPS 2022), with the warm-up proportion kept at the recipe's 0.2 (a share of the steps, so it scales with
the run). The rule is derived for small learning rates and not validated on this fine-tuning: a run at
another global batch should be checked against the F1 gate. CPU runs (local runner, demo, tests) keep the
values the project used before the recipe (3e-5, warm-up 0.1, batch 8), which the demo's F1 was measured with.
"""

from __future__ import annotations

import math

RECIPE_PER_DEVICE_BATCH = 32
RECIPE_GLOBAL_BATCH = 256  # 32 per GPU x 8 GPUs
RECIPE_LEARNING_RATE = 4.6e-5
RECIPE_WARMUP_RATIO = 0.2
RECIPE_F1 = 90.96  # NVIDIA's README, mixed precision, its BERT-large uncased checkpoint
RECIPE_SOURCE = (
    "NVIDIA DeepLearningExamples PyTorch/LanguageModeling/BERT scripts/configs/squad_config.sh "
    "dgxa100-80g_8gpu_fp16 (32 x 8 GPUs, lr 4.6e-5, warm-up 0.2, 2 epochs; README F1 90.96)"
)
CPU_LEARNING_RATE = 3e-5
CPU_WARMUP_RATIO = 0.1


def recipe_learning_rate(global_batch: int) -> float:
    """The recipe's 4.6e-5 at its global batch of 256, square-root scaled for another (Malladi et al. 2022)."""
    if global_batch < 1:
        raise ValueError(f"global batch must be >= 1, got {global_batch}")
    return float(f"{RECIPE_LEARNING_RATE * math.sqrt(global_batch / RECIPE_GLOBAL_BATCH):.3g}")


def learning_rate(requested: float | str, global_batch: int, gpu: bool) -> float:
    """`requested` when it is a number; "auto": the recipe's for `global_batch` on GPUs, CPU_LEARNING_RATE on CPU."""
    if requested != "auto":
        return float(requested)
    return recipe_learning_rate(global_batch) if gpu else CPU_LEARNING_RATE


def warmup_ratio(requested: float | str, gpu: bool) -> float:
    """`requested` when it is a number; "auto": the recipe's 0.2 on GPUs, CPU_WARMUP_RATIO on CPU."""
    if requested != "auto":
        return float(requested)
    return RECIPE_WARMUP_RATIO if gpu else CPU_WARMUP_RATIO
