"""Validate a SQuAD-format dataset locally, upload its files, then its manifest (which starts the pipeline).

    python -m tools.upload_dataset --dataset data/sample-squad --name sample-squad [--version v1] [--env dev]

The dataset folder holds train/ and validation/ files (SQuAD v1.1 .json or .jsonl). Nothing is uploaded if
any record is invalid. The manifest goes last, so the pipeline only ever sees complete datasets.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tools.deployment import ROOT

sys.path.insert(0, str(ROOT / "training_code"))
from qa.data import SPLITS, load_dataset_files, summarize_problems

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
DATA_SUFFIXES = (".json", ".jsonl", ".ndjson")


@dataclass(frozen=True)
class UploadPlan:
    bucket: str
    prefix: str  # datasets/<name>/<version>/
    files: list[tuple[Path, str]]  # (local path, key relative to prefix)

    @property
    def manifest_key(self) -> str:
        return f"{self.prefix}manifest.json"

    def manifest(self) -> list[Any]:
        """SageMaker ManifestFile format: the prefix, then every key relative to it."""
        return [{"prefix": f"s3://{self.bucket}/{self.prefix}"}, *(key for _, key in self.files)]


def plan_upload(dataset_dir: Path, name: str, version: str, bucket: str) -> UploadPlan:
    """Validate every record and list what to upload; raises SystemExit with every problem."""
    for label, value in (("name", name), ("version", version)):
        if not NAME.match(value):
            raise SystemExit(f"error: --{label} {value!r}: use letters, digits, '.', '_' or '-'")
    files = {
        split: sorted(p for p in (dataset_dir / split).rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES)
        for split in SPLITS
    }
    missing = [split for split in SPLITS if not files[split]]
    if missing:
        raise SystemExit(
            f"error: {dataset_dir} has no {' or '.join(missing)} files (.json or .jsonl under {missing[0]}/)"
        )
    report = load_dataset_files(files, dataset_dir)
    if report.problems:
        raise SystemExit(f"{summarize_problems(report.problems)}\nerror: nothing uploaded; fix the dataset first")
    print(
        f"validated {sum(len(r) for r in report.records.values())} records "
        f"({', '.join(f'{len(report.records[s])} {s}' for s in SPLITS)})"
    )
    keyed = [(path, path.relative_to(dataset_dir).as_posix()) for split in SPLITS for path in files[split]]
    return UploadPlan(bucket=bucket, prefix=f"datasets/{name}/{version}/", files=keyed)


def upload(plan: UploadPlan, s3: Any) -> None:
    """Upload the data files, then the manifest last (only the manifest triggers the pipeline)."""
    for path, key in plan.files:
        print(f"  uploading {path} -> s3://{plan.bucket}/{plan.prefix}{key}")
        with path.open("rb") as body:
            s3.put_object(Bucket=plan.bucket, Key=f"{plan.prefix}{key}", Body=body)
    s3.put_object(
        Bucket=plan.bucket,
        Key=plan.manifest_key,
        Body=json.dumps(plan.manifest(), indent=1).encode(),
        ContentType="application/json",
    )
    print(f"  uploaded manifest s3://{plan.bucket}/{plan.manifest_key}")


def wait_for_execution(sagemaker: Any, pipeline_name: str, since: datetime, timeout_s: float = 120) -> str | None:
    """The ARN of the first execution of `pipeline_name` started after `since`, if one appears in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        response = sagemaker.list_pipeline_executions(PipelineName=pipeline_name, CreatedAfter=since, MaxResults=10)
        summaries = response.get("PipelineExecutionSummaries", [])
        if summaries:
            return summaries[-1]["PipelineExecutionArn"]
        time.sleep(5)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", default=datetime.now(UTC).strftime("%Y%m%d-%H%M%S"))
    parser.add_argument("--env", default="dev")
    args = parser.parse_args(argv)

    import boto3

    from tools.deployment import load_deployment

    session = boto3.Session()
    deployment = load_deployment(args.env, session)
    plan = plan_upload(args.dataset, args.name, args.version, deployment.bucket("datasets"))
    started = datetime.now(UTC)
    upload(plan, session.client("s3"))
    execution = wait_for_execution(session.client("sagemaker"), deployment.settings.pipeline_name, started)
    print(
        f"pipeline execution: {execution}" if execution else "no execution seen yet: check the EventBridge rule's DLQ"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
