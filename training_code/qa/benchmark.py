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

from tasks import task

from qa.data import ManifestFile, is_columnar, load_dataset_files, manifest_v2, summarize_problems
from qa.declared_task import DeclaredTask, declared_task, own_declaration
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


def check_folder(dataset_dir: Path, pipeline_task: str) -> tuple[list[tuple[Path, str]], DeclaredTask]:
    """The files `stage` uploads, and the folder's declaration (qa.declared_task: its manifest's task and label
    names). ValueError (one line, or the record problems) when there are none, one is columnar (the processing image
    reads JSON, JSON Lines and CSV only), the folder declares another task than `pipeline_task`, its label names do
    not suit the task, or a record is not a valid record of the task."""
    files = split_files(dataset_dir)
    if not files:
        raise ValueError(f"{dataset_dir} has no {BENCHMARK_SPLIT}/ files: a benchmark is a dataset's {BENCHMARK_SPLIT}")
    columnar = [key for path, key in files if is_columnar(path)]
    if columnar:
        raise ValueError(f"{', '.join(columnar)}: convert benchmark files to JSON Lines first (no pyarrow in the job)")
    declared = declared_task(dataset_dir)
    if declared.task is not None and declared.task != pipeline_task:
        raise ValueError(
            f"its {DATASET_MANIFEST_FILE} declares task {declared.task}: the {pipeline_task} pipeline's benchmark "
            f"holds {pipeline_task} records (TASK= names the pipeline)"
        )
    module = task(pipeline_task)
    problems = module.label_names_problems(declared.label_names, DATASET_MANIFEST_FILE)
    if not problems:
        problems = load_dataset_files(
            {BENCHMARK_SPLIT: [path for path, _ in files]},
            dataset_dir,
            keep_records=False,
            task=module,
            label_names=declared.label_names,
        ).problems
    if problems:
        raise ValueError(summarize_problems(problems, limit=20))
    return files, declared


def stage(
    dataset_dir: Path, name: str, version: str, put: Callable[[str, bytes], str], pipeline_task: str
) -> tuple[str, str]:
    """Upload the benchmark's files with `put(key, body) -> version id`, then its manifest (v2: each file's version
    id, SHA-256 and size, and the folder's declared task and label names) last; (the manifest's version id, the
    SHA-256 of its bytes): what evaluation.benchmark pins."""
    files = []
    staged, declared = check_folder(dataset_dir, pipeline_task)
    for path, key in staged:
        body = path.read_bytes()
        version_id = put(prefix(name, version) + key, body)
        files.append(ManifestFile(key, version_id, hashlib.sha256(body).hexdigest(), len(body)))
    document = manifest_v2(name, version, files, task=declared.task, label_names=declared.label_names)
    manifest = json.dumps(document, indent=1).encode()
    return put(manifest_key(name, version), manifest), hashlib.sha256(manifest).hexdigest()


def declaration_problem(folder: Path, task_name: str, label_names: tuple[str, ...] | None) -> str:
    """ "" or one line when the benchmark in `folder` (its manifest's declaration, as `stage` wrote it) holds records of
    another task than `task_name`, or declares other label names than `label_names` (the dataset's, or a model's):
    its labels would be read as other classes."""
    own = own_declaration(folder / DATASET_MANIFEST_FILE)
    if own.task is not None and own.task != task_name:
        return f"the benchmark holds {own.task} records, not {task_name} ones: pin a {task_name} benchmark"
    if own.label_names != label_names:
        shown = list(own.label_names) if own.label_names is not None else None
        return (
            f"the benchmark's label names {shown} are not {list(label_names) if label_names else None}: the scores "
            "would compare other classes; declare the benchmark's label names in its order"
        )
    return ""


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
