"""Emulate the S3 -> EventBridge -> pipeline trigger with the rule taken from the synthesized template."""

from __future__ import annotations

import hashlib
import json
import tempfile
import uuid
from pathlib import Path
from typing import Any

from qa import benchmark
from qa.data import ManifestFile, convert_columnar, manifest_v2
from qa.declared_task import declared_task
from qa.outputs import BENCHMARK_DATA_CHANNEL, BENCHMARKS_ROOT, PROCESSING_BENCHMARK_INPUT, SPLITS
from tasks import DEFAULT_TASK
from tasks import task as task_module

from config.layout import DatasetLayout
from local_runner.assembly import SynthesizedPipeline, extract_event_value
from local_runner.event_pattern import matches
from local_runner.store import LocalObjectStore
from pipeline_steps import names
from pipeline_steps.walk import find_step


def upload_dataset(
    store: LocalObjectStore,
    dataset_dir: Path,
    bucket: str,
    name: str,
    version: str,
    datasets: DatasetLayout | None = None,
) -> tuple[str, str]:
    """Copy train/ and validation/ files under `datasets`' root (the pipeline's; default question answering's),
    then write the manifest (v2: each file's version id) last; the manifest's key and version id. Parquet/Arrow
    files and save_to_disk folders go up as JSON Lines, as `make upload-dataset` sends them
    (qa.data.convert_columnar): the processing image has no pyarrow."""
    datasets = datasets or DatasetLayout()
    prefix = datasets.prefix(name, version)
    found = [
        (path, path.relative_to(dataset_dir).as_posix())
        for split in SPLITS
        for path in sorted(p for p in (dataset_dir / split).rglob("*") if p.is_file())
    ]
    files = []
    declared = declared_task(dataset_dir)  # ValueError: a malformed declaration, as make upload-dataset says it
    with tempfile.TemporaryDirectory(prefix="local-upload-") as workdir:
        uploads, converted_from = convert_columnar(
            dataset_dir, found, Path(workdir), task_module(declared.task or DEFAULT_TASK), declared.label_names
        )
        for path, key in uploads:
            data = path.read_bytes()
            files.append(
                ManifestFile(
                    key=key,
                    version_id=store.put_bytes(data, f"s3://{bucket}/{prefix}{key}"),
                    sha256=hashlib.sha256(data).hexdigest(),
                    size=len(data),
                )
            )
    manifest_key = datasets.manifest_key(name, version)
    manifest = manifest_v2(name, version, files, converted_from, declared.task, declared.label_names)
    manifest_version = store.put_bytes(json.dumps(manifest, indent=1).encode(), f"s3://{bucket}/{manifest_key}")
    return manifest_key, manifest_version


def stage_benchmark(
    store: LocalObjectStore, definition: dict[str, Any], dataset_dir: Path, pipeline_task: str
) -> str | None:
    """Stage `dataset_dir`'s validation split where the benchmark input points (ValidateAndTokenize's, or FineTune's
    benchmark data channel when it tokenizes), as `make stage-benchmark` does (qa.benchmark.stage, for the
    pipeline's task);
    "s3://...manifest.json (version ..., SHA-256 ...)", or None when the definition has no benchmark
    (evaluation.benchmark unset). The job compares it with the pin."""
    uris = benchmark_input_uris(definition)
    if not uris:
        return None
    bucket, _, folder = uris[0].removeprefix("s3://").partition("/")
    name, version = folder.removeprefix(f"{BENCHMARKS_ROOT}/").strip("/").split("/")
    version_id, sha256 = benchmark.stage(
        dataset_dir, name, version, lambda key, body: store.put_bytes(body, f"s3://{bucket}/{key}"), pipeline_task
    )
    return f"s3://{bucket}/{benchmark.manifest_key(name, version)} (version {version_id}, SHA-256 {sha256})"


def benchmark_input_uris(definition: dict[str, Any]) -> list[str]:
    """The benchmark folder the definition's jobs read: ValidateAndTokenize's benchmark input, else FineTune's
    benchmark data channel (processing.tokenize_in = "fine_tune")."""
    try:
        inputs = find_step(definition, names.PREPROCESS_STEP)["Arguments"]["ProcessingInputs"]
    except KeyError:
        channels = find_step(definition, names.TRAIN_STEP)["Arguments"]["InputDataConfig"]
        return [
            channel["DataSource"]["S3DataSource"]["S3Uri"]
            for channel in channels
            if channel["ChannelName"] == BENCHMARK_DATA_CHANNEL
        ]
    return [item["S3Input"]["S3Uri"] for item in inputs if item["InputName"] == PROCESSING_BENCHMARK_INPUT]


def object_created_event(
    bucket: str, key: str, body: bytes, account: str, region: str, version_id: str | None = None
) -> dict[str, Any]:
    """The event of a single-part upload of `body` (etag: its MD5); `version_id` as a versioned bucket gives
    each upload (a fresh one by default)."""
    etag = hashlib.md5(body, usedforsecurity=False).hexdigest()
    return s3_object_created_event(bucket, key, len(body), etag, version_id or uuid.uuid4().hex, account, region)


def s3_object_created_event(
    bucket: str, key: str, size: int, etag: str, version_id: str, account: str, region: str
) -> dict[str, Any]:
    """An S3 'Object Created' event as EventBridge delivers it (S3 user guide, ev-events.html)."""
    return {
        "version": "0",
        "id": "00000000-0000-0000-0000-000000000000",
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": account,
        "time": "2026-01-01T00:00:00Z",
        "region": region,
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": {
                "key": key,
                "size": size,
                "etag": etag,
                "version-id": version_id,
                "sequencer": "0",
            },
            "request-id": "local",
            "requester": account,
            "reason": "PutObject",
        },
    }


def parameters_from_event(pipeline: SynthesizedPipeline, event: dict[str, Any]) -> dict[str, Any] | None:
    """The pipeline parameters the rule's target would pass, or None when the rule does not match."""
    if not matches(pipeline.trigger_pattern, event):
        return None
    return {name: extract_event_value(event, path) for name, path in pipeline.trigger_parameters.items()}
