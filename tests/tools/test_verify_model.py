"""make verify-model against moto server: a model package whose archive is unchanged passes; one whose
archive was overwritten after registration, or whose recorded SHA-256 differs, is reported in one line.
(moto keeps CustomerMetadataProperties and object versions; it does not check the package's other fields.)"""

from __future__ import annotations

import hashlib

from pipeline_steps.names import MODEL_METADATA_ARCHIVE_SHA256, MODEL_METADATA_ARCHIVE_VERSION_ID
from tests.tools.conftest import assert_one_line_error, run_cli

KEY = "models/pipelines-ft/output/model.tar.gz"


def register(deployed, group: str, sha256: str, version: str) -> str:
    sagemaker = deployed.client("sagemaker")
    sagemaker.create_model_package_group(ModelPackageGroupName=group)
    return sagemaker.create_model_package(
        ModelPackageGroupName=group,
        InferenceSpecification={
            "Containers": [{"Image": "image", "ModelDataUrl": f"s3://{deployed.artifacts_bucket}/{KEY}"}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        CustomerMetadataProperties={MODEL_METADATA_ARCHIVE_SHA256: sha256, MODEL_METADATA_ARCHIVE_VERSION_ID: version},
    )["ModelPackageArn"]


def test_an_unchanged_archive_passes_and_an_overwritten_one_is_reported(deployed, deployed_env):
    s3 = deployed.client("s3")
    archive = b"model weights v1"
    version = s3.put_object(Bucket=deployed.artifacts_bucket, Key=KEY, Body=archive)["VersionId"]
    package = register(deployed, "verify-ok", hashlib.sha256(archive).hexdigest(), version)

    result = run_cli("tools.verify_model", "--package", package, env=deployed_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"ok: s3://{deployed.artifacts_bucket}/{KEY} version {version}")

    current = s3.put_object(Bucket=deployed.artifacts_bucket, Key=KEY, Body=b"something else")["VersionId"]
    assert_one_line_error(
        run_cli("tools.verify_model", "--package", package, env=deployed_env),
        "does not match its archive",
        f"was overwritten after registration (current version {current})",
    )


def test_a_recorded_digest_that_differs_is_reported(deployed, deployed_env):
    s3 = deployed.client("s3")
    version = s3.put_object(Bucket=deployed.artifacts_bucket, Key=KEY, Body=b"weights")["VersionId"]
    package = register(deployed, "verify-digest", "0" * 64, version)
    line = assert_one_line_error(run_cli("tools.verify_model", "--package", package, env=deployed_env))
    assert f"has SHA-256 {hashlib.sha256(b'weights').hexdigest()}, the package records {'0' * 64}" in line


def test_an_unknown_package_is_one_line_with_its_whole_arn(deployed, deployed_env):
    arn = "arn:aws:sagemaker:us-east-1:123456789012:model-package/nothing/1"
    assert_one_line_error(run_cli("tools.verify_model", "--package", arn, env=deployed_env), f"{arn} not found")
