"""Launcher environments are translated into what Accelerate reads (no GPU needed to check the mapping)."""

from __future__ import annotations

import json

import pytest
from accelerate.utils import DDPCommunicationHookType
from qa.distributed import ddp_kwargs, prepare_environment, request_nccl_debug, smddp_requested


def test_smddp_job_enables_accelerates_sagemaker_data_parallel_mode():
    env = {"SM_FRAMEWORK_PARAMS": json.dumps({"sagemaker_distributed_dataparallel_enabled": True})}
    prepare_environment(env)
    assert env["ACCELERATE_USE_SAGEMAKER"] == "true"
    assert env["ACCELERATE_SAGEMAKER_DISTRIBUTED_TYPE"] == "DATA_PARALLEL"


def test_mpirun_ranks_become_torch_ranks_without_overriding_torchrun():
    env = {"OMPI_COMM_WORLD_RANK": "9", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_SIZE": "16"}
    prepare_environment(env)
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == ("9", "1", "16")
    torchrun = {"RANK": "3", "OMPI_COMM_WORLD_RANK": "9"}
    prepare_environment(torchrun)
    assert torchrun["RANK"] == "3"


def test_torchrun_and_single_process_jobs_are_left_alone():
    env = {"SM_FRAMEWORK_PARAMS": json.dumps({"sagemaker_torch_distributed_enabled": True})}
    prepare_environment(env)
    assert "ACCELERATE_USE_SAGEMAKER" not in env
    assert not smddp_requested({})
    assert not smddp_requested({"SM_FRAMEWORK_PARAMS": "not json"})


@pytest.mark.parametrize(
    ("backend", "precision", "hook"),
    [
        ("nccl", "bf16", DDPCommunicationHookType.BF16),
        ("nccl", "fp16", DDPCommunicationHookType.FP16),
        ("nccl", "no", DDPCommunicationHookType.NO),
        ("gloo", "no", DDPCommunicationHookType.NO),
        ("gloo", "bf16", DDPCommunicationHookType.NO),
        ("smddp", "bf16", DDPCommunicationHookType.NO),
    ],
)
def test_ddp_kwargs_compress_gradients_in_half_precision_on_nccl_only(backend, precision, hook):
    kwargs = ddp_kwargs(backend, precision)
    assert kwargs.comm_hook == hook
    assert kwargs.to_kwargs() == {"bucket_cap_mb": 100, "gradient_as_bucket_view": True, "broadcast_buffers": False}


def test_nccl_debug_names_the_network_plugin_without_overriding_a_choice():
    env = {"NCCL_DEBUG": "WARN"}
    request_nccl_debug(env)
    assert env == {"NCCL_DEBUG": "WARN", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
    env = {}
    request_nccl_debug(env)
    assert env["NCCL_DEBUG"] == "INFO"
