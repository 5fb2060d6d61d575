"""Validate a SQuAD-format dataset locally, upload its files, then its manifest (which starts the pipeline).

    python -m tools.upload_dataset --dataset data/sample-squad --name sample-squad [--version v1] [--env dev]
    python -m tools.upload_dataset --dataset data/sample-squad --name sample-squad --validate-only

The dataset folder holds train/ and validation/ files (SQuAD v1.1 .json or .jsonl). Nothing is uploaded if
any record is invalid, or if the stacks, the pipeline or the staged base model are missing (the run would
fail). The manifest goes last, so the pipeline only ever sees complete datasets. `--validate-only` needs no
AWS credentials.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from qa.data import SPLITS, load_dataset_files, summarize_problems

from config.layout import DatasetLayout
from tools.deployment import (
    Deployment,
    bucket_exists,
    fail,
    load_deployment,
    pipeline_parameter_defaults,
    run_tool,
    settings_for,
    staged_model_problems,
)

DATASETS = DatasetLayout()
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
DATA_SUFFIXES = (".json", ".jsonl", ".ndjson")
MIB = 1024 * 1024
# Multipart above 64 MiB in 64 MiB parts: 10,000 parts allow files up to 625 GiB, under S3's 5 TiB object
# limit and within its part rules (5 MiB to 5 GiB per part, at most 10,000 parts):
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html
MULTIPART_BYTES = 64 * MIB
LARGE_UPLOAD_BYTES = 8 * MIB  # from here on, progress is also reported within files
# Execution parameters the upload determines, matched against the execution it started when the pipeline
# defines them (the trigger copies them from the S3 event: bucket name, object key, version id).
MATCHED_PARAMETERS = ("DatasetBucket", "ManifestKey", "ManifestVersionId")
CLOCK_SKEW = timedelta(minutes=2)  # tolerated difference between this machine's clock and SageMaker's


@dataclass(frozen=True)
class UploadPlan:
    bucket: str
    prefix: str  # DatasetLayout.prefix: datasets/<name>/<version>/
    files: list[tuple[Path, str]]  # (local path, key relative to prefix)

    @property
    def manifest_key(self) -> str:
        return self.prefix + DATASETS.manifest_name

    def manifest(self) -> list[Any]:
        return DATASETS.manifest_body(self.bucket, self.prefix, [key for _, key in self.files])


def validate_dataset(dataset_dir: Path, name: str, version: str) -> list[tuple[Path, str]]:
    """Validate every record; (local path, key relative to the version prefix) of each file. No AWS call."""
    for label, value in (("name", name), ("version", version)):
        if not NAME.match(value):
            fail(f"--{label} {value!r}: use letters, digits, '.', '_' or '-'")
    if not dataset_dir.is_dir():
        fail(f"--dataset {dataset_dir}: no such directory; pass a folder with train/ and validation/ files")
    files = {
        split: sorted(p for p in (dataset_dir / split).rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES)
        for split in SPLITS
    }
    missing = [split for split in SPLITS if not files[split]]
    if missing:
        fail(f"{dataset_dir} has no {' or '.join(missing)} files (.json or .jsonl under {missing[0]}/)")
    report = load_dataset_files(files, dataset_dir)
    if report.problems:
        print(summarize_problems(report.problems), file=sys.stderr)
        fail("nothing uploaded: fix the records listed above")
    print(
        f"validated {sum(len(r) for r in report.records.values())} records "
        f"({', '.join(f'{len(report.records[s])} {s}' for s in SPLITS)})"
    )
    return [(path, path.relative_to(dataset_dir).as_posix()) for split in SPLITS for path in files[split]]


class Progress:
    """Bytes and files sent so far, printed after every file and, for large uploads, every tenth of the bytes."""

    def __init__(self, files: list[Path]) -> None:
        self.total_files = len(files)
        self.total_bytes = sum(path.stat().st_size for path in files) or 1
        self.files_done = 0
        self.bytes_done = 0
        # Small uploads take seconds: a line per file is enough.
        self._next_report = self.total_bytes / 10 if self.total_bytes >= LARGE_UPLOAD_BYTES else float("inf")
        self._lock = threading.Lock()  # the transfer manager calls back from its worker threads

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


def upload(plan: UploadPlan, s3: Any, multipart_bytes: int = MULTIPART_BYTES) -> dict[str, Any]:
    """Upload the data files, then the manifest last (only the manifest triggers the pipeline).

    Files over `multipart_bytes` go up in parallel parts of that size. Returns the manifest's PutObject
    response (ETag, VersionId on versioned buckets)."""
    from boto3.s3.transfer import TransferConfig

    transfer = TransferConfig(multipart_threshold=multipart_bytes, multipart_chunksize=multipart_bytes)
    progress = Progress([path for path, _ in plan.files])
    print(
        f"uploading {progress.total_files} files ({progress.total_bytes / MIB:.1f} MiB) to s3://{plan.bucket}/{plan.prefix}"
    )
    for path, key in plan.files:
        s3.upload_file(str(path), plan.bucket, f"{plan.prefix}{key}", Config=transfer, Callback=progress.add_bytes)
        progress.file_done()
    response = s3.put_object(
        Bucket=plan.bucket,
        Key=plan.manifest_key,
        Body=json.dumps(plan.manifest(), indent=1).encode(),
        ContentType="application/json",
    )
    print(f"uploaded manifest s3://{plan.bucket}/{plan.manifest_key} (etag {response['ETag'].strip(chr(34))})")
    return response


def expected_parameters(plan: UploadPlan, manifest: dict[str, Any], defined: set[str]) -> dict[str, str]:
    """The parameter values the execution started by this manifest carries, for the parameters the pipeline
    defines (only versioned buckets give a version id)."""
    values = {
        "DatasetBucket": plan.bucket,
        "ManifestKey": plan.manifest_key,
        "ManifestVersionId": manifest.get("VersionId"),
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


def check_target(deployment: Deployment, env_name: str) -> tuple[str, set[str]]:
    """The datasets bucket, after checking that it, the pipeline and the pipeline's base model exist; also the
    pipeline's parameter names."""
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
    base_model_uri = defaults.get("BaseModelUri") or deployment.default_base_model_uri
    missing = staged_model_problems(s3, base_model_uri)
    if missing:
        fail(
            f"base model not staged at {base_model_uri} (lacks {', '.join(missing)}); nothing uploaded, the run "
            f"would fail: run make stage-model MODEL={settings.model.base_model} ENV={env_name}"
        )
    return bucket, set(defaults)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", default=datetime.now(UTC).strftime("%Y%m%d-%H%M%S"))
    parser.add_argument("--env", default="dev")
    parser.add_argument("--validate-only", action="store_true", help="check the dataset; no AWS call")
    parser.add_argument("--wait-seconds", type=float, default=120, help="how long to look for the execution")
    args = parser.parse_args(argv)

    settings_for(args.env)  # an unknown environment fails before anything else
    files = validate_dataset(args.dataset, args.name, args.version)
    if args.validate_only:
        print("dataset is valid (--validate-only: nothing uploaded)")
        return 0
    deployment = load_deployment(args.env)
    bucket, parameter_names = check_target(deployment, args.env)
    plan = UploadPlan(bucket=bucket, prefix=DATASETS.prefix(args.name, args.version), files=files)
    started = datetime.now(UTC)
    manifest = upload(plan, deployment.client("s3"))
    expected = expected_parameters(plan, manifest, parameter_names)
    matched = ", ".join(f"{name}={value}" for name, value in expected.items())
    print(f"waiting up to {args.wait_seconds:.0f}s for the execution with {matched}")
    pipeline_name = deployment.settings.pipeline_name
    execution = find_execution(deployment.client("sagemaker"), pipeline_name, expected, started, args.wait_seconds)
    if execution is None:
        print(
            f"uploaded, but no execution of {pipeline_name} with these parameters within {args.wait_seconds:.0f}s: "
            "check the EventBridge rule's dead-letter queue and the pipeline's executions in the SageMaker console"
        )
        return 1
    print(f"pipeline execution: {execution}")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
