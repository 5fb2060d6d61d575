"""make verify-model against moto server: a package registered from RecordModel's registry copy passes; a copy
overwritten after registration, a package whose ModelDataUrl or metadata differs from what its execution's
RecordModel step recorded, or one whose metadata names another execution, is reported in one line.

moto keeps CustomerMetadataProperties, object versions and UpdateModelPackage; it does not implement
ListPipelineExecutionSteps (moto 5.2.5), so `WithExecutionSteps` answers that one call with the steps an execution
would list (RecordModel's Lambda OutputParameters, RegisterModel's package Arn), and the tool runs in-process."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import pytest
from qa.outputs import RECORD_MODEL_SHA256, RECORD_MODEL_URI, RECORD_MODEL_VERSION_ID

from pipeline_steps.names import (
    MODEL_METADATA_ARCHIVE_SHA256,
    MODEL_METADATA_ARCHIVE_VERSION_ID,
    MODEL_METADATA_EXECUTION_ARN,
    RECORD_STEP,
)
from tests.tools.conftest import assert_one_line_error, run_cli
from tools import verify_model
from tools.deployment import ToolError

EXECUTION = "arn:aws:sagemaker:us-east-1:123456789012:pipeline/hfqa-dev-qa-fine-tuning/execution/e1"


class WithExecutionSteps:
    """moto's SageMaker client, plus ListPipelineExecutionSteps (which moto does not implement) from `steps`."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.steps: dict[str, list[dict[str, Any]]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def list_pipeline_execution_steps(self, PipelineExecutionArn: str, **_: Any) -> dict[str, Any]:
        return {"PipelineExecutionSteps": self.steps[PipelineExecutionArn]}

    def record(self, execution: str, outputs: dict[str, str], package: str) -> None:
        """The steps of an execution whose RecordModel output `outputs` and whose RegisterModel created `package`."""
        parameters = [{"Name": k, "Value": v} for k, v in outputs.items()]
        self.steps[execution] = [
            {"StepName": RECORD_STEP, "Metadata": {"Lambda": {"Arn": "fn", "OutputParameters": parameters}}},
            {"StepName": "RegisterModel-RegisterModel", "Metadata": {"RegisterModel": {"Arn": package}}},
        ]


@dataclass(frozen=True)
class Registered:
    sagemaker: WithExecutionSteps
    s3: Any
    package: str
    uri: str
    key: str
    outputs: dict[str, str]


def register_copy(s3: Any, sagemaker_client: Any, bucket: str, group: str, archive: bytes) -> Registered:
    """What RecordModel and RegisterModel leave: registry/<sha256>/model.tar.gz in the versioned `bucket`, a
    package that references it with its digest, version and execution, and the execution's steps."""
    sagemaker = WithExecutionSteps(sagemaker_client)
    sha256 = hashlib.sha256(archive).hexdigest()
    key = f"registry/{sha256}/model.tar.gz"
    uri = f"s3://{bucket}/{key}"
    version = s3.put_object(Bucket=bucket, Key=key, Body=archive)["VersionId"]
    outputs = {RECORD_MODEL_URI: uri, RECORD_MODEL_SHA256: sha256, RECORD_MODEL_VERSION_ID: version}
    sagemaker.create_model_package_group(ModelPackageGroupName=group)
    package = sagemaker.create_model_package(
        ModelPackageGroupName=group,
        InferenceSpecification={
            "Containers": [{"Image": "image", "ModelDataUrl": uri}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        CustomerMetadataProperties={
            MODEL_METADATA_ARCHIVE_SHA256: sha256,
            MODEL_METADATA_ARCHIVE_VERSION_ID: version,
            MODEL_METADATA_EXECUTION_ARN: EXECUTION,
        },
    )["ModelPackageArn"]
    sagemaker.record(EXECUTION, outputs, package)
    return Registered(sagemaker, s3, package, uri, key, outputs)


def on(deployed) -> tuple[Any, Any, str]:
    return deployed.client("s3"), deployed.client("sagemaker"), deployed.artifacts_bucket


def problems(registered: Registered) -> list[str]:
    return verify_model.verify(registered.sagemaker, registered.s3, registered.package).problems


def test_an_unchanged_copy_passes_and_an_overwritten_one_is_reported(deployed, monkeypatch, capsys):
    registered = register_copy(*on(deployed), "verify-ok", b"model weights v1")
    monkeypatch.setattr(
        verify_model,
        "load_deployment",
        lambda env: type(
            "D", (), {"client": lambda self, s: registered.sagemaker if s == "sagemaker" else registered.s3}
        )(),
    )
    assert verify_model.main(["--package", registered.package]) == 0
    version = registered.outputs[RECORD_MODEL_VERSION_ID]
    assert capsys.readouterr().out.startswith(f"ok: {registered.uri} version {version}")

    current = registered.s3.put_object(Bucket=deployed.artifacts_bucket, Key=registered.key, Body=b"other")["VersionId"]
    assert problems(registered) == [
        f"{registered.uri} was overwritten after registration (current version {current}): an endpoint created "
        "from the package's ModelDataUrl now serves that object"
    ]


def test_a_digest_that_differs_from_the_record_is_reported(deployed):
    registered = register_copy(*on(deployed), "verify-digest", b"weights")
    registered.sagemaker.record(EXECUTION, {**registered.outputs, RECORD_MODEL_SHA256: "0" * 64}, registered.package)
    found = problems(registered)
    assert f"has SHA-256 {hashlib.sha256(b'weights').hexdigest()}, its execution recorded {'0' * 64}" in found[-1]


def test_metadata_naming_another_execution_is_refused(deployed):
    registered = register_copy(*on(deployed), "verify-other", b"weights 2")
    other = EXECUTION.replace("/e1", "/e2")
    registered.sagemaker.record(other, registered.outputs, "arn:aws:sagemaker:us-east-1:123456789012:model-package/x/9")
    metadata = registered.sagemaker.describe_model_package(ModelPackageName=registered.package)
    registered.sagemaker.update_model_package(
        ModelPackageArn=registered.package,
        CustomerMetadataProperties={**metadata["CustomerMetadataProperties"], MODEL_METADATA_EXECUTION_ARN: other},
    )
    with pytest.raises(ToolError, match=f"execution {other} .* registered .*/x/9, not this one"):
        problems(registered)


def test_an_unknown_package_is_one_line_with_its_whole_arn(deployed, deployed_env):
    arn = "arn:aws:sagemaker:us-east-1:123456789012:model-package/nothing/1"
    assert_one_line_error(run_cli("tools.verify_model", "--package", arn, env=deployed_env), f"{arn} not found")


def test_an_execution_without_the_registry_copy_outputs_is_one_clear_line(deployed):
    registered = register_copy(*on(deployed), "verify-old", b"weights 3")
    registered.sagemaker.steps[EXECUTION] = registered.sagemaker.steps[EXECUTION][1:]  # RegisterModel only
    with pytest.raises(ToolError, match=f"execution {EXECUTION} has no RecordModel output ModelUri or ModelSha256"):
        problems(registered)
