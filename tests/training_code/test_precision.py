"""Mixed precision follows the GPU: bf16 only where it is native, whatever PyTorch's default says."""

from __future__ import annotations

import inspect

import pytest
import torch
from qa.precision import resolve_precision


def gpu(monkeypatch, capability: tuple[int, int], knows_emulation: bool = True) -> None:
    """A CUDA device of this compute capability, asked through a PyTorch >= 2.4 (or older) signature. Like
    PyTorch's own, the default answer counts emulation: True on any GPU that can hold a bf16 tensor."""
    native = capability[0] >= 8

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return native or including_emulation

    def old_is_bf16_supported() -> bool:
        return True

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    asked = is_bf16_supported if knows_emulation else old_is_bf16_supported
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", asked)


def test_the_pinned_pytorch_can_be_asked_about_native_bf16():
    assert "including_emulation" in inspect.signature(torch.cuda.is_bf16_supported).parameters


@pytest.mark.parametrize("knows_emulation", [True, False])
@pytest.mark.parametrize(
    ("capability", "expected"),
    [((7, 0), "fp16"), ((7, 5), "fp16"), ((8, 0), "bf16"), ((8, 6), "bf16"), ((9, 0), "bf16")],
)
def test_bf16_only_on_gpus_that_have_it_natively(monkeypatch, capability, expected, knows_emulation):
    gpu(monkeypatch, capability, knows_emulation)
    assert resolve_precision("bf16") == expected


@pytest.mark.parametrize("requested", ["fp16", "no"])
def test_other_requests_are_kept_on_a_gpu(monkeypatch, requested):
    gpu(monkeypatch, (7, 0))
    assert resolve_precision(requested) == requested


def test_cpu_trains_in_full_precision(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert [resolve_precision(p) for p in ("bf16", "fp16", "no")] == ["no", "no", "no"]
