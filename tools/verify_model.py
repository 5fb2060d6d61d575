"""Check a registered model package against what its execution measured: `make verify-model PACKAGE=<arn>`.

A package's ModelDataUrl and CustomerMetadataProperties can be edited after registration (UpdateModelPackage takes
both), so neither is the reference. The reference is the pipeline execution that registered the package: its
RecordModel step's outputs (ListPipelineExecutionSteps), the registry copy registry/<sha256>/model.tar.gz that
step made, its S3 version id and SHA-256. The check finds that execution (the package's pipeline_execution_arn,
accepted only when that execution's RegisterModel step created this very package), compares the package's
ModelDataUrl, digest and version with those outputs, hashes the recorded version of the object, and looks at the
key's current version. Any difference is reported. Read-only calls with your credentials.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from typing import Any

from qa.outputs import RECORD_MODEL_SHA256, RECORD_MODEL_URI, RECORD_MODEL_VERSION_ID, REGISTRY_ARCHIVE

from config.loader import DEFAULT_ENV
from pipeline_steps.names import (
    MODEL_METADATA_ARCHIVE_SHA256,
    MODEL_METADATA_ARCHIVE_VERSION_ID,
    MODEL_METADATA_EXECUTION_ARN,
    RECORD_STEP,
)
from tools.deployment import ToolParser, fail, is_sagemaker_not_found, load_deployment, run_tool, split_s3_uri

CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class Package:
    """What a model package says of its archive (each of it editable after registration)."""

    arn: str
    archive: str  # ModelDataUrl
    sha256: str
    version: str
    execution: str


@dataclass(frozen=True)
class Recorded:
    """What the execution's RecordModel step output: the registry copy it made."""

    archive: str
    sha256: str
    version: str


@dataclass(frozen=True)
class Verdict:
    archive: str  # s3:// URI of the registry copy, as RecordModel recorded it
    recorded_sha256: str
    recorded_version: str
    actual_sha256: str | None  # of the recorded version; None when that version is gone
    current_version: str | None
    package_problems: tuple[str, ...] = ()  # the package against its execution's record

    @property
    def problems(self) -> list[str]:
        found = list(self.package_problems)
        if self.actual_sha256 is None:
            found.append(f"the recorded version {self.recorded_version} of {self.archive} no longer exists")
        elif self.actual_sha256 != self.recorded_sha256:
            found.append(
                f"{self.archive} version {self.recorded_version} has SHA-256 {self.actual_sha256}, "
                f"its execution recorded {self.recorded_sha256}"
            )
        if self.current_version not in (None, self.recorded_version):
            found.append(
                f"{self.archive} was overwritten after registration (current version {self.current_version}): "
                "an endpoint created from the package's ModelDataUrl now serves that object"
            )
        return found


def package_archive(sagemaker: Any, package: str) -> Package:
    """What a model package records of its archive and its execution."""
    from botocore.exceptions import ClientError

    try:
        described = sagemaker.describe_model_package(ModelPackageName=package)
    except ClientError as err:
        if is_sagemaker_not_found(err):
            fail(f"model package {package} not found: pass a model package ARN from make runs")
        raise
    metadata = described.get("CustomerMetadataProperties", {})
    keys = (MODEL_METADATA_ARCHIVE_SHA256, MODEL_METADATA_ARCHIVE_VERSION_ID, MODEL_METADATA_EXECUTION_ARN)
    missing = [k for k in keys if k not in metadata]
    if missing:
        fail(
            f"model package {package} records no {' or '.join(missing)}: it was registered before the registry copy "
            "(RecordModel's registry/<sha256>/model.tar.gz); register it again from a new execution"
        )
    return Package(
        arn=described.get("ModelPackageArn", package),
        archive=described["InferenceSpecification"]["Containers"][0]["ModelDataUrl"],
        sha256=metadata[MODEL_METADATA_ARCHIVE_SHA256],
        version=metadata[MODEL_METADATA_ARCHIVE_VERSION_ID],
        execution=metadata[MODEL_METADATA_EXECUTION_ARN],
    )


def execution_steps(sagemaker: Any, execution: str) -> list[dict[str, Any]]:
    """The execution's steps (ListPipelineExecutionSteps, every page)."""
    steps: list[dict[str, Any]] = []
    token: dict[str, str] = {}
    while True:
        page = sagemaker.list_pipeline_execution_steps(PipelineExecutionArn=execution, **token)
        steps.extend(page.get("PipelineExecutionSteps", []))
        if not page.get("NextToken"):
            return steps
        token = {"NextToken": page["NextToken"]}


def recorded_by_execution(sagemaker: Any, package: Package) -> Recorded:
    """The registry copy that the package's execution recorded, once that execution is shown to have registered
    this package (its RegisterModel step's Arn, RegisterModelStepMetadata:
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_RegisterModelStepMetadata.html); the RecordModel
    step's OutputParameters (LambdaStepMetadata:
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_LambdaStepMetadata.html)."""
    from botocore.exceptions import ClientError

    try:
        steps = execution_steps(sagemaker, package.execution)
    except ClientError as err:
        if is_sagemaker_not_found(err):
            fail(f"model package {package.arn} names execution {package.execution}, which does not exist")
        raise
    registered = [s["Metadata"]["RegisterModel"].get("Arn") for s in steps if "RegisterModel" in s.get("Metadata", {})]
    if package.arn not in registered:
        fail(
            f"model package {package.arn} does not match its archive: execution {package.execution} (its "
            f"{MODEL_METADATA_EXECUTION_ARN}) registered {', '.join(map(str, registered)) or 'no package'}, not this "
            "one: the package's metadata was changed after registration"
        )
    outputs = {
        p["Name"]: p["Value"]
        for s in steps
        if s.get("StepName") == RECORD_STEP
        for p in s.get("Metadata", {}).get("Lambda", {}).get("OutputParameters", [])
    }
    missing = [k for k in (RECORD_MODEL_URI, RECORD_MODEL_SHA256, RECORD_MODEL_VERSION_ID) if k not in outputs]
    if missing:
        fail(
            f"execution {package.execution} has no {RECORD_STEP} output {' or '.join(missing)}: it ran before the "
            "registry copy; register the model again from a new execution"
        )
    return Recorded(outputs[RECORD_MODEL_URI], outputs[RECORD_MODEL_SHA256], outputs[RECORD_MODEL_VERSION_ID])


def package_problems(package: Package, recorded: Recorded) -> tuple[str, ...]:
    """Where the package differs from what its execution recorded."""
    found = [
        f"the package's {name} is {said}, execution {package.execution}'s {RECORD_STEP} recorded {measured}"
        for name, said, measured in (
            ("ModelDataUrl", package.archive, recorded.archive),
            (MODEL_METADATA_ARCHIVE_SHA256, package.sha256, recorded.sha256),
            (MODEL_METADATA_ARCHIVE_VERSION_ID, package.version, recorded.version),
        )
        if said != measured
    ]
    if not recorded.archive.endswith(f"/{recorded.sha256}/{REGISTRY_ARCHIVE}"):
        found.append(f"{recorded.archive} is not the content-addressed copy of SHA-256 {recorded.sha256}")
    return tuple(found)


def sha256_of_version(s3: Any, bucket: str, key: str, version: str) -> str | None:
    from botocore.exceptions import ClientError

    try:
        body = s3.get_object(Bucket=bucket, Key=key, VersionId=version)["Body"]
    except ClientError as err:
        if err.response["Error"]["Code"] in ("NoSuchVersion", "NoSuchKey", "404", "InvalidArgument"):
            return None
        raise
    digest = hashlib.sha256()
    for chunk in iter(lambda: body.read(CHUNK), b""):
        digest.update(chunk)
    return digest.hexdigest()


def current_version(s3: Any, bucket: str, key: str) -> str | None:
    from botocore.exceptions import ClientError

    try:
        return str(s3.head_object(Bucket=bucket, Key=key).get("VersionId"))
    except ClientError as err:
        if err.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            return None
        raise


def verify(sagemaker: Any, s3: Any, package: str) -> Verdict:
    described = package_archive(sagemaker, package)
    recorded = recorded_by_execution(sagemaker, described)
    bucket, key = split_s3_uri(recorded.archive)
    return Verdict(
        archive=recorded.archive,
        recorded_sha256=recorded.sha256,
        recorded_version=recorded.version,
        actual_sha256=sha256_of_version(s3, bucket, key, recorded.version),
        current_version=current_version(s3, bucket, key),
        package_problems=package_problems(described, recorded),
    )


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(__doc__)
    parser.add_argument("--package", required=True, help="model package ARN")
    parser.add_argument("--env", default=DEFAULT_ENV)
    args = parser.parse_args(argv)

    deployment = load_deployment(args.env)
    verdict = verify(deployment.client("sagemaker"), deployment.client("s3"), args.package)
    if verdict.problems:
        fail(f"model package {args.package} does not match its archive: {'; '.join(verdict.problems)}")
    print(f"ok: {verdict.archive} version {verdict.recorded_version} has the recorded SHA-256 {verdict.actual_sha256}")
    return 0


def cli() -> None:
    sys.exit(run_tool(main))


if __name__ == "__main__":
    cli()
