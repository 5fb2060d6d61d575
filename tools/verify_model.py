"""Check a registered model package against its model archive: `make verify-model PACKAGE=<arn>`.

The package records, in its CustomerMetadataProperties, the SHA-256 and the S3 version id of the model.tar.gz
it was registered with. The check reads that version of the archive and hashes it, and looks at the key's
current version: an archive that was overwritten, or whose recorded version was changed or deleted, is
reported. Read-only calls with your credentials.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from typing import Any

from config.loader import DEFAULT_ENV
from pipeline_steps.names import MODEL_METADATA_ARCHIVE_SHA256, MODEL_METADATA_ARCHIVE_VERSION_ID
from tools.deployment import ToolParser, fail, is_sagemaker_not_found, load_deployment, run_tool, split_s3_uri

CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class Verdict:
    archive: str  # s3:// URI of model.tar.gz
    recorded_sha256: str
    recorded_version: str
    actual_sha256: str | None  # of the recorded version; None when that version is gone
    current_version: str | None

    @property
    def problems(self) -> list[str]:
        found = []
        if self.actual_sha256 is None:
            found.append(f"the recorded version {self.recorded_version} of {self.archive} no longer exists")
        elif self.actual_sha256 != self.recorded_sha256:
            found.append(
                f"{self.archive} version {self.recorded_version} has SHA-256 {self.actual_sha256}, "
                f"the package records {self.recorded_sha256}"
            )
        if self.current_version not in (None, self.recorded_version):
            found.append(
                f"{self.archive} was overwritten after registration (current version {self.current_version}): "
                "an endpoint created from the package's ModelDataUrl now serves that object"
            )
        return found


def package_archive(sagemaker: Any, package: str) -> tuple[str, str, str]:
    """(archive URI, recorded SHA-256, recorded S3 version id) of a model package."""
    from botocore.exceptions import ClientError

    try:
        described = sagemaker.describe_model_package(ModelPackageName=package)
    except ClientError as err:
        if is_sagemaker_not_found(err):
            fail(f"model package {package} not found: pass a model package ARN from make runs")
        raise
    metadata = described.get("CustomerMetadataProperties", {})
    missing = [k for k in (MODEL_METADATA_ARCHIVE_SHA256, MODEL_METADATA_ARCHIVE_VERSION_ID) if k not in metadata]
    if missing:
        fail(f"model package {package} records no {' or '.join(missing)}: it was registered before archive pinning")
    containers = described["InferenceSpecification"]["Containers"]
    sha256, version = metadata[MODEL_METADATA_ARCHIVE_SHA256], metadata[MODEL_METADATA_ARCHIVE_VERSION_ID]
    return containers[0]["ModelDataUrl"], sha256, version


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
    archive, recorded_sha256, recorded_version = package_archive(sagemaker, package)
    bucket, key = split_s3_uri(archive)
    return Verdict(
        archive=archive,
        recorded_sha256=recorded_sha256,
        recorded_version=recorded_version,
        actual_sha256=sha256_of_version(s3, bucket, key, recorded_version),
        current_version=current_version(s3, bucket, key),
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
