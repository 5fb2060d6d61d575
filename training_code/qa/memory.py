"""How many sequences per GPU fit one training step: a memory model of mixed-precision fine-tuning.

Stdlib only: train.py resolves `--per_device_train_batch_size auto` with it on the GPU it runs on, and the
cost guard (EstimateTrainingCost, qa/cost.py) and config/ resolve the same setting per allowed instance type.

Bytes on one GPU for a model of P parameters (ModelShape.parameters), as train.py trains it (Accelerate's
bf16/fp16 autocast, fused AdamW, DDP with gradients as bucket views, SDPA attention):
- weights, fp32: 4 P;
- gradients, fp32: 4 P. DDP's `gradient_as_bucket_view=True` (qa/distributed.py) makes them views into the
  communication buckets: no second copy;
- AdamW's two moments, fp32: 8 P;
- autocast's 16-bit copies of the weights that enter matrix multiplies, cached for the forward and kept for the
  backward: 2 x matmul parameters;
- activations kept for the backward: 34 x s x h bytes per token and layer in 16-bit (V. Korthikanti et al.
  2022, "Reducing Activation Recomputation in Large Transformer Models", section 4.1: s b h (34 + 5 a s / h)
  per layer; the 5 a s / h term is the attention score matrix, its softmax and dropout mask, which SDPA's
  memory-efficient and flash kernels never store), for `max_seq_length` tokens per sequence: the worst
  batch, every feature a full window;
- RESERVE_BYTES, an assumption: the CUDA context and cuBLAS workspaces (~0.5-1 GB), NCCL's buffers, the
  backward's transient tensors of one layer and the caching allocator's fragmentation, together 3 GB;
- HEADROOM, an assumption: only 90 % of the GPU's memory is planned for, so that a real step (LayerNorm and
  softmax outputs autocast keeps in fp32, the QA head, the DataLoader's pinned batch) still fits.

`gpu_memory_gb` is the GPU's nominal memory in GiB (config/instance_types.py's `memory_gb`, NVIDIA's "40 GB"),
or what torch reports for the device at run time (a little less than nominal; the 10 % headroom covers it).
Not modelled: activation checkpointing, ZeRO/FSDP sharding, fp32 training without autocast (`precision no`
keeps 4-byte activations: twice as many), gradient accumulation (it changes no per-step memory).
"""

from __future__ import annotations

from dataclasses import dataclass

from qa.cost import ModelShape

GIB = 2**30
ACTIVATION_BYTES_PER_TOKEN_LAYER_HIDDEN = 34  # Korthikanti et al. 2022, 16-bit activations, no s^2 term (SDPA)
RESERVE_BYTES = 3 * 10**9  # assumption: CUDA context, NCCL buffers, transient tensors, allocator slack
HEADROOM = 0.9  # assumption: share of the GPU's memory the plan may fill
CPU_PER_DEVICE_BATCH = 8  # "auto" on CPU (local runner, demo, tests): the value before "auto" existed


@dataclass(frozen=True)
class MemoryPlan:
    """The bytes of one training step on one GPU: fixed ones and activations per sequence."""

    weights: int
    gradients: int
    optimizer: int
    half_weights: int
    activations_per_sequence: int
    reserve: int

    @classmethod
    def of(cls, model: ModelShape, max_seq_length: int, activation_bytes: int = 2) -> MemoryPlan:
        """`activation_bytes`: 2 under bf16/fp16 autocast, 4 in full precision."""
        per_layer = ACTIVATION_BYTES_PER_TOKEN_LAYER_HIDDEN * max_seq_length * model.hidden * activation_bytes // 2
        return cls(
            weights=4 * model.parameters,
            gradients=4 * model.parameters,
            optimizer=8 * model.parameters,
            half_weights=2 * model.matmul_parameters if activation_bytes == 2 else 0,
            activations_per_sequence=per_layer * model.layers,
            reserve=RESERVE_BYTES,
        )

    @property
    def fixed(self) -> int:
        """Everything but the activations: what even a batch of one needs."""
        return self.weights + self.gradients + self.optimizer + self.half_weights + self.reserve

    def step_bytes(self, batch: int) -> int:
        return self.fixed + batch * self.activations_per_sequence


def per_device_batch(
    model: ModelShape, gpu_memory_gb: float, max_seq_length: int, cap: int, activation_bytes: int = 2
) -> int:
    """The largest power of two <= `cap` (the recipe's batch per GPU) whose step fits HEADROOM of the GPU's
    memory. ValueError naming the sizes when not even one sequence fits."""
    if cap < 1:
        raise ValueError(f"per-device batch cap must be >= 1, got {cap}")
    plan = MemoryPlan.of(model, max_seq_length, activation_bytes)
    budget = HEADROOM * gpu_memory_gb * GIB
    if plan.step_bytes(1) > budget:
        raise ValueError(
            f"a {model.parameters / 1e6:,.0f} M-parameter model needs {plan.step_bytes(1) / 1e9:.1f} GB per GPU for "
            f"one {max_seq_length}-token sequence (weights, gradients, AdamW state, reserve), more than "
            f"{HEADROOM:.0%} of the GPU's {gpu_memory_gb:g} GiB: choose an instance type with more GPU memory, or a "
            "smaller base model or hyperparameters.max_seq_length"
        )
    batch = 1
    while batch * 2 <= cap and plan.step_bytes(batch * 2) <= budget:
        batch *= 2
    return batch


def largest_batch(model: ModelShape, gpu_memory_gb: float, max_seq_length: int, activation_bytes: int = 2) -> int:
    """The most `max_seq_length`-token sequences per step that fit HEADROOM of the GPU's memory (0: not one)."""
    plan = MemoryPlan.of(model, max_seq_length, activation_bytes)
    room = HEADROOM * gpu_memory_gb * GIB - plan.fixed
    return max(0, int(room // plan.activations_per_sequence))


def batch_fit_error(
    model: ModelShape, gpu_memory_gb: float, max_seq_length: int, batch: int, activation_bytes: int = 2
) -> str:
    """ "" when `batch` sequences of `max_seq_length` tokens fit one GPU by this memory model, else the rule and
    the largest batch that fits."""
    largest = largest_batch(model, gpu_memory_gb, max_seq_length, activation_bytes)
    if batch <= largest:
        return ""
    need = MemoryPlan.of(model, max_seq_length, activation_bytes).step_bytes(batch) / 1e9
    return (
        f"{batch} sequences of {max_seq_length} tokens need {need:.1f} GB per GPU for a "
        f"{model.parameters / 1e6:,.0f} M-parameter model, more than {HEADROOM:.0%} of the GPU's {gpu_memory_gb:g} "
        f"GiB (qa/memory.py): the largest that fits is {largest}"
    )
