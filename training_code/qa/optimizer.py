"""The optimizer of the training loop."""

from __future__ import annotations

import torch


def build_optimizer(model: torch.nn.Module, learning_rate: float, weight_decay: float) -> torch.optim.Optimizer:
    """AdamW without weight decay on biases and norms, with the fused kernel where this PyTorch has one for
    the device (CUDA; CPU since PyTorch 2.4), else the foreach implementation."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        (no_decay if parameter.ndim < 2 or "norm" in name.lower() else decay).append(parameter)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        return torch.optim.AdamW(groups, lr=learning_rate, fused=True)
    except RuntimeError:  # no fused kernel for this device/dtype in this PyTorch
        return torch.optim.AdamW(groups, lr=learning_rate, foreach=True)
