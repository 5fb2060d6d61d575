"""Distributed set-up for every launcher: none (1 process), torchrun (CPU gloo / GPU NCCL), SMDDP (mpirun)."""

from __future__ import annotations

import glob
import json
import os
import warnings
from collections.abc import MutableMapping

# NVIDIA's device files, visible in the container on GPU instances (ml.g5, ml.p*).
GPU_DEVICE_FILES = "/dev/nvidia[0-9]*"


def smddp_requested(env: MutableMapping[str, str]) -> bool:
    """True when SageMaker started the job with `smdistributed.dataparallel` enabled."""
    params = env.get("SM_FRAMEWORK_PARAMS") or "{}"
    try:
        enabled = json.loads(params).get("sagemaker_distributed_dataparallel_enabled", False)
    except json.JSONDecodeError:
        enabled = False
    return str(enabled).lower() == "true"


def prepare_environment(env: MutableMapping[str, str] | None = None) -> None:
    """Translate launcher variables into what Accelerate reads, before the Accelerator is created.

    The SMDDP launcher is mpirun: it sets OMPI_COMM_WORLD_* but not RANK/LOCAL_RANK/WORLD_SIZE, and
    Accelerate initialises the process group only when LOCAL_RANK is set.
    """
    env = os.environ if env is None else env
    if smddp_requested(env):
        env.setdefault("ACCELERATE_USE_SAGEMAKER", "true")
        env.setdefault("ACCELERATE_SAGEMAKER_DISTRIBUTED_TYPE", "DATA_PARALLEL")
    mpi_to_torch = {
        "OMPI_COMM_WORLD_RANK": "RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK": "LOCAL_RANK",
        "OMPI_COMM_WORLD_SIZE": "WORLD_SIZE",
    }
    for mpi_name, torch_name in mpi_to_torch.items():
        if mpi_name in env and torch_name not in env:
            env[torch_name] = env[mpi_name]


# DDP gradient buckets: 100 MB of fp32 gradients (~14 all-reduces for BERT-large's 1.34 GB instead of ~54 at
# PyTorch's 25 MB). Each all-reduce pays a fixed latency (tens of microseconds on NCCL over EFA with 16 ranks),
# and the last bucket, which cannot overlap the backward pass, stays small (~2 ms in bf16 at ~25 GB/s bus
# bandwidth). bench/RESULTS.md has the model.
DDP_BUCKET_CAP_MB = 100


def ddp_kwargs(backend: str | None, mixed_precision: str):
    """Accelerate's DDP settings for the process group's backend and the training precision.

    gradient_as_bucket_view: gradients live in the all-reduce buckets (no copy, one gradient-sized buffer less).
    broadcast_buffers=False: no broadcast before every forward (the encoder's buffers are constant ids).
    Compression on NCCL only, in the training's half precision (bf16 on A100, fp16 on V100): half the bytes on
    the wire, gradients averaged in 16 bits and written back in fp32. gloo (CPU) and SMDDP keep fp32
    all-reduces (gloo has no 16-bit sum; SMDDP runs its own algorithm), and so does full-precision training.
    """
    from accelerate.utils import DDPCommunicationHookType, DistributedDataParallelKwargs

    # PyTorch 2.13 renamed broadcast_buffers; the training images' older PyTorch knows only that name, which
    # 2.13 still honours. Its deprecation notice would otherwise open every local run's log.
    warnings.filterwarnings("ignore", message="`broadcast_buffers` is deprecated", category=FutureWarning)
    hook = DDPCommunicationHookType.NO
    if backend == "nccl":
        compressed = {"bf16": DDPCommunicationHookType.BF16, "fp16": DDPCommunicationHookType.FP16}
        hook = compressed.get(mixed_precision, DDPCommunicationHookType.NO)
    return DistributedDataParallelKwargs(
        bucket_cap_mb=DDP_BUCKET_CAP_MB, gradient_as_bucket_view=True, broadcast_buffers=False, comm_hook=hook
    )


def request_nccl_debug(env: MutableMapping[str, str]) -> None:
    """NCCL_DEBUG=INFO (init and network subsystems): the logs then name the transport, e.g. the AWS OFI
    plugin with the EFA provider ("NET/OFI Selected Provider is efa"), or plain sockets."""
    env.setdefault("NCCL_DEBUG", "INFO")
    env.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")


def describe_ddp(model) -> str:
    """The settings a prepared DistributedDataParallel model really runs with (for the job's log)."""
    buffers = getattr(model, "forward_sync_buffers", getattr(model, "broadcast_buffers", None))  # renamed in 2.13
    hooks = [getattr(hook, "__name__", type(hook).__name__) for hook, _ in getattr(model, "_comm_hooks", [])]
    return (
        f"bucket_cap_mb={model.bucket_bytes_cap // 2**20} gradient_as_bucket_view={model.gradient_as_bucket_view} "
        f"sync_buffers_every_forward={buffers} comm_hook={','.join(hooks) or 'none'}"
    )


def unusable_gpus_error() -> str | None:
    """One line when the instance has NVIDIA GPUs that CUDA cannot use (a driver older than the image's CUDA,
    no GPU passed through), else None: the job then stops instead of training on the CPU for hours."""
    gpus = sorted(glob.glob(GPU_DEVICE_FILES))
    if not gpus:
        return None
    import torch

    if torch.cuda.is_available():
        return None
    return (
        f"this instance has NVIDIA GPUs ({', '.join(gpus)}) but CUDA is unusable here (torch {torch.__version__}, "
        f"built for CUDA {torch.version.cuda}); refusing to train on the CPU. Run the job on an image whose CUDA "
        "the instance's driver supports"
    )
