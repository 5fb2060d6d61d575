"""The operator's benchmark: a dataset in the uploads' format whose BENCHMARK_SPLIT is what CheckF1 gates on.

`make stage-benchmark` (tools/stage_benchmark.py) and the local runner stage one under
s3://<artifacts>/benchmarks/<name>/<version>/: the split's files, then `manifest.json` (manifest v2, each file's
version id, SHA-256 and size) last. The settings pin the manifest by its S3 version id and the SHA-256 of its
bytes (evaluation.benchmark); ValidateAndTokenize receives the folder as a processing input, which SageMaker
downloads at the current version (ProcessingS3Input has no version id), so `verify` checks the manifest's bytes
against the pinned SHA-256 and every file against the SHA-256 the manifest records before anything is tokenized.

Standard library only: the processing job loads it as it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qa.data import ManifestFile, is_columnar, load_dataset_files, manifest_v2, summarize_problems
from qa.outputs import BENCHMARK_SPLIT, BENCHMARKS_ROOT, DATASET_MANIFEST_FILE, MANIFEST_V2_FORMAT, manifest_key_split


def prefix(name: str, version: str) -> str:
    """The benchmark's folder in the artifacts bucket: benchmarks/<name>/<version>/."""
    return f"{BENCHMARKS_ROOT}/{name}/{version}/"


def manifest_key(name: str, version: str) -> str:
    return prefix(name, version) + DATASET_MANIFEST_FILE


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def split_files(dataset_dir: Path) -> list[tuple[Path, str]]:
    """(file, key relative to the benchmark's folder) of every file of `dataset_dir`'s BENCHMARK_SPLIT folder, in
    key order; the other splits are not staged (the benchmark is scored, never trained on)."""
    folder = dataset_dir / BENCHMARK_SPLIT
    return [(path, path.relative_to(dataset_dir).as_posix()) for path in sorted(folder.rglob("*")) if path.is_file()]


def check_folder(dataset_dir: Path) -> list[tuple[Path, str]]:
    """The files `stage` uploads; ValueError (one line, or the record problems) when there are none, one is
    columnar (the processing image reads JSON, JSON Lines and CSV only) or a record is invalid."""
    files = split_files(dataset_dir)
    if not files:
        raise ValueError(f"{dataset_dir} has no {BENCHMARK_SPLIT}/ files: a benchmark is a dataset's {BENCHMARK_SPLIT}")
    columnar = [key for path, key in files if is_columnar(path)]
    if columnar:
        raise ValueError(f"{', '.join(columnar)}: convert benchmark files to JSON Lines first (no pyarrow in the job)")
    report = load_dataset_files({BENCHMARK_SPLIT: [path for path, _ in files]}, dataset_dir, keep_records=False)
    if report.problems:
        raise ValueError(summarize_problems(report.problems, limit=20))
    return files


def stage(dataset_dir: Path, name: str, version: str, put: Callable[[str, bytes], str]) -> tuple[str, str]:
    """Upload the benchmark's files with `put(key, body) -> version id`, then its manifest (v2: each file's version
    id, SHA-256 and size) last; (the manifest's version id, the SHA-256 of its bytes): what evaluation.benchmark
    pins."""
    files = []
    for path, key in check_folder(dataset_dir):
        body = path.read_bytes()
        version_id = put(prefix(name, version) + key, body)
        files.append(ManifestFile(key, version_id, hashlib.sha256(body).hexdigest(), len(body)))
    manifest = json.dumps(manifest_v2(name, version, files), indent=1).encode()
    return put(manifest_key(name, version), manifest), hashlib.sha256(manifest).hexdigest()


def verify(folder: Path, pinned_sha256: str) -> tuple[list[Path], str]:
    """The benchmark's files (under `folder`, as the processing input downloads them), checked against the pinned
    manifest SHA-256 and the manifest's own per-file SHA-256; ([], one line naming the mismatch and the fix) when
    anything differs."""
    manifest_path = folder / DATASET_MANIFEST_FILE
    fix = "stage the benchmark with `make stage-benchmark` and pin what it prints in evaluation.benchmark"
    if not manifest_path.is_file():
        return [], f"the benchmark has no {DATASET_MANIFEST_FILE} at {folder}: {fix}"
    body = manifest_path.read_bytes()
    actual = hashlib.sha256(body).hexdigest()
    if actual != pinned_sha256:
        return [], (
            f"the benchmark manifest's SHA-256 is {actual}, not the pinned {pinned_sha256}: it was replaced after "
            f"it was pinned, or the pin is out of date; {fix}"
        )
    manifest: Any = json.loads(body)
    v2 = isinstance(manifest, dict) and manifest.get("format") == MANIFEST_V2_FORMAT
    entries = manifest.get("files") if v2 else None
    if not isinstance(entries, list) or not entries:
        return [], f"the benchmark manifest is no {MANIFEST_V2_FORMAT} manifest listing files: {fix}"
    files = []
    for entry in entries:
        key = entry.get("key") if isinstance(entry, dict) else None
        if not isinstance(key, str) or ".." in key.split("/") or manifest_key_split(key) != BENCHMARK_SPLIT:
            return [], f"the benchmark manifest lists {key!r}: benchmark files lie under {BENCHMARK_SPLIT}/; {fix}"
        path = folder / key
        if not path.is_file() or sha256_file(path) != entry.get("sha256"):
            return [], f"the benchmark file {key} is missing or is not the content its manifest records: {fix}"
        files.append(path)
    return files, ""
