"""A fingerprint of a model's weights (compares runs bit for bit)."""

from __future__ import annotations

import hashlib

import torch


def parameter_digest(model: torch.nn.Module) -> str:
    """SHA-256 over every parameter's bytes, in a fixed order."""
    digest = hashlib.sha256()
    for name, parameter in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(parameter.detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()
