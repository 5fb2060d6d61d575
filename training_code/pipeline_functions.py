"""The pipeline's Lambda functions (SageMaker Pipelines Lambda steps): no instance starts for them.

    claim_handler          ClaimManifest: check the parameters, claim the manifest version and its data once,
                           check the execution limits, pin the data (processing.tokenize_in "fine_tune": and
                           validate every record of it, estimating its stats.json: qa/claim_validation.py)
    estimate_cost_handler  EstimateTrainingCost: the training estimate of qa/cost.py from stats.json
    record_model_handler   RecordModel: the trained archive's one version, hashed and copied to registry/<sha256>/,
                           and the model-quality report

Runs on the Lambda Python 3.12 runtime: the standard library, boto3 (which the runtime includes:
https://docs.aws.amazon.com/lambda/latest/dg/lambda-python.html; S3ObjectStore checks that its botocore can make
conditional writes) and the stdlib-only qa modules. With
LOCAL_S3_ROOT set (the local runner), S3 is that folder (s3://bucket/key -> <root>/bucket/key) and object
versions live in <root>/.versions/bucket/key/<version id> (version id: the content's SHA-256 prefix).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from qa.claim_validation import fitted, size_error, validate_dataset
from qa.cost import run_estimate
from qa.outputs import (
    ANY_DATASETS_BUCKET,
    BASE_MODEL_URI,
    CLAIM_CLAIMED_BY,
    CLAIM_DATASET_ERROR,
    CLAIM_DUPLICATE,
    CLAIM_DUPLICATE_REASON,
    CLAIM_IGNORED,
    CLAIM_INPUT_URI,
    CLAIM_MANIFEST_SHA256,
    CLAIM_OUTPUTS,
    CLAIM_PARAMETER_ERROR,
    CLAIM_STATS_FOLDER,
    CLAIM_STATS_URI,
    CLAIM_VALIDATION_OUTPUTS,
    CONTENT_CLAIMS,
    DATASET_BUCKET,
    DATASET_MANIFEST_FILE,
    DATASET_NAME_CHARACTER,
    DATASET_NAME_FIRST,
    DATASET_NAME_MAX_LENGTH,
    DATASETS_ROOT,
    DOC_STRIDE,
    DUPLICATE_NO,
    DUPLICATE_YES,
    EPOCHS,
    ESTIMATED_COST_OUTPUT,
    EVALUATION_FILE,
    HELD_MANIFEST_FILE,
    INPUT_ARTIFACTS_BUCKET,
    INPUT_BENCHMARK_LABEL_NAMES,
    INPUT_BOUNDS,
    INPUT_CLAIMS_PREFIX,
    INPUT_COST_MODEL,
    INPUT_EXECUTION_ARN,
    INPUT_INPUTS_PREFIX,
    INPUT_MAX_WINDOWS_PER_EXAMPLE,
    INPUT_METRICS,
    INPUT_MODEL_ARCHIVE_URI,
    INPUT_REGISTRY_URI,
    INPUT_STATS_URI,
    INPUT_TASK,
    INPUT_VALIDATE,
    LOCAL_EXECUTIONS_ENV,
    LOCAL_S3_ROOT_ENV,
    LOCAL_VERSIONS_DIR,
    MANIFEST_KEY,
    MANIFEST_V2_FORMAT,
    MANIFEST_VERSION_ID,
    MAX_SEQ_LENGTH,
    PINNED_MANIFEST_FILE,
    RECORD_MODEL_SHA256,
    RECORD_MODEL_URI,
    RECORD_MODEL_VERSION_ID,
    RECORD_REPORT_URI,
    RECORD_TRAINED_VERSION_ID,
    SKIP_INVALID_RECORDS,
    SPLITS,
    STATS_FILE,
    TASK_FILE,
    TRAIN_SPLIT,
    TRAINING_INSTANCE_COUNT,
    TRAINING_INSTANCE_TYPE,
    VALIDATION_SPLIT,
    content_version,
    datasets_root,
    manifest_key_split,
    model_quality_metrics,
    registry_archive_uri,
    same_s3_checksum,
    sha256_checksum,
)
from qa.parameter_rules import (
    RUN_PARAMETERS,
    data_key_problem,
    execution_limit_error,
    json_input,
    parameter_error,
    recent_executions,
    short,
    shown,
)
from qa.task_file import TaskFile
from tasks import TASK_NAMES, task

log = logging.getLogger("pipeline_functions")
log.setLevel(logging.INFO)

# Exactly <the task's dataset root>/<name>/<version>/manifest.json (or a held upload's held-manifest.json), with names
# and versions as the upload tool allows them.
DATASET_NAME = f"{DATASET_NAME_FIRST}{DATASET_NAME_CHARACTER}{{0,{DATASET_NAME_MAX_LENGTH - 1}}}"


def manifest_key_form(root: str) -> str:
    return f"{root}/<name>/<version>/{DATASET_MANIFEST_FILE} or {HELD_MANIFEST_FILE}"


def manifest_key_pattern(root: str) -> re.Pattern[str]:
    """The manifest keys of the pipeline whose dataset root is `root` (qa.outputs.datasets_root)."""
    return re.compile(
        f"{re.escape(root)}/({DATASET_NAME})/({DATASET_NAME})/"
        f"(?:{re.escape(DATASET_MANIFEST_FILE)}|{re.escape(HELD_MANIFEST_FILE)})"
    )


CONFLICT_RETRIES = 5
# An owner in one of these states will never finish: its claim may be taken over (DescribePipelineExecution,
# PipelineExecutionStatus: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribePipelineExecution.html).
ENDED_WITHOUT_RESULT = ("Failed", "Stopped")
# CopyObject copies objects up to 5 GB in one request
# (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html).
MAX_COPY_BYTES = 5 * 1024**3
# The claim's conditional writes: PutObject's IfNoneMatch and IfMatch parameters, in botocore's S3 model since
# 1.35.2 and 1.35.69 (both first in 1.35.69). The runtime's SDK is not pinned: "The version of the AWS SDK included
# in the Python runtime depends on the runtime version and your AWS Region"
# (https://docs.aws.amazon.com/lambda/latest/dg/lambda-python.html#python-sdk-included).
CONDITIONAL_WRITE_PARAMETERS = ("IfNoneMatch", "IfMatch")
CONDITIONAL_WRITES_BOTOCORE = "1.35.69"
# RecordModel's copy into the registry: CopyObject's IfNoneMatch ("Copies the object only if the object key name at
# the destination does not already exist", https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html),
# which S3 added in 2025, after PutObject's; the project's pinned botocore (1.44.8) has it.
CONDITIONAL_COPY_PARAMETER = "IfNoneMatch"


class ClaimError(RuntimeError):
    """The claim could not be decided; the message names the object and the fix. The step fails."""


class RecordError(RuntimeError):
    """The trained archive cannot be recorded as the training job's; the message names the object and the versions
    found. The step fails and nothing is registered."""


# ---------------------------------------------------------------------------------------------- object store


class ObjectStore(Protocol):
    def get(self, bucket: str, key: str, version_id: str | None = None) -> tuple[bytes, str | None, str]: ...
    def create_if_absent(self, bucket: str, key: str, body: bytes) -> bool: ...
    def replace_if_match(self, bucket: str, key: str, body: bytes, etag: str) -> bool: ...
    def put(self, bucket: str, key: str, body: bytes) -> str | None: ...
    def exists(self, bucket: str, key: str) -> bool: ...
    def current_version(self, bucket: str, key: str) -> tuple[str | None, int]: ...
    def copy(self, bucket: str, key: str, version_id: str | None, target_bucket: str, target_key: str) -> str | None:
        """Copy one object version; the copy's SHA-256 as S3 computed it (base64), None where it gives none."""
        ...

    def copy_if_absent(
        self, bucket: str, key: str, version_id: str, target_bucket: str, target_key: str
    ) -> str | None: ...
    def versions(self, bucket: str, key: str) -> list[str]: ...
    def stream(self, bucket: str, key: str, version_id: str) -> Iterator[bytes]: ...


class LocalObjectStore:
    """S3 as a folder, versioned enough to pin data: every put keeps a copy under .versions/."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, bucket: str, key: str) -> Path:
        if ".." in Path(key).parts or key.startswith("/"):
            raise ClaimError(f"invalid object key {key!r}")
        return self.root / bucket / key

    def _version_path(self, bucket: str, key: str, version_id: str) -> Path:
        return self.root / LOCAL_VERSIONS_DIR / bucket / key / version_id

    def get(self, bucket: str, key: str, version_id: str | None = None) -> tuple[bytes, str | None, str]:
        path = self._path(bucket, key)
        if version_id is not None:
            kept = self._version_path(bucket, key, version_id)
            if kept.is_file():
                body = kept.read_bytes()
                return body, version_id, hashlib.md5(body, usedforsecurity=False).hexdigest()
            if not (path.is_file() and content_version(path.read_bytes()) == version_id):
                raise FileNotFoundError(f"s3://{bucket}/{key} has no version {version_id}")
        body = path.read_bytes()
        return body, content_version(body), hashlib.md5(body, usedforsecurity=False).hexdigest()

    def create_if_absent(self, bucket: str, key: str, body: bytes) -> bool:
        path = self._path(bucket, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with os.fdopen(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY), "wb") as handle:
                handle.write(body)
        except FileExistsError:
            return False
        return True

    def replace_if_match(self, bucket: str, key: str, body: bytes, etag: str) -> bool:
        path = self._path(bucket, key)
        if not path.is_file() or hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest() != etag:
            return False
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_bytes(body)
        temporary.replace(path)
        return True

    def put(self, bucket: str, key: str, body: bytes) -> str | None:
        path = self._path(bucket, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        version = content_version(body)
        kept = self._version_path(bucket, key, version)
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(body)
        return version

    def exists(self, bucket: str, key: str) -> bool:
        return self._path(bucket, key).is_file()

    def current_version(self, bucket: str, key: str) -> tuple[str | None, int]:
        path = self._path(bucket, key)
        if not path.is_file():
            raise FileNotFoundError(f"s3://{bucket}/{key} does not exist")
        body = path.read_bytes()
        return content_version(body), len(body)

    def copy(self, bucket: str, key: str, version_id: str | None, target_bucket: str, target_key: str) -> str | None:
        body, _, _ = self.get(bucket, key, version_id)
        self.put(target_bucket, target_key, body)
        return sha256_checksum(hashlib.sha256(body).hexdigest())

    def copy_if_absent(self, bucket: str, key: str, version_id: str, target_bucket: str, target_key: str) -> str | None:
        body, _, _ = self.get(bucket, key, version_id)
        if not self.create_if_absent(target_bucket, target_key, body):
            return None
        version = content_version(body)
        kept = self._version_path(target_bucket, target_key, version)
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(body)
        return version

    def versions(self, bucket: str, key: str) -> list[str]:
        """Every kept version, and the current file's when it was written past the store (no kept copy)."""
        kept = self._version_path(bucket, key, "x").parent
        found = sorted(p.name for p in kept.iterdir()) if kept.is_dir() else []
        path = self._path(bucket, key)
        if path.is_file() and (current := content_version(path.read_bytes())) not in found:
            found.append(current)
        return found

    def stream(self, bucket: str, key: str, version_id: str) -> Iterator[bytes]:
        body, _, _ = self.get(bucket, key, version_id)
        for start in range(0, len(body), 1 << 20):
            yield body[start : start + (1 << 20)]


class SdkTooOld(RuntimeError):
    """The runtime's botocore lacks an S3 parameter the functions send: one line naming the versions."""


def require_conditional_writes(s3: Any) -> None:
    """Stop, before any S3 call, when the S3 client's model has no PutObject IfNoneMatch / IfMatch: an older
    botocore would otherwise reject the claim's first conditional write with a parameter-validation error."""
    import botocore

    model = s3.meta.service_model
    accepted = model.operation_model("PutObject").input_shape.members
    missing = [name for name in CONDITIONAL_WRITE_PARAMETERS if name not in accepted]
    if missing:
        raise SdkTooOld(
            f"botocore {botocore.__version__} in this Lambda runtime has no S3 PutObject {' / '.join(missing)} "
            f"(conditional writes): the pipeline functions need botocore >= {CONDITIONAL_WRITES_BOTOCORE}"
        )
    if CONDITIONAL_COPY_PARAMETER not in model.operation_model("CopyObject").input_shape.members:
        raise SdkTooOld(
            f"botocore {botocore.__version__} in this Lambda runtime has no S3 CopyObject "
            f"{CONDITIONAL_COPY_PARAMETER} (conditional copies): RecordModel needs a botocore whose S3 model has it"
        )


class S3ObjectStore:
    """The same operations on Amazon S3 (boto3), with a botocore that can make conditional writes."""

    def __init__(self) -> None:
        import boto3

        self.s3 = boto3.client("s3")
        require_conditional_writes(self.s3)

    @staticmethod
    def _code(err: Exception) -> str:
        return getattr(err, "response", {}).get("Error", {}).get("Code", "")

    def get(self, bucket: str, key: str, version_id: str | None = None) -> tuple[bytes, str | None, str]:
        extra = {"VersionId": version_id} if version_id else {}
        response = self.s3.get_object(Bucket=bucket, Key=key, **extra)
        return response["Body"].read(), response.get("VersionId"), response["ETag"].strip('"')

    def _conditional(self, operation: Any, **kwargs: Any) -> dict[str, Any] | None:
        """The response of a conditional write, None when its condition failed."""
        from botocore.exceptions import ClientError

        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                return dict(operation(**kwargs))
            except ClientError as err:
                code = self._code(err)
                # 412: the condition failed. 409: a concurrent conditional write to the key is in flight, and
                # S3 says to retry (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
                if code == "PreconditionFailed":
                    return None
                if code != "ConditionalRequestConflict":
                    raise
            time.sleep(0.2 * 2**attempt)
        raise ClaimError(
            f"s3://{kwargs['Bucket']}/{kwargs['Key']}: {CONFLICT_RETRIES + 1} conditional writes in a row met a "
            "concurrent write (409 ConditionalRequestConflict); retry the execution"
        )

    def create_if_absent(self, bucket: str, key: str, body: bytes) -> bool:
        return self._conditional(self.s3.put_object, Bucket=bucket, Key=key, Body=body, IfNoneMatch="*") is not None

    def replace_if_match(self, bucket: str, key: str, body: bytes, etag: str) -> bool:
        written = self._conditional(self.s3.put_object, Bucket=bucket, Key=key, Body=body, IfMatch=f'"{etag}"')
        return written is not None

    def put(self, bucket: str, key: str, body: bytes) -> str | None:
        return self.s3.put_object(Bucket=bucket, Key=key, Body=body).get("VersionId")

    def exists(self, bucket: str, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.s3.head_object(Bucket=bucket, Key=key)
        except ClientError as err:
            if self._code(err) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def current_version(self, bucket: str, key: str) -> tuple[str | None, int]:
        response = self.s3.head_object(Bucket=bucket, Key=key)
        return response.get("VersionId"), response["ContentLength"]

    def copy(self, bucket: str, key: str, version_id: str | None, target_bucket: str, target_key: str) -> str | None:
        """CopyObject asking for a SHA-256 checksum: S3 computes it over the whole copy, a single-request object,
        whatever parts the source was uploaded in (a multipart SHA-256 checksum is only ever composite: "To change
        the checksum algorithm for an upload, you can copy an individual object",
        https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity-upload.html)."""
        source = {"Bucket": bucket, "Key": key, **({"VersionId": version_id} if version_id else {})}
        response = self.s3.copy_object(
            CopySource=source, Bucket=target_bucket, Key=target_key, ChecksumAlgorithm="SHA256"
        )
        return response.get("CopyObjectResult", {}).get("ChecksumSHA256")

    def copy_if_absent(self, bucket: str, key: str, version_id: str, target_bucket: str, target_key: str) -> str | None:
        copied = self._conditional(
            self.s3.copy_object,
            CopySource={"Bucket": bucket, "Key": key, "VersionId": version_id},
            Bucket=target_bucket,
            Key=target_key,
            IfNoneMatch="*",
        )
        return None if copied is None else str(copied.get("VersionId"))

    def versions(self, bucket: str, key: str) -> list[str]:
        """The version ids of `key`'s versions and delete markers (ListObjectVersions lists by prefix: other keys
        that start with `key` are left out)."""
        found = []
        for page in self.s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=key):
            for entry in (*page.get("Versions", []), *page.get("DeleteMarkers", [])):
                if entry["Key"] == key:
                    found.append(str(entry["VersionId"]))
        return found

    def stream(self, bucket: str, key: str, version_id: str) -> Iterator[bytes]:
        response = self.s3.get_object(Bucket=bucket, Key=key, VersionId=version_id)
        return iter(response["Body"].iter_chunks(1 << 20))


def object_store() -> ObjectStore:
    root = os.environ.get(LOCAL_S3_ROOT_ENV)
    return LocalObjectStore(Path(root)) if root else S3ObjectStore()


def execution_status(execution_arn: str) -> str:
    """The pipeline execution's status (the local runner's record when LOCAL_S3_ROOT is set); "Unknown" when no
    such execution exists."""
    local = os.environ.get(LOCAL_EXECUTIONS_ENV)
    if local:
        return _local_executions(Path(local)).get(execution_arn, ("Unknown", None))[0]
    import boto3
    from botocore.exceptions import ClientError

    try:
        response = boto3.client("sagemaker").describe_pipeline_execution(PipelineExecutionArn=execution_arn)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("ResourceNotFound", "ValidationException"):
            return "Unknown"
        raise
    return str(response["PipelineExecutionStatus"])


def _local_executions(path: Path) -> dict[str, tuple[str, float | None]]:
    """The local runner's execution record: ARN -> (status, start in epoch seconds or None), in start order."""
    recorded = json.loads(path.read_text()) if path.is_file() else {}
    return {
        arn: (str(value["status"]), float(value["start"])) if isinstance(value, dict) else (str(value), None)
        for arn, value in recorded.items()
    }


def earlier_executions(execution_arn: str) -> tuple[float, list[tuple[float, str]]]:
    """This execution's start (epoch seconds) and (start, status) of every execution of its pipeline that started
    before it and may still count (qa.parameter_rules.recent_executions). Locally: the runner's record, in start
    order. On SageMaker: those of the pipeline named in the execution's ARN (arn:...:pipeline/<name>/execution/<id>)."""
    now = time.time()
    local = os.environ.get(LOCAL_EXECUTIONS_ENV)
    if local:
        executions = _local_executions(Path(local))
        before = list(executions)[: list(executions).index(execution_arn)] if execution_arn in executions else []
        start = executions.get(execution_arn, ("", None))[1] or now
        return start, [(executions[arn][1] or start, executions[arn][0]) for arn in before]
    import boto3

    pipeline_name = execution_arn.rsplit("/execution/", 1)[0].rsplit(":pipeline/", 1)[-1]
    listed = recent_executions(boto3.client("sagemaker"), pipeline_name, now)
    start = next((started for started, _, arn in listed if arn == execution_arn), now)
    return start, [(started, status) for started, status, arn in listed if arn != execution_arn and started <= start]


def split_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


# ----------------------------------------------------------------------------------------------- the claim


def claim_digest(bucket: str, key: str, version: str) -> str:
    return hashlib.sha256(f"{bucket}\n{key}\n{version}".encode()).hexdigest()


def _read_claim(store: ObjectStore, bucket: str, key: str) -> tuple[dict[str, Any], str]:
    body, _, etag = store.get(bucket, key)
    try:
        claim = json.loads(body) if body.strip() else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        claim = None
    if not isinstance(claim, dict) or not isinstance(claim.get("execution_arn"), str):
        shown = "empty" if not body.strip() else "not a claim written by ClaimManifest"
        raise ClaimError(
            f"claim object s3://{bucket}/{key} is {shown}: nothing decides who owns this dataset version. Check who "
            "wrote it (only the claim function may), delete it, and start the execution again."
        )
    return claim, etag


def _claim(store: ObjectStore, claims_bucket: str, claim_key: str, what: str, me: str) -> str:
    """Claim `what` with the claim object `claim_key` for execution `me`; returns the owner's execution ARN (`me`
    when the claim is its own). Takes over the claim of an owner that failed or was stopped; a claim naming an
    execution that does not exist is an error, not a duplicate."""
    body = json.dumps({"execution_arn": me, "manifest": what, "claimed_at": int(time.time())}).encode()
    if store.create_if_absent(claims_bucket, claim_key, body):
        log.info("claimed %s for %s", what, me)
        return me
    claim, etag = _read_claim(store, claims_bucket, claim_key)
    owner = claim["execution_arn"]
    if owner == me:  # a retry of this step within the same execution
        return me
    status = execution_status(owner)
    if status == "Unknown":
        raise ClaimError(
            f"claim s3://{claims_bucket}/{claim_key} names {owner}, which is no execution of this pipeline: the "
            "claim was written by someone else. Delete it and start the execution again."
        )
    if status in ENDED_WITHOUT_RESULT:
        if store.replace_if_match(claims_bucket, claim_key, body, etag):
            log.info("took over %s from %s (%s)", what, owner, status)
            return me
        claim, _ = _read_claim(store, claims_bucket, claim_key)  # another execution took it over first
        owner = claim["execution_arn"]
        if owner == me:
            return me
    log.warning("%s is owned by %s (%s): this delivery stops here", what, owner, status)
    return owner


def read_manifest(store: ObjectStore, bucket: str, key: str, version: str) -> Any:
    """The manifest at `version`, parsed; ClaimError when it is no JSON."""
    body, _, _ = store.get(bucket, key, version)
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ClaimError(f"s3://{bucket}/{key} (version {version}) is not valid JSON: {err}") from None


def content_digest(store: ObjectStore, bucket: str, key: str, version: str) -> str:
    """SHA-256 of the data a manifest version pins: its files, each by key below the manifest's folder and S3
    version id (recorded by a v2 manifest; for an older list, the version current now), in key order. Manifests
    with one digest name the same objects, whatever their own bytes, key or version. Version ids rather than the
    SHA-256 values a manifest states: an uploader can write any SHA-256 (other people's data included), not
    another object's version id."""
    manifest = read_manifest(store, bucket, key, version)
    pinned = []
    for listed in manifest_files(manifest, bucket, key):
        version_id = listed.version_id
        if version_id is None:
            try:
                version_id = store.current_version(bucket, listed.source_key)[0]
            except FileNotFoundError:
                raise ClaimError(f"s3://{bucket}/{listed.source_key} named by the manifest does not exist") from None
        pinned.append([listed.relative, str(version_id)])
    return hashlib.sha256(json.dumps(sorted(pinned)).encode()).hexdigest()


def training_digest(event: dict[str, Any], content: str) -> str:
    """SHA-256 of what a run trains: the data's content digest with the run's parameters (the model, the epochs,
    the instance type, the per-run controls, ...). The same data with the same parameters is nothing new to train;
    another model or other parameters on the same data is (`make train MODEL=...`, `make start PARAMS=...`)."""
    parameters = {name: str(event.get(name, "")) for name in (*RUN_PARAMETERS, TRAINING_INSTANCE_TYPE)}
    return hashlib.sha256(json.dumps([content, sorted(parameters.items())]).encode()).hexdigest()


def content_claim_key(event: dict[str, Any], digest: str) -> str:
    return f"{event[INPUT_CLAIMS_PREFIX].strip('/')}/{CONTENT_CLAIMS}/{training_digest(event, digest)}.json"


def task_error(store: ObjectStore, event: dict[str, Any]) -> str:
    """ "" or one line refusing the upload before anything is claimed: a pipeline task that is none, or a manifest
    that declares a task other than the pipeline's (manifest v2's optional `task`; none declared is the
    pipeline's)."""
    pipeline_task = str(event.get(INPUT_TASK) or "")
    if pipeline_task not in TASK_NAMES:
        return f"{INPUT_TASK} {short(pipeline_task)!r} is not a task ({', '.join(TASK_NAMES)})"
    body, _, _ = store.get(event[DATASET_BUCKET], event[MANIFEST_KEY], event[MANIFEST_VERSION_ID])
    try:
        declared = json.loads(body).get("task") if body.lstrip().startswith(b"{") else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        declared = None  # the claim's own manifest checks name what is wrong with it
    if declared is not None and declared != pipeline_task:
        return (
            f"manifest task {short(str(declared))} does not match this pipeline's task {pipeline_task}: upload it to "
            f"the pipeline of {short(str(declared))}, or change the manifest's task"
        )
    return benchmark_labels_error(body, event)


def benchmark_labels_error(manifest_body: bytes, event: dict[str, Any]) -> str:
    """ "" or one line refusing a manifest whose label_names are not the pinned benchmark's
    (INPUT_BENCHMARK_LABEL_NAMES, set only with such a benchmark): the gate would score the model's classes against
    the benchmark's other ones.
    A manifest that is no JSON object is left to the claim's own checks, which name what is wrong with it."""
    pinned = event.get(INPUT_BENCHMARK_LABEL_NAMES)
    if pinned is None:
        return ""
    try:
        manifest = json.loads(manifest_body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return ""
    names = manifest.get("label_names") if isinstance(manifest, dict) else None
    expected = json.loads(pinned)
    if names == expected:
        return ""
    return (
        f"manifest label_names {short(json.dumps(names))} are not the benchmark's {short(json.dumps(expected))} "
        "(evaluation.benchmark.label_names): the gate scores on the benchmark, so declare its label names in "
        "its order"
    )


def claim_manifest(store: ObjectStore, event: dict[str, Any]) -> tuple[str, str]:
    """Claim the manifest version, then the data it names (its content digest), for this execution. Returns the
    owner's execution ARN (this execution's when both claims are its own) and, for a duplicate of another
    version's data, one line saying so ("" for a second delivery of the same version)."""
    me = event[INPUT_EXECUTION_ARN]
    bucket, key, version = event[DATASET_BUCKET], event[MANIFEST_KEY], event[MANIFEST_VERSION_ID]
    claims_bucket = event[INPUT_ARTIFACTS_BUCKET]
    claim_key = f"{event[INPUT_CLAIMS_PREFIX].strip('/')}/{claim_digest(bucket, key, version)}.json"
    manifest = f"s3://{bucket}/{key} (version {version})"
    owner = _claim(store, claims_bucket, claim_key, manifest, me)
    if owner != me:  # a duplicate delivery: the notification says so without a reason
        return owner, ""
    digest = content_digest(store, bucket, key, version)
    content_key = content_claim_key(event, digest)
    owner = _claim(store, claims_bucket, content_key, f"the data of {manifest}, content {digest}", me)
    if owner != me:
        return owner, (
            f"{short(key)} version {short(version)} names the same data (content digest {digest[:12]}) with the "
            f"same run parameters as a manifest already claimed: nothing new to train (another BaseModelUri or "
            f"parameter trains it; to train it again as it is, delete s3://{claims_bucket}/{content_key})"
        )
    return me, ""


# ----------------------------------------------------------------------------------------------- pinning


class ListedFile(NamedTuple):
    """One file a manifest names: its key relative to the manifest's folder, its source key, and what manifest v2
    records of it (the ManifestFile list records none of it; the SHA-256 is checked where recorded)."""

    relative: str
    source_key: str
    version_id: str | None
    size: int | None
    sha256: str | None
    composite_sha256: str | None  # a file uploaded in parts: S3's composite checksum (qa.data.ManifestFile)


SHA256_HEX = re.compile(r"[0-9a-f]{64}")
COMPOSITE_SHA256 = re.compile(r"[A-Za-z0-9+/]{43}=-[1-9][0-9]{0,4}")


def _v2_entry(entry: Any, where: str) -> tuple[Any, str, int | None, str | None, str | None]:
    """(key, version id, size, SHA-256, composite SHA-256: each None where absent) of a manifest v2 entry.
    Refuses an entry without its version id (an unpinned file would silently be whatever version is current) and
    checksums that are not ones."""
    if not isinstance(entry, dict):
        raise ClaimError(f"{where} lists {shown(entry)}: each file must be an object with key, version_id, sha256")
    relative, version_id, sha256 = entry.get("key"), entry.get("version_id"), entry.get("sha256")
    fix = "upload the dataset again with make upload-dataset, which records both for every file"
    if not isinstance(version_id, str) or not version_id:
        raise ClaimError(
            f"{where} lists {shown(relative)} without a version_id: a {MANIFEST_V2_FORMAT} manifest pins each file "
            f"at the S3 version its upload created; {fix}"
        )
    if sha256 is not None and not (isinstance(sha256, str) and SHA256_HEX.fullmatch(sha256)):
        raise ClaimError(
            f"{where} lists {shown(relative)} with sha256 {shown(sha256)}, not 64 lowercase hex digits: the claim "
            f"checks each file's content against it; {fix}"
        )
    composite = entry.get("composite_sha256")
    if composite is not None and not (isinstance(composite, str) and COMPOSITE_SHA256.fullmatch(composite)):
        raise ClaimError(
            f"{where} lists {shown(relative)} with composite_sha256 {shown(composite)}, not '<base64>-<parts>': {fix}"
        )
    size = entry.get("size")
    return relative, version_id, size if isinstance(size, int) else None, sha256, composite


def manifest_files(manifest: Any, bucket: str, manifest_key: str) -> list[ListedFile]:
    """Each file the manifest lists. Manifest v2 pins every file (version id and SHA-256, both required); the
    older ManifestFile array pins none. Each key must lie under a split folder (qa.outputs.manifest_key_split),
    as ValidateAndTokenize reads them: refused here, before any job is billed."""
    folder = manifest_key.rsplit("/", 1)[0] + "/"
    where = f"s3://{bucket}/{manifest_key}"
    entries: list[tuple[Any, str | None, int | None, str | None, str | None]]
    if isinstance(manifest, dict) and manifest.get("format") == MANIFEST_V2_FORMAT:
        listed = manifest.get("files")
        entries = [_v2_entry(entry, where) for entry in (listed if isinstance(listed, list) else [])]
    elif isinstance(manifest, list) and manifest and isinstance(manifest[0], dict) and "prefix" in manifest[0]:
        prefix_bucket, prefix = split_uri(str(manifest[0]["prefix"]))
        if prefix_bucket not in (bucket, ANY_DATASETS_BUCKET) or prefix != folder:
            raise ClaimError(f"manifest prefix {manifest[0]['prefix']!r} is not s3://{bucket}/{folder}")
        entries = [(entry, None, None, None, None) for entry in manifest[1:]]
    else:
        raise ClaimError(f"{where} is neither a manifest v2 ({MANIFEST_V2_FORMAT}) nor a ManifestFile list")
    files = []
    for relative, version_id, size, sha256, composite in entries:
        if not isinstance(relative, str) or not relative or relative.startswith("/") or ".." in relative.split("/"):
            raise ClaimError(f"{where} lists {relative!r}: keys must be relative, without '..'")
        if manifest_key_split(relative) is None:
            raise ClaimError(
                f"{where} lists {relative!r}, which is not under {'/ or '.join(SPLITS)}/: "
                "upload the dataset again with make upload-dataset"
            )
        files.append(ListedFile(relative, folder + relative, version_id, size, sha256, composite))
    if not files:
        raise ClaimError(f"{where} lists no files")
    return files


def pin_inputs(store: ObjectStore, event: dict[str, Any], input_uri: str) -> None:
    """Copy every file the manifest names, at the version it records (an old manifest: the version current now),
    under `input_uri`, checking each copy's SHA-256 (S3 computes it during the copy: the function reads no data)
    against the manifest's; then write the pinned manifest (SageMaker's ManifestFile format) there, last. Once
    that exists, the dataset version is pinned: a take-over finds it and copies nothing."""
    bucket, key, version = event[DATASET_BUCKET], event[MANIFEST_KEY], event[MANIFEST_VERSION_ID]
    target_bucket, prefix = split_uri(input_uri)
    if store.exists(target_bucket, prefix + PINNED_MANIFEST_FILE):
        return
    manifest = read_manifest(store, bucket, key, version)
    pins = []
    for relative, source_key, version_id, size, sha256, composite in manifest_files(manifest, bucket, key):
        problem = data_key_problem(source_key, event[INPUT_INPUTS_PREFIX], relative)
        if problem:
            raise ClaimError(f"s3://{bucket}/{key} lists {problem}")
        if version_id is None:
            version_id, size = store.current_version(bucket, source_key)
        if size is not None and size > MAX_COPY_BYTES:
            raise ClaimError(f"{source_key} is {size} bytes: split it into files of at most 5 GB")
        try:
            checksum = store.copy(bucket, source_key, version_id, target_bucket, prefix + relative)
        except FileNotFoundError:
            raise ClaimError(
                f"s3://{bucket}/{source_key} (version {version_id}) named by the manifest does not exist"
            ) from None
        # S3 computes a full-object SHA-256 for the copy, or may keep a multipart source's composite one.
        if sha256 is not None and not (
            checksum == sha256_checksum(sha256) or (composite is not None and same_s3_checksum(checksum, composite))
        ):
            raise ClaimError(
                f"s3://{bucket}/{source_key} (version {version_id}) has SHA-256 {checksum or '(none given)'} (base64), "
                f"but s3://{bucket}/{key} records {sha256_checksum(sha256)}: the file is not the one uploaded with "
                "this manifest. Upload the dataset again under a new version (make upload-dataset)"
            )
        pins.append({"key": relative, "version_id": version_id})
    pinned = [{"prefix": input_uri}, *(pin["key"] for pin in pins)]
    declared = TaskFile(event[INPUT_TASK], manifest_label_names(manifest, f"s3://{bucket}/{key}"))
    store.put(target_bucket, prefix + TASK_FILE, json.dumps(declared.document()).encode())
    store.put(
        target_bucket,
        prefix + PINS_FILE,
        json.dumps({"manifest": f"s3://{bucket}/{key}", "version": version, "files": pins}).encode(),
    )
    store.put(target_bucket, prefix + PINNED_MANIFEST_FILE, json.dumps(pinned, indent=1).encode())


PINS_FILE = "pins.json"  # beside the pinned manifest: {"manifest", "version", "files": [{"key", "version_id"}]}


def manifest_label_names(manifest: Any, where: str) -> tuple[str, ...] | None:
    """A manifest v2's `label_names` (None when it has none); ClaimError when they are not a list of strings.
    Whether they suit the task, its label_names_problems says (the claim's validation, or ValidateAndTokenize)."""
    names = manifest.get("label_names") if isinstance(manifest, dict) else None
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ClaimError(f"{where}: label_names must be a list of strings in label index order, got {shown(names)}")
    return tuple(names)


def claim_stats_uri(event: dict[str, Any], digest: str) -> str:
    """Where the claim writes its estimated stats.json: beside the pinned folders, not in one (FineTune's data)."""
    inputs = event[INPUT_INPUTS_PREFIX].strip("/")
    return f"s3://{event[INPUT_ARTIFACTS_BUCKET]}/{inputs}/{CLAIM_STATS_FOLDER}/{digest}/{STATS_FILE}"


def download(store: ObjectStore, bucket: str, key: str, version_id: str, path: Path) -> None:
    """One object version into `path`, a chunk at a time (memory holds one chunk)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        for chunk in store.stream(bucket, key, version_id):
            handle.write(chunk)


def validate_pinned(store: ObjectStore, event: dict[str, Any], input_uri: str, stats_uri: str) -> str:
    """Validate every record of the pinned files (qa.claim_validation, the lines ValidateAndTokenize prints) and
    write the estimated stats.json to `stats_uri`. Each file is read at its pinned version from the datasets bucket
    into a private folder of this function's /tmp, removed afterwards (a warm function keeps /tmp). Returns "" or
    the refusal, fitted to a Lambda step output (the log has it whole)."""
    bucket, key = event[DATASET_BUCKET], event[MANIFEST_KEY]
    target_bucket, prefix = split_uri(input_uri)
    pins = json.loads(store.get(target_bucket, prefix + PINS_FILE)[0])["files"]
    declared = TaskFile.from_document(json.loads(store.get(target_bucket, prefix + TASK_FILE)[0]))
    total = sum(store.current_version(target_bucket, prefix + pin["key"])[1] for pin in pins)
    refusal = size_error(total)
    if not refusal:
        folder = key.rsplit("/", 1)[0] + "/"
        root = Path(tempfile.mkdtemp(prefix="claim-"))
        try:
            files: dict[str, list[Path]] = {split: [] for split in SPLITS}
            for pin in pins:
                download(store, bucket, folder + pin["key"], pin["version_id"], root / pin["key"])
                files[str(manifest_key_split(pin["key"]))].append(root / pin["key"])
            verdict = validate_dataset(
                files,
                root,
                max_seq_length=int(event[MAX_SEQ_LENGTH]),
                doc_stride=int(event[DOC_STRIDE]),
                max_windows_per_example=int(event[INPUT_MAX_WINDOWS_PER_EXAMPLE]),
                skip_invalid=str(event[SKIP_INVALID_RECORDS]).lower() == "true",
                manifest_version=event[MANIFEST_VERSION_ID],
                task=task(declared.task),
                label_names=declared.label_names,
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)
        refusal = verdict.error
        if verdict.stats is not None:
            store.put(*split_uri(stats_uri), json.dumps(verdict.stats, indent=2).encode())
    if refusal:
        log.error("dataset refused:\n%s", refusal)
    return fitted(refusal)


def claim_handler(event: dict[str, Any], context: Any = None) -> dict[str, str]:
    """ClaimManifest. Outputs: qa.outputs.CLAIM_OUTPUTS, all strings of at most 1,024 characters (a Lambda step
    output's limit, API_OutputParameter): the messages quote the values they name shortened (qa.parameter_rules)."""
    validates = event.get(INPUT_VALIDATE) == "true"  # processing.tokenize_in "fine_tune": no ValidateAndTokenize job
    # Exactly the outputs the step declares (steps/claim.py): the validation's only when it validates.
    declared = [name for name in CLAIM_OUTPUTS if validates or name not in CLAIM_VALIDATION_OUTPUTS]
    result = {name: "" for name in declared} | {CLAIM_DUPLICATE: DUPLICATE_NO}
    key = event.get(MANIFEST_KEY, "")
    pipeline_task = str(event.get(INPUT_TASK) or "")
    # An unknown task is refused below (task_error); its keys are those of no task.
    root = datasets_root(task(pipeline_task).RESOURCE_INFIX) if pipeline_task in TASK_NAMES else DATASETS_ROOT
    if not manifest_key_pattern(root).fullmatch(str(key)):
        result[CLAIM_IGNORED] = f"{short(str(key))} is not a manifest key ({manifest_key_form(root)}): nothing to do"
        log.warning(result[CLAIM_IGNORED])
        return result
    problem = parameter_error(event)
    store = object_store()
    problem = problem or task_error(store, event)
    if problem:
        result[CLAIM_PARAMETER_ERROR] = problem
        return result
    owner, duplicate = claim_manifest(store, event)
    result[CLAIM_CLAIMED_BY] = owner
    if owner != event[INPUT_EXECUTION_ARN]:
        result[CLAIM_DUPLICATE], result[CLAIM_DUPLICATE_REASON] = DUPLICATE_YES, duplicate
        log.warning("duplicate of %s: %s", owner, duplicate)
        return result
    # Only an execution that would train meets the execution limits: a duplicate ends quietly, limit or not.
    start, earlier = earlier_executions(event[INPUT_EXECUTION_ARN])
    problem = execution_limit_error(event[INPUT_BOUNDS], start, earlier)
    if problem:
        result[CLAIM_PARAMETER_ERROR] = problem
        return result
    digest = claim_digest(event[DATASET_BUCKET], key, event[MANIFEST_VERSION_ID])
    result[CLAIM_INPUT_URI] = f"s3://{event[INPUT_ARTIFACTS_BUCKET]}/{event[INPUT_INPUTS_PREFIX].strip('/')}/{digest}/"
    pin_inputs(store, event, result[CLAIM_INPUT_URI])
    # What the registered package records of the dataset (the manifest lists each file's SHA-256).
    body, _, _ = store.get(event[DATASET_BUCKET], key, event[MANIFEST_VERSION_ID])
    result[CLAIM_MANIFEST_SHA256] = hashlib.sha256(body).hexdigest()
    if validates:
        stats_uri = claim_stats_uri(event, digest)
        result[CLAIM_DATASET_ERROR] = validate_pinned(store, event, result[CLAIM_INPUT_URI], stats_uri)
        result[CLAIM_STATS_URI] = "" if result[CLAIM_DATASET_ERROR] else stats_uri
    return result


# ------------------------------------------------------------------------------------------- cost estimate


def estimate_cost_handler(event: dict[str, Any], context: Any = None) -> dict[str, float]:
    """EstimateTrainingCost: {ESTIMATED_COST_OUTPUT: on-demand USD} for this execution's instance type, count and
    epochs, from the dataset's stats.json and the base model's config.json."""
    store = object_store()
    stats = json.loads(store.get(*split_uri(event[INPUT_STATS_URI]))[0])
    model_config = json.loads(store.get(*split_uri(event[BASE_MODEL_URI].rstrip("/") + "/config.json"))[0])
    lengths = {split: _lengths(stats["splits"][split]["length_histogram"]) for split in SPLITS}
    estimate = run_estimate(
        json_input(event[INPUT_COST_MODEL]),
        model_config,
        lengths[TRAIN_SPLIT],
        lengths[VALIDATION_SPLIT],
        str(event[TRAINING_INSTANCE_TYPE]),
        int(float(event[TRAINING_INSTANCE_COUNT])),
        float(event[EPOCHS]),
    )
    log.info("estimate: %s", estimate)
    return {ESTIMATED_COST_OUTPUT: float(estimate["training_on_demand_usd"])}


def _lengths(histogram: dict[str, int]) -> dict[int, int]:
    """A stats.json length histogram ("low-high": count) as lengths: each bucket at its upper bound (the
    conservative side for a cost guard)."""
    return {int(bucket.split("-")[1]): count for bucket, count in histogram.items()}


# ----------------------------------------------------------------------------------------------- record


def trained_version(store: ObjectStore, bucket: str, key: str) -> str:
    """The one version of the training job's model.tar.gz: the version SageMaker wrote.

    SageMaker writes the archive once, at the end of the job, to a key named after the job
    (<S3OutputPath>/<job name>/output/model.tar.gz). A second version or a delete marker means someone else wrote
    the key, before or after the job: which version is the job's can then not be told, so nothing is recorded."""
    found = store.versions(bucket, key)
    if len(found) != 1:
        listed = ", ".join(found) if found else "none"
        raise RecordError(
            f"s3://{bucket}/{key} has {len(found)} versions ({listed}), the training job writes exactly one: it was "
            "written besides the job (or deleted), so which bytes were evaluated cannot be told. Find who wrote it "
            "(CloudTrail data events, S3 access logs), then run the execution again; nothing was registered."
        )
    return found[0]


def sha256_of(store: ObjectStore, bucket: str, key: str, version_id: str) -> str:
    digest = hashlib.sha256()
    for chunk in store.stream(bucket, key, version_id):
        digest.update(chunk)
    return digest.hexdigest()


def copy_to_registry(
    store: ObjectStore, source: str, version_id: str, sha256: str, registry_uri: str
) -> tuple[str, str]:
    """(URI, version id) of the registry copy registry/<sha256>/model.tar.gz of `source` at `version_id`: created
    with If-None-Match, or, when that key exists (the same bytes registered before), the existing object once it
    hashes to `sha256`."""
    bucket, key = split_uri(source)
    target = registry_archive_uri(registry_uri, sha256)
    target_bucket, target_key = split_uri(target)
    copied = store.copy_if_absent(bucket, key, version_id, target_bucket, target_key)
    if copied is not None:
        return target, copied
    versions = store.versions(target_bucket, target_key)  # only this function writes there (bucket policy)
    if len(versions) != 1:
        raise RecordError(
            f"{target} has {len(versions)} versions, RecordModel writes one: the registry was tampered with"
        )
    existing = versions[0]
    if (found := sha256_of(store, target_bucket, target_key, existing)) != sha256:
        raise RecordError(
            f"{target} version {existing} has SHA-256 {found}, not {sha256}: the registry was tampered with"
        )
    return target, existing


def gate_metric_first(task_module: Any, metrics: dict[str, Any]) -> dict[str, float]:
    """The task's METRICS from FineTune's values (RecordModel's Metrics input), its gate metric first: the order of
    the training job's evaluation.json."""
    names = (task_module.GATE_METRIC, *(name for name in task_module.METRICS if name != task_module.GATE_METRIC))
    missing = [name for name in names if name not in metrics]
    if missing:
        raise ValueError(f"{INPUT_METRICS} has no {', '.join(missing)} (it has {', '.join(metrics) or 'nothing'})")
    return {name: float(metrics[name]) for name in names}


def record_model_handler(event: dict[str, Any], context: Any = None) -> dict[str, str]:
    """RecordModel: the training job's archive, by the one version the job wrote, hashed and copied (that same
    version, server-side) to registry/<sha256>/model.tar.gz, the object RegisterModel registers; and the
    model-quality report (SageMaker's {"metrics": {name: {"value": ...}}} shape) at ReportUri for ModelMetrics.

    Hashing and copying name the version id, never the current object: an overwrite of models/ after the job,
    before or while this runs, adds a version and fails the step (trained_version); one after it changes neither
    the digest nor the copy."""
    store = object_store()
    trained = event[INPUT_MODEL_ARCHIVE_URI]
    bucket, key = split_uri(trained)
    version_id = trained_version(store, bucket, key)
    sha256 = sha256_of(store, bucket, key, version_id)
    registered, registered_version = copy_to_registry(store, trained, version_id, sha256, event[INPUT_REGISTRY_URI])
    report = {
        **model_quality_metrics(gate_metric_first(task(event[INPUT_TASK]), json.loads(event[INPUT_METRICS]))),
        "model": {
            "uri": registered,
            "sha256": sha256,
            "version_id": registered_version,
            "trained_uri": trained,
            "trained_version_id": version_id,
        },
    }
    report_uri = event[RECORD_REPORT_URI]
    if not report_uri.endswith("/" + EVALUATION_FILE):
        raise ValueError(f"{RECORD_REPORT_URI} {report_uri!r} must end with /{EVALUATION_FILE}")
    store.put(*split_uri(report_uri), json.dumps(report, indent=2).encode())
    return {
        RECORD_MODEL_SHA256: sha256,
        RECORD_MODEL_URI: registered,
        RECORD_MODEL_VERSION_ID: registered_version,
        RECORD_TRAINED_VERSION_ID: version_id,
        RECORD_REPORT_URI: report_uri,
    }
