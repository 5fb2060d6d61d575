"""Which floating-point precision the training loop computes in on this device."""

from __future__ import annotations

import torch


def native_bf16() -> bool:
    """Whether this GPU computes in bf16 in hardware (compute capability 8.0+: A100, A10G, L4, H100).

    `torch.cuda.is_bf16_supported()` also counts emulation by default and so answers True on V100 and T4, where
    bf16 runs slowly through fp32 (pytorch/pytorch PR 148322 discusses it). `including_emulation=False` asks for
    native support; PyTorch 2.4 added the argument (the training images have 2.5 and 2.9), and an older PyTorch
    is asked for the compute capability instead.
    """
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # PyTorch < 2.4: no including_emulation
        return torch.cuda.get_device_capability()[0] >= 8


def resolve_precision(requested: str) -> str:
    """bf16 where the GPU has it natively, fp16 on GPUs without (V100, T4), full precision on CPU."""
    if not torch.cuda.is_available():
        return "no"
    if requested == "bf16" and not native_bf16():
        return "fp16"
    return requested
