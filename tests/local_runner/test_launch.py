"""How training jobs are started here: the launcher, the inherited environment, the resolved training request."""

from __future__ import annotations

import os
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from config.instance_types import INSTANCE_TYPES
from local_runner.errors import UnsupportedDefinition
from local_runner.jobs import JOB_LOG, collect_model, resolve_training_job
from local_runner.launch import JOB_PYTHON_ENV, hyperparameter_args, job_environment, launcher
from local_runner.store import LocalObjectStore


def test_the_environment_of_a_started_job_drops_an_outer_jobs_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    outer = {"SM_HPS": "{}", "SM_CHANNEL_TRAIN": "/x", "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}
    for name, value in {**outer, "QA_KEEP": "yes"}.items():
        monkeypatch.setenv(name, value)
    environment = job_environment()
    assert not set(outer) & set(environment)
    assert environment["QA_KEEP"] == "yes"


@pytest.mark.usefixtures("cold_python")
def test_one_process_runs_the_interpreter_and_more_run_torchrun_on_a_local_free_port() -> None:
    assert launcher(1) == [sys.executable]
    command = launcher(2)
    assert command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert {"--nproc_per_node=2", "--master_addr=127.0.0.1"} <= set(command)
    [port] = [part.removeprefix("--master_port=") for part in command if part.startswith("--master_port=")]
    assert 0 < int(port) < 65536


def test_jobs_start_with_the_interpreter_that_local_job_python_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JOB_PYTHON_ENV, "/opt/warm/python3")
    assert launcher(1) == ["/opt/warm/python3"]
    assert launcher(2)[:3] == ["/opt/warm/python3", "-m", "torch.distributed.run"]


def test_hyperparameters_are_passed_as_name_value_arguments() -> None:
    assert hyperparameter_args({"epochs": 3, "precision": "bf16"}) == ["--epochs", "3", "--precision", "bf16"]


def training_request(instance_type: str = "ml.p4d.24xlarge", **hyperparameters: str) -> dict[str, Any]:
    """A CreateTrainingJob request in the shape the SDK writes (string hyperparameters JSON-encoded)."""
    return {
        "AlgorithmSpecification": {"TrainingImage": "image", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://artifacts/models/"},
        "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": 2, "VolumeSizeInGB": 100},
        "RoleArn": "arn:aws:iam::000000000000:role/job",
        "InputDataConfig": [
            {"ChannelName": name, "DataSource": {"S3DataSource": {"S3Uri": f"s3://data/{name}/"}}}
            for name in ("train", "model")
        ],
        "HyperParameters": {
            "epochs": "3",
            "precision": '"bf16"',
            "sagemaker_program": '"train.py"',
            "sagemaker_submit_directory": '"s3://code/source.tar.gz"',
            **hyperparameters,
        },
        "CheckpointConfig": {"S3Uri": "s3://artifacts/checkpoints/", "LocalPath": "/opt/ml/checkpoints"},
    }


def test_a_torchrun_request_resolves_to_one_process_per_core_at_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    request = training_request(sagemaker_torch_distributed_enabled="true")
    job = resolve_training_job("FineTune", request, tmp_path, "exec-FineTune", {"epochs": "1"})
    assert job.requested_processes == 2 * INSTANCE_TYPES["ml.p4d.24xlarge"].gpus
    assert (job.processes, job.backend) == (2, "torchrun")
    assert job.program == "train.py" and job.submit_directory == "s3://code/source.tar.gz"
    assert job.hyperparameters == {"epochs": "1", "precision": "bf16"}
    assert job.channel_uris == {"train": "s3://data/train/", "model": "s3://data/model/"}
    opt_ml = tmp_path / "opt" / "ml"
    assert (job.code_dir, job.model_dir, job.channel_dir("train")) == (
        opt_ml / "code",
        opt_ml / "model",
        opt_ml / "input" / "data" / "train",
    )
    assert (job.checkpoint_uri, job.checkpoint_dir) == ("s3://artifacts/checkpoints/", opt_ml / "checkpoints")
    assert job.artifact_uri == "s3://artifacts/models/exec-FineTune/output/model.tar.gz"


@pytest.mark.parametrize(
    ("hyperparameters", "processes", "backend"),
    [
        ({"sagemaker_distributed_dataparallel_enabled": "true"}, 2, "SMDDP (run locally with torchrun + gloo)"),
        ({}, 1, None),
    ],
)
def test_smddp_runs_with_torchrun_here_and_a_job_without_data_parallelism_in_one_process(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    hyperparameters: dict[str, str],
    processes: int,
    backend: str | None,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    job = resolve_training_job("FineTune", training_request(**hyperparameters), tmp_path, "j", {})
    assert (job.processes, job.backend) == (processes, backend)


def test_an_override_of_a_hyperparameter_the_step_lacks_is_rejected_by_name(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedDefinition, match=r"no hyperparameters \['epoch'\] to override"):
        resolve_training_job("FineTune", training_request(), tmp_path, "j", {"epoch": "1"})


GZIP_MAGIC = b"\x1f\x8b"


def test_the_model_archive_is_a_stored_gzip_tar_with_the_final_metrics(tmp_path: Path) -> None:
    """model.tar.gz as SageMaker's (gzip, the model folder's files at its root), stored without deflate: float
    weights barely compress and deflating the demo's model took seconds of every run."""
    root = tmp_path / "FineTune"
    model_dir = root / "opt" / "ml" / "model"
    model_dir.mkdir(parents=True)
    weights = bytes(256 * 1024)  # zeros: deflate would shrink them to a few hundred bytes
    (model_dir / "model.safetensors").write_bytes(weights)
    (model_dir / "config.json").write_text("{}")
    (root / JOB_LOG).write_text("evaluation: exact_match=80.0 f1=88.5\n")
    job = SimpleNamespace(
        container=SimpleNamespace(root=root),
        model_dir=model_dir,
        artifact_uri="s3://artifacts/models/exec-FineTune/output/model.tar.gz",
        tensorboard_uri=None,
        job_name="exec-FineTune",
        metric_definitions=[{"Name": "eval:f1", "Regex": r"f1=([0-9.]+)"}],
    )
    store = LocalObjectStore(tmp_path / "s3")
    properties = collect_model(job, store)  # type: ignore[arg-type]
    archive = store.path(job.artifact_uri)
    assert archive.stat().st_size > len(weights)  # stored: not deflated
    with tarfile.open(archive, "r:gz") as tar:
        assert sorted(tar.getnames()) == ["config.json", "model.safetensors"]
        member = tar.extractfile("model.safetensors")
        assert member is not None and member.read() == weights
    assert archive.read_bytes()[:2] == GZIP_MAGIC  # a gzip stream, as SageMaker's archive
    assert properties["FinalMetricDataList"] == [{"MetricName": "eval:f1", "Value": 88.5}]
