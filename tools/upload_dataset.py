"""Validate a SQuAD-format dataset locally, upload its files, then its manifest (which starts the pipeline).

    python -m tools.upload_dataset --dataset data/sample-squad --name sample-squad [--version v1] [--env dev]
    python -m tools.upload_dataset --dataset data/sample-squad --name sample-squad --validate-only
    python -m tools.upload_dataset --dataset data/sample-squad --name sample-squad --version v1 --replace

The dataset folder holds train/ and validation/ data in any format qa.data reads (SQuAD v1.1 .json, JSON
Lines, Parquet, CSV, `datasets` save_to_disk folders), validated record by record, streamed. Nothing is uploaded if
any record is invalid, or if the stacks, the pipeline or the staged base model are missing (the run would
fail). Parquet files and save_to_disk folders are converted to JSON Lines before upload (the pipeline's processing
image has no pyarrow to read them); the manifest records each converted file's source. The manifest goes last,
so the pipeline only ever sees complete datasets; it records each file's S3 version id and SHA-256 (manifest
v2: the claim checks both), and a NAME/VERSION, once uploaded, stays put: a second upload is refused unless
--replace, which replaces the manifest and may add or drop files but never changes an uploaded one (the bucket
policy lets a data file be written once; executions already started keep the file versions their manifest named).
`--validate-only` needs no AWS credentials.

    python -m tools.upload_dataset --dataset d --name n --params "Epochs=3 F1Threshold=60 BaseModelUri=s3://..."
    python -m tools.upload_dataset --dataset d --name n --no-run

With --params or --no-run the upload is held: its manifest is written as held-manifest.json, which the trigger does
not match (qa.outputs.HELD_MANIFEST_FILE), so no execution starts with the pipeline's defaults. With --params the
tool then starts that manifest's one execution itself (tools.executions.start_manifest: the checks of `make start`);
with --no-run, `make start NAME= VERSION= [PARAMS=]` starts it later. An upload may set only the per-run parameters
ClaimManifest bounds (qa.parameter_rules.RUN_PARAMETERS); they are checked before anything is uploaded.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from qa.data import (
    ACCEPTED_FORMATS,
    SPLITS,
    ManifestFile,
    convert_columnar,
    load_dataset_files,
    manifest_v2,
    split_entries,
    summarize_problems,
)
from qa.declared_task import DeclaredTask, declared_task
from qa.outputs import same_s3_checksum, sha256_checksum
from qa.parameter_rules import RUN_PARAMETERS, data_key_problem
from tasks import DEFAULT_TASK
from tasks import task as task_module

from config.aws_locations import execution_console_url
from config.layout import ArtifactLayout, DatasetLayout
from config.loader import DEFAULT_ENV
from pipeline_steps import names
from tools.deployment import (
    Deployment,
    ToolError,
    ToolParser,
    bucket_exists,
    check_name,
    fail,
    load_deployment,
    pipeline_parameter_defaults,
    run_tool,
    settings_for,
    short,
    staged_model_problems,
)
from tools.executions import MATCHED_PARAMETERS, deployed_definition, execution_values, start_manifest

DATASETS = DatasetLayout()
# A data file's path below the dataset folder becomes part of its S3 key. S3 event notifications carry keys
# URL-encoded ("red flower.jpg" arrives as "red+flower.jpg":
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html), and the
# EventBridge page (ev-events.html) does not say whether its `detail.object.key` is encoded. Keys made of S3's
# "safe characters" without the ones that need care (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html)
# read the same either way, so only those are accepted.
SAFE_KEY = re.compile(r"[A-Za-z0-9._/-]+")
MIB = 1024 * 1024
# Multipart above 64 MiB in 64 MiB parts: 10,000 parts allow files up to 625 GiB, under S3's 5 TiB object
# limit and within its part rules (5 MiB to 5 GiB per part, at most 10,000 parts):
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html
MULTIPART_BYTES = 64 * MIB
PARALLEL_PARTS = 4
LARGE_UPLOAD_BYTES = 8 * MIB  # from here on, progress is also reported within files
# What PARAMS are checked with before the upload creates the manifest's real S3 version id (any valid one).
VERSION_ID_BEFORE_UPLOAD = "not-uploaded-yet"
CLOCK_SKEW = timedelta(minutes=2)  # tolerated difference between this machine's clock and SageMaker's
# A conditional write that loses answers 412 PreconditionFailed, or 409 ConditionalRequestConflict when a
# concurrent write to the same key is in progress:
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html
CONDITION_FAILED = ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")


@dataclass(frozen=True)
class UploadPlan:
    bucket: str
    name: str
    version: str
    files: list[tuple[Path, str]]  # (local path, key relative to prefix)
    # key -> its source (qa.data.convert_columnar)
    converted_from: dict[str, dict[str, str]] = field(default_factory=dict)
    held: bool = False  # the manifest as held-manifest.json: no trigger starts an execution (PARAMS, NO_RUN)
    declared: DeclaredTask = field(default_factory=DeclaredTask)  # the folder's task and label names
    datasets: DatasetLayout = field(default_factory=DatasetLayout)  # the dataset root of the task's pipeline

    @property
    def prefix(self) -> str:
        return self.datasets.prefix(self.name, self.version)

    @property
    def manifest_key(self) -> str:
        return self.datasets.manifest_key(self.name, self.version, self.held)

    @property
    def other_manifest_key(self) -> str:
        """The key of the other kind of manifest (held or not) of the same NAME/VERSION."""
        return self.datasets.manifest_key(self.name, self.version, not self.held)

    def manifest(self, uploaded: list[ManifestFile]) -> dict[str, Any]:
        """Manifest v2: each data file with the S3 version id its upload created and its SHA-256, and the task and
        label names the dataset folder declares."""
        return manifest_v2(
            self.name,
            self.version,
            uploaded,
            self.converted_from,
            self.declared.task,
            self.declared.label_names,
        )


def dataset_entries_by_split(dataset_dir: Path) -> dict[str, list[Path]]:
    """Split -> what validation reads under `dataset_dir/<split>/`: data files of the accepted formats and
    `save_to_disk` folders (qa.data's rules); fails on a symlink that leaves the folder or a symlinked folder."""
    root = dataset_dir.resolve()
    entries: dict[str, list[Path]] = {}
    for split in SPLITS:
        top = dataset_dir / split
        if top.is_symlink():
            fail(f"{split}/ is a symlink: copy its files into {dataset_dir} instead")
        for folder, subfolders, files in os.walk(top):
            for name in [*subfolders, *files]:
                path = Path(folder) / name
                relative = path.relative_to(dataset_dir).as_posix()
                if path.is_symlink() and not path.resolve().is_relative_to(root):
                    fail(f"{relative} is a symlink that leaves {dataset_dir}: copy the file into the folder instead")
                if path.is_symlink() and path.is_dir():
                    fail(f"{relative} is a symlinked folder: copy its files into {dataset_dir} instead")
        entries[split] = split_entries(top) if top.is_dir() else []
    return entries


def upload_files(dataset_dir: Path, entries: list[Path]) -> list[tuple[Path, str]]:
    """(local path, key relative to the version prefix) of every file to upload: each data file, and every
    file of a `save_to_disk` folder (its Arrow files and the metadata that names them). Fails on a file named
    like the manifest, or on a path S3 events would encode."""
    files = [
        path
        for entry in entries
        for path in (sorted(p for p in entry.rglob("*") if p.is_file()) if entry.is_dir() else [entry])
    ]
    keyed = []
    for path in files:
        relative = path.relative_to(dataset_dir).as_posix()
        if path.name == DATASETS.manifest_name:
            fail(
                f"{relative}: a data file may not be named {DATASETS.manifest_name} (only the upload's own "
                "manifest is); rename it"
            )
        if not SAFE_KEY.fullmatch(relative):
            bad = next(c for c in relative if not SAFE_KEY.fullmatch(c))
            fail(
                f"{short(relative)} contains {bad!r}: rename it with letters, digits, '.', '_', '-' only "
                "(S3 events URL-encode other characters)"
            )
        keyed.append((path, relative))
    return keyed


def check_own_manifest(dataset_dir: Path, keys: list[str], entries: list[str]) -> None:
    """A manifest.json in the dataset folder is used as a check: it must list exactly the data found, file by
    file (`keys`) or by entry (`entries`: a save_to_disk folder by its name), in its SageMaker ManifestFile
    form or as manifest v2's `files`. It is never uploaded: the upload writes its own manifest with the
    version ids S3 gives."""
    path = dataset_dir / DATASETS.manifest_name
    if not path.is_file():
        return
    fix = f"update or remove {path} (the upload writes its own manifest)"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        fail(f"{path} is not valid JSON ({err.__class__.__name__}): {fix}")
    if isinstance(manifest, list):
        listed = [k for k in manifest[1:] if isinstance(k, str)]
    elif isinstance(manifest, dict) and isinstance(manifest.get("files"), list):
        listed = [f["key"] for f in manifest["files"] if isinstance(f, dict) and isinstance(f.get("key"), str)]
    else:
        fail(f"{path} is neither a ManifestFile list nor a manifest v2 object: {fix}")
    if set(listed) == set(entries):
        return
    missing, extra = sorted(set(keys) - set(listed)), sorted(set(listed) - set(keys))
    if missing or extra:
        parts = [f"not listed: {', '.join(missing)}"] if missing else []
        parts += [f"no such file: {', '.join(extra)}"] if extra else []
        difference = "; ".join(parts)
        fail(f"{path} does not match the folder ({difference}): {fix}")


def dataset_declaration(dataset_dir: Path) -> DeclaredTask:
    """The task and label names the folder declares (qa.declared_task), printed; fails in one line on a malformed
    declaration or a task name no task module has. Whether the names suit the task, and the task the pipeline,
    ClaimManifest checks before any job (the manifest carries both)."""
    try:
        declared = declared_task(dataset_dir)
        if declared.task is not None:
            task_module(declared.task)
    except ValueError as err:
        fail(f"{err}; nothing uploaded")
    if declared.task is not None or declared.label_names is not None:
        task_text = declared.task or "the pipeline's"
        names_text = ", ".join(declared.label_names) if declared.label_names is not None else "none"
        print(f"task: {task_text}; label names: {names_text}")
    return declared


def validate_dataset(
    dataset_dir: Path,
    name: str,
    version: str,
    declared: DeclaredTask | None = None,
    datasets: DatasetLayout | None = None,
    inputs_prefix: str = ArtifactLayout().inputs,
) -> list[tuple[Path, str]]:
    """Validate every record (streamed: records are counted, not kept) as the declared task's (none declared:
    question answering, the pipeline's default; ClaimManifest checks the pipeline's); (local path, key relative to
    the version prefix under `datasets`' root) of each file to upload, each key short enough also for its pinned
    copy under the pipeline's `inputs_prefix`. No AWS call."""
    declared = declared or DeclaredTask()
    datasets = datasets or DatasetLayout()
    check_name("--name", name)
    check_name("--version", version)
    if not dataset_dir.is_dir():
        fail(f"--dataset {dataset_dir}: no such directory; pass a folder with train/ and validation/ files")
    entries = dataset_entries_by_split(dataset_dir)
    missing = [split for split in SPLITS if not entries[split]]
    if missing:
        fail(f"{dataset_dir} has no {' or '.join(missing)} data under {missing[0]}/: accepted are {ACCEPTED_FORMATS}")
    every_entry = [entry for split in SPLITS for entry in entries[split]]
    keyed = upload_files(dataset_dir, every_entry)
    for _, key in keyed:
        problem = data_key_problem(datasets.prefix(name, version) + key, inputs_prefix, key)
        if problem:
            fail(f"{problem}, or --name/--version")
    check_own_manifest(
        dataset_dir, [key for _, key in keyed], [e.relative_to(dataset_dir).as_posix() for e in every_entry]
    )
    records_task = task_module(declared.task or DEFAULT_TASK)
    report = load_dataset_files(
        entries, dataset_dir, keep_records=False, task=records_task, label_names=declared.label_names
    )
    if report.problems:
        print(summarize_problems(report.problems), file=sys.stderr)
        fail("nothing uploaded: fix the records listed above")
    counts = report.valid_records
    print(f"validated {sum(counts.values())} records ({', '.join(f'{counts[s]} {s}' for s in SPLITS)})")
    return keyed


class Progress:
    """Bytes and files sent so far, printed after every file and, for large uploads, every tenth of the bytes."""

    def __init__(self, files: list[Path]) -> None:
        self.total_files = len(files)
        self.total_bytes = sum(path.stat().st_size for path in files) or 1
        self.files_done = 0
        self.bytes_done = 0
        # Small uploads take seconds: a line per file is enough.
        self._next_report = self.total_bytes / 10 if self.total_bytes >= LARGE_UPLOAD_BYTES else float("inf")
        self._lock = threading.Lock()  # parts of a large file go up from several threads

    def add_bytes(self, count: int) -> None:
        with self._lock:
            self.bytes_done += count
            if self.bytes_done >= self._next_report and self.bytes_done < self.total_bytes:
                self._next_report += self.total_bytes / 10
                self._print()

    def file_done(self) -> None:
        with self._lock:
            self.files_done += 1
            self._print()

    def _print(self) -> None:
        print(
            f"  {self.bytes_done / MIB:.1f}/{self.total_bytes / MIB:.1f} MiB "
            f"({100 * self.bytes_done / self.total_bytes:.0f}%), {self.files_done}/{self.total_files} files",
            flush=True,
        )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(MIB):
            digest.update(chunk)
    return digest.hexdigest()


def part_digests(path: Path, part_bytes: int) -> list[bytes]:
    """The SHA-256 of each `part_bytes` part of the file, as a multipart upload sends them."""
    digests = []
    with path.open("rb") as stream:
        while part := stream.read(part_bytes):
            digests.append(hashlib.sha256(part).digest())
    return digests


def s3_checksum(path: Path, multipart_bytes: int) -> str:
    """The ChecksumSHA256 S3 stores for this file as put_file uploads it: the file's SHA-256 for one part; for
    several, the composite "checksum of checksums" followed by -<parts> (SHA-256 has no full-object type for
    multipart uploads: https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity-upload.html)."""
    if path.stat().st_size <= multipart_bytes:
        return sha256_checksum(sha256_of(path))
    return composite_checksum(part_digests(path, multipart_bytes))


def composite_checksum(part_sha256: list[bytes]) -> str:
    """S3's composite SHA-256 of an object uploaded in these parts: the SHA-256 of the parts' digests, -<parts>."""
    return f"{base64.b64encode(hashlib.sha256(b''.join(part_sha256)).digest()).decode()}-{len(part_sha256)}"


def put_file(
    s3: Any, path: Path, bucket: str, key: str, multipart_bytes: int, progress: Progress
) -> tuple[str, str, int, str | None]:
    """Upload one file, once (If-None-Match: *, which the datasets bucket policy requires of data files), in
    parallel parts over `multipart_bytes`; the S3 version id its upload created (from the response: a later HEAD
    could name someone else's newer version), its SHA-256, its size and, uploaded in parts, its composite
    SHA-256 (s3_checksum). Every request sends the SHA-256 of the
    bytes it carries, which S3 checks and stores (a multipart object's as the composite of its parts':
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity-upload.html)."""
    size = path.stat().st_size
    if size <= multipart_bytes:
        body = path.read_bytes()
        digest = hashlib.sha256(body)
        response = s3.put_object(
            Bucket=bucket,
            Key=key,
            Body=body,
            ChecksumAlgorithm="SHA256",
            ChecksumSHA256=base64.b64encode(digest.digest()).decode(),
            IfNoneMatch="*",
        )
        progress.add_bytes(size)
        return str(response.get("VersionId", "null")), digest.hexdigest(), len(body), None
    sha256 = sha256_of(path)
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256")["UploadId"]

    def part(number: int) -> dict[str, Any]:
        with path.open("rb") as stream:
            stream.seek((number - 1) * multipart_bytes)
            body = stream.read(multipart_bytes)
        checksum = base64.b64encode(hashlib.sha256(body).digest()).decode()
        etag = s3.upload_part(
            Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body, ChecksumSHA256=checksum
        )["ETag"]
        progress.add_bytes(len(body))
        return {"ETag": etag, "PartNumber": number, "ChecksumSHA256": checksum}

    try:
        with ThreadPoolExecutor(PARALLEL_PARTS) as pool:
            parts = list(pool.map(part, range(1, -(-size // multipart_bytes) + 1)))
        # The conditional header goes on CompleteMultipartUpload: the other multipart requests take none
        # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html).
        response = s3.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}, IfNoneMatch="*"
        )
    except BaseException:
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        raise
    composite = composite_checksum([base64.b64decode(p["ChecksumSHA256"]) for p in parts])
    return str(response.get("VersionId", "null")), sha256, size, composite


def existing_manifest_etag(s3: Any, plan: UploadPlan) -> str | None:
    """The ETag of the NAME/VERSION's current manifest; None when there is none."""
    response = head_if_exists(s3, plan.bucket, plan.manifest_key)
    return None if response is None else str(response["ETag"])


def head_if_exists(s3: Any, bucket: str, key: str) -> dict[str, Any] | None:
    """HeadObject with the object's checksum (ChecksumMode); None when there is no such object."""
    from botocore.exceptions import ClientError

    try:
        return dict(s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED"))
    except ClientError as err:
        if err.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            return None
        raise


def already_uploaded(s3: Any, plan: UploadPlan, multipart_bytes: int) -> dict[str, ManifestFile]:
    """Key -> the uploaded file, for each data file already in S3 with this content (a replace, or a retry of an
    upload that stopped before its manifest). A data file is written once (the bucket policy denies overwriting
    it), so one that differs stops the upload before anything is written."""
    found = {}
    for path, key in plan.files:
        head = head_if_exists(s3, plan.bucket, f"{plan.prefix}{key}")
        if head is None:
            continue
        expected = s3_checksum(path, multipart_bytes)
        if not same_s3_checksum(head.get("ChecksumSHA256"), expected):
            fail(
                f"{key} differs from s3://{plan.bucket}/{plan.prefix}{key} (its S3 SHA-256 checksum is another, or "
                "none), and an uploaded file stays put: upload the changed dataset under a new --version (REPLACE=1 "
                "replaces the manifest, adds files and drops files, never changes one)"
            )
        version_id, composite = str(head.get("VersionId", "null")), expected if "-" in expected else None
        found[key] = ManifestFile(key, version_id, sha256_of(path), head["ContentLength"], composite)
    return found


def refuse_existing(plan: UploadPlan) -> None:
    fail(
        f"dataset {plan.name}/{plan.version} already exists (s3://{plan.bucket}/{plan.manifest_key}): upload a "
        "new --version, or pass --replace (REPLACE=1) to replace its manifest (executions already started keep "
        "their data)"
    )


def upload(plan: UploadPlan, s3: Any, replace: bool = False, multipart_bytes: int = MULTIPART_BYTES) -> dict[str, Any]:
    """Upload the data files, then the manifest last (only the manifest triggers the pipeline).

    The manifest is written only if NAME/VERSION has none (If-None-Match: *), or with `replace` only over the
    manifest seen before the data went up (If-Match: its ETag), so two uploads cannot both win:
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html. Data files already
    uploaded with the same content are reused, never written again. Returns the manifest's PutObject response
    (ETag, VersionId on versioned buckets) with the manifest body under "Manifest"."""
    from botocore.exceptions import ClientError

    previous = existing_manifest_etag(s3, plan)
    if previous is not None and not replace:
        refuse_existing(plan)  # before any data file goes up
    if head_if_exists(s3, plan.bucket, plan.other_manifest_key) is not None:
        # One manifest per NAME/VERSION: a held one and a triggered one would be two executions' data.
        fail(
            f"dataset {plan.name}/{plan.version} was uploaded {'without' if plan.held else 'with'} PARAMS/NO_RUN "
            f"(s3://{plan.bucket}/{plan.other_manifest_key}): upload a new --version"
        )
    reused = already_uploaded(s3, plan, multipart_bytes)  # a replace, or a retry of an interrupted upload
    progress = Progress([path for path, key in plan.files if key not in reused])
    print(
        f"uploading {progress.total_files} files ({progress.total_bytes / MIB:.1f} MiB) to s3://{plan.bucket}/{plan.prefix}"
        + (f"; {len(reused)} unchanged files already there" if reused else "")
    )
    uploaded = []
    for path, key in plan.files:
        if key in reused:
            uploaded.append(reused[key])
            continue
        try:
            version_id, sha256, size, composite = put_file(
                s3, path, plan.bucket, f"{plan.prefix}{key}", multipart_bytes, progress
            )
        except ClientError as err:
            if err.response["Error"]["Code"] not in CONDITION_FAILED:
                raise
            fail(
                f"another upload wrote s3://{plan.bucket}/{plan.prefix}{key} meanwhile: upload again under a new "
                "--version"
            )
        uploaded.append(ManifestFile(key, version_id, sha256, size, composite))
        progress.file_done()
    manifest = plan.manifest(uploaded)
    condition = {"IfMatch": previous} if previous is not None else {"IfNoneMatch": "*"}
    try:
        response = s3.put_object(
            Bucket=plan.bucket,
            Key=plan.manifest_key,
            Body=json.dumps(manifest, indent=1).encode(),
            ContentType="application/json",
            **condition,
        )
    except ClientError as err:
        if err.response["Error"]["Code"] not in CONDITION_FAILED:
            raise
        fail(
            f"another upload wrote {plan.name}/{plan.version}'s manifest meanwhile; this upload's data files are "
            "not referenced by any manifest: upload again under a new --version"
        )
    replaced = " (replaced the previous manifest)" if previous is not None else ""
    print(f"uploaded manifest s3://{plan.bucket}/{plan.manifest_key}{replaced}")
    return {**response, "Manifest": manifest}


def expected_parameters(plan: UploadPlan, manifest: dict[str, Any], defined: set[str]) -> dict[str, str]:
    """The parameter values the execution started by this manifest carries, for the parameters the pipeline
    defines (only versioned buckets give a version id)."""
    values = {
        names.DATASET_BUCKET: plan.bucket,
        names.MANIFEST_KEY: plan.manifest_key,
        names.MANIFEST_VERSION_ID: manifest.get("VersionId"),
    }
    return {name: value for name in MATCHED_PARAMETERS if name in defined and (value := values[name]) is not None}


def find_execution(
    sagemaker: Any, pipeline_name: str, expected: dict[str, str], since: datetime, timeout_s: float, poll_s: float = 5
) -> str | None:
    """The ARN of the execution started after `since` whose parameters carry `expected`, if one appears in time."""
    deadline = time.monotonic() + timeout_s
    checked: set[str] = set()
    while True:
        summaries = sagemaker.list_pipeline_executions(
            PipelineName=pipeline_name, CreatedAfter=since - CLOCK_SKEW, SortOrder="Descending"
        ).get("PipelineExecutionSummaries", [])
        for summary in summaries:
            arn = summary["PipelineExecutionArn"]
            if arn in checked or summary["StartTime"] < since - CLOCK_SKEW:
                continue
            checked.add(arn)
            parameters = sagemaker.list_pipeline_parameters_for_execution(PipelineExecutionArn=arn)
            values = {p["Name"]: p["Value"] for p in parameters.get("PipelineParameters", [])}
            if all(values.get(name) == value for name, value in expected.items()):
                return arn
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll_s)


def check_target(deployment: Deployment, env_name: str, base_model_uri: str | None = None) -> tuple[str, set[str]]:
    """The datasets bucket, after checking that it, the pipeline and the run's base model exist (`base_model_uri`,
    the BaseModelUri of PARAMS, else the pipeline's default); also the pipeline's parameter names."""
    settings = deployment.settings
    bucket = deployment.bucket("datasets")
    s3 = deployment.client("s3")
    if not bucket_exists(s3, bucket):
        fail(f"datasets bucket s3://{bucket} does not exist: deploy the stacks first (make deploy ENV={env_name})")
    defaults = pipeline_parameter_defaults(deployment.client("sagemaker"), settings.pipeline_name)
    if defaults is None:
        fail(
            f"pipeline {settings.pipeline_name} not found in {deployment.region}: "
            f"deploy the stacks first (make deploy ENV={env_name})"
        )
    default = defaults.get(names.BASE_MODEL_URI) or deployment.default_base_model_uri
    uri = base_model_uri or default
    if not uri.startswith(f"s3://{deployment.bucket('artifacts')}/{settings.layout.base_models}/"):
        return bucket, set(defaults)  # ClaimManifest's rule refuses it (execution_values, before the upload)
    missing = staged_model_problems(s3, uri)
    if missing:
        model = (
            settings.model.base_model if uri == default else f"<your model> NAME={uri.rstrip('/').rsplit('/', 1)[-1]}"
        )
        fail(
            f"base model not staged at {uri} (lacks {', '.join(missing)}); nothing uploaded, the run "
            f"would fail: run make stage-model MODEL={model} ENV={env_name}"
        )
    return bucket, set(defaults)


def upload_params(text: str) -> dict[str, str]:
    """PARAMS of an upload by name: only the per-run parameters ClaimManifest bounds (qa.parameter_rules), each once;
    their values are checked as `make start` checks them (tools.executions.execution_values)."""
    values = {}
    for item in text.split():
        name, _, value = item.partition("=")
        if name not in RUN_PARAMETERS:
            fail(
                f"PARAMS {short(name)}: an upload may set only the per-run parameters {', '.join(RUN_PARAMETERS)} "
                "(upload with NO_RUN=1, then make start PARAMS=... sets the others)"
            )
        values[name] = value
    return values


def start_held(deployment: Deployment, plan: UploadPlan, manifest: dict[str, Any], args: Any) -> int:
    """After a held upload: with PARAMS, start its one execution; with NO_RUN, say how to start it."""
    start_later = f"make start NAME={plan.name} VERSION={plan.version} {deployment.make_values}"
    if not args.params:
        print(f"held: no execution started (NO_RUN); start it with {start_later} [PARAMS=...]")
        return 0
    version_id = manifest.get("VersionId")
    if not version_id:
        fail(f"s3://{plan.bucket} gave no version id for the manifest: the datasets bucket must be versioned")
    try:
        execution = start_manifest(deployment, plan.manifest_key, str(version_id), args.params)
    except ToolError as err:
        fail(f"{err} The upload is held: start it with {start_later} PARAMS=...")
    pipeline_name = deployment.settings.pipeline_name
    print(f"pipeline execution: {execution}")
    print(f"  console: {execution_console_url(deployment.region, pipeline_name, execution)}")
    print(f"  follow it: make runs {deployment.make_values}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(__doc__)
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", default=datetime.now(UTC).strftime("%Y%m%d-%H%M%S"))
    parser.add_argument("--env", default=DEFAULT_ENV)
    parser.add_argument("--validate-only", action="store_true", help="check the dataset; no AWS call")
    parser.add_argument("--replace", action="store_true", help="replace an existing NAME/VERSION's manifest")
    parser.add_argument("--wait-seconds", type=float, default=120, help="how long to look for the execution")
    parser.add_argument(
        "--params",
        default="",
        help=f'per-run parameters of the upload\'s execution, "Epochs=3 F1Threshold=60" ({", ".join(RUN_PARAMETERS)})',
    )
    parser.add_argument("--no-run", action="store_true", help="upload held: no execution until make start")
    args = parser.parse_args(argv)

    settings = settings_for(args.env)  # an unknown environment fails before anything else
    params = upload_params(args.params)
    declared = dataset_declaration(args.dataset)
    # The roots of the declared task's pipeline (none declared: the environment's own task's).
    pipeline_task = task_module(declared.task or settings.task)
    datasets = DatasetLayout.of_task(pipeline_task)
    inputs = ArtifactLayout.of_pipeline(pipeline_task.RESOURCE_INFIX).inputs
    files = validate_dataset(args.dataset, args.name, args.version, declared, datasets, inputs)
    if args.validate_only:
        print("dataset is valid (--validate-only: nothing uploaded)")
        return 0
    # The environment's pipeline of the declared task: refused in one line when it deploys none.
    deployment = load_deployment(args.env, declared.task)
    bucket, parameter_names = check_target(deployment, args.env, params.get(names.BASE_MODEL_URI))
    held = bool(params) or args.no_run
    if params:  # every check of the start, before anything is uploaded
        definition = deployed_definition(
            deployment.client("sagemaker"), deployment.settings.pipeline_name, deployment.region
        )
        key = datasets.manifest_key(args.name, args.version, held=True)
        then = f"Nothing uploaded ({names.CLAIM_STEP} would stop its execution)."
        execution_values(deployment, definition, args.params, key, VERSION_ID_BEFORE_UPLOAD, then)
    with tempfile.TemporaryDirectory(prefix="upload-dataset-") as workdir:
        try:
            files, converted_from = convert_columnar(
                args.dataset, files, Path(workdir), task_module(declared.task or DEFAULT_TASK), declared.label_names
            )
        except ValueError as err:
            fail(str(err))
        plan = UploadPlan(
            bucket, args.name, args.version, files, converted_from, held=held, declared=declared, datasets=datasets
        )
        started = datetime.now(UTC)
        manifest = upload(plan, deployment.client("s3"), replace=args.replace)
    if held:
        return start_held(deployment, plan, manifest, args)
    expected = expected_parameters(plan, manifest, parameter_names)
    matched = ", ".join(f"{name}={value}" for name, value in expected.items())
    print(f"waiting up to {args.wait_seconds:.0f}s for the execution with {matched}")
    pipeline_name = deployment.settings.pipeline_name
    execution = find_execution(deployment.client("sagemaker"), pipeline_name, expected, started, args.wait_seconds)
    if execution is None:
        fail(
            f"uploaded, but no execution of {pipeline_name} with these parameters within {args.wait_seconds:.0f}s: "
            f"check the EventBridge rule's dead-letter queue, then make runs {deployment.make_values}"
        )
    print(f"pipeline execution: {execution}")
    print(f"  console: {execution_console_url(deployment.region, pipeline_name, execution)}")
    print(f"  follow it: make runs {deployment.make_values}")
    return 0


def cli() -> None:
    sys.exit(run_tool(main))


if __name__ == "__main__":
    cli()
