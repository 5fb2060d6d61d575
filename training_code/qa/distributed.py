"""Distributed set-up for every launcher: none (1 process), torchrun (CPU gloo / GPU NCCL), SMDDP (mpirun)."""

from __future__ import annotations

import json
import os
from collections.abc import MutableMapping


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
