#!/usr/bin/env python3
"""Validate a dataset as its task's records and tokenize it into train/validation feature shards (processing job).

Container layout (SageMaker Processing), each overridable by a flag:
  /opt/ml/processing/input/data/manifest.json       the pinned manifest (SageMaker ManifestFile format)
  /opt/ml/processing/input/data/task.json           its task and label names (qa/task_file.py; none: --task's)
  /opt/ml/processing/input/data/                    the files it names (train/..., validation/...)
  /opt/ml/processing/input/model/                   the base model's tokenizer
  /opt/ml/processing/input/benchmark/                the operator's benchmark (--benchmark-sha256 given: qa.benchmark)
  /opt/ml/processing/output/{train,validation,stats}/ (and benchmark/ with a benchmark)

It runs on the CPU inference image (config.settings DEFAULT_PROCESSING_IMAGE), which has transformers, numpy and
the Python standard library but neither `datasets` nor `pyarrow`: it tokenizes with the fast tokenizer itself and
writes numpy feature files (qa.feature_files); Parquet and Arrow inputs are converted by the upload tool.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import multiprocessing
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa import benchmark
from qa.cli import setup_logging, str2bool, task_name
from qa.data import (
    LoadReport,
    Problem,
    columnar_reader_missing,
    load_dataset_files,
    none_left_error,
    read_manifest,
    rejection,
    summarize_problems,
)
from qa.feature_files import EXAMPLES_FILE, write_features
from qa.features import DEFAULT_MAX_WINDOWS_PER_EXAMPLE, length_histogram, length_limit_error, too_many_windows
from qa.outputs import (
    BENCHMARK_OUTPUT,
    BENCHMARK_SPLIT,
    PINNED_MANIFEST_FILE,
    PROCESSING_BENCHMARK_INPUT,
    PROCESSING_DATA_INPUT,
    PROCESSING_INPUT_DIR,
    PROCESSING_OUTPUT_DIR,
    PROCESSING_TOKENIZER_INPUT,
    SPLITS,
    STATS_FILE,
    STATS_OUTPUT,
    TRAIN_SPLIT,
    VALIDATION_SPLIT,
)
from qa.task_file import TaskFile, read_task_file
from tasks import DEFAULT_TASK, task

DATA_DIR = Path(PROCESSING_INPUT_DIR) / PROCESSING_DATA_INPUT
TOKENIZE_BATCH = 1000  # records per tokenizer call (the fast tokenizer encodes a batch on several threads)
RECORDS_PER_WORKER = 2000  # a process per this many records, at most one per core
Prepare = Callable[..., dict[str, list[Any]]]
_worker: tuple[Prepare, Any, int, int] | None = None  # what a tokenizer process was started with


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", type=task_name, default=DEFAULT_TASK, help="the pipeline's task (tasks.TASK_NAMES)")
    parser.add_argument("--manifest", type=Path, default=DATA_DIR / PINNED_MANIFEST_FILE)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--tokenizer-dir", type=Path, default=Path(PROCESSING_INPUT_DIR) / PROCESSING_TOKENIZER_INPUT)
    parser.add_argument("--output-dir", type=Path, default=Path(PROCESSING_OUTPUT_DIR))
    parser.add_argument("--max-seq-length", type=int, default=384)
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument(
        "--max-windows-per-example",
        type=int,
        default=DEFAULT_MAX_WINDOWS_PER_EXAMPLE,
        help="refuse (or with --skip-invalid drop) a record whose context makes more windows than this",
    )
    parser.add_argument("--skip-invalid", type=str2bool, default=False, help="true: drop bad records, count them")
    parser.add_argument("--num-workers", type=int, default=0, help="tokenizer processes; 0 = one per core")
    parser.add_argument(
        "--manifest-version",
        help="the manifest object's S3 version id: part of the step's cache key (so a re-upload under the same "
        "key is tokenized again), recorded in stats.json",
    )
    parser.add_argument(
        "--benchmark-sha256",
        help="the pinned SHA-256 of the benchmark's manifest (evaluation.benchmark): verify and tokenize the "
        f"benchmark in --benchmark-dir into <output>/{BENCHMARK_OUTPUT}/; none: no benchmark",
    )
    parser.add_argument("--benchmark-dir", type=Path, default=Path(PROCESSING_INPUT_DIR) / PROCESSING_BENCHMARK_INPUT)
    return parser.parse_args(argv)


def _workers(requested: int, records: int) -> int:
    """Processes for tokenization: all cores, but no more than one per RECORDS_PER_WORKER records."""
    cores = requested or os.cpu_count() or 1
    return max(1, min(cores, math.ceil(records / RECORDS_PER_WORKER)))


def _start_worker(prepare: Prepare, tokenizer: Any, max_seq_length: int, doc_stride: int) -> None:
    global _worker
    _worker = (prepare, tokenizer, max_seq_length, doc_stride)
    # A forked worker inherits the parent's SIGTERM handler (train.py's spot-interruption handler, qa/loop_control.py,
    # sets a flag and returns): the pool's terminate() would then never end it, and the parent would wait forever.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _prepare_batch(records: list[dict[str, Any]]) -> dict[str, list[Any]]:
    assert _worker is not None, "_start_worker first"
    prepare, tokenizer, max_seq_length, doc_stride = _worker
    return prepare(records, tokenizer, max_seq_length, doc_stride)


def tokenize_split(split: str, records: list[dict], tokenizer: Any, args: argparse.Namespace) -> dict[str, list]:
    """The features of one split, as columns: the task's train_features (train split) or validation_features over
    batches of TOKENIZE_BATCH records, in record order, in this process or (large splits) in a pool of forked
    processes that inherit the tokenizer."""
    task_module = task(args.task)
    prepare = task_module.train_features if split == TRAIN_SPLIT else task_module.validation_features
    batches = [records[start : start + TOKENIZE_BATCH] for start in range(0, len(records), TOKENIZE_BATCH)]
    worker_args = (prepare, tokenizer, args.max_seq_length, args.doc_stride)
    workers = _workers(args.num_workers, len(records))
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers, _start_worker, worker_args) as pool:
            prepared = pool.map(_prepare_batch, batches)
    else:
        _start_worker(*worker_args)
        prepared = [_prepare_batch(batch) for batch in batches]
    columns: dict[str, list] = {}
    for features in prepared:
        for name, values in features.items():
            columns.setdefault(name, []).extend(values)
    return columns


def window_problems(
    report: LoadReport, features: dict[str, dict[str, list]], args: argparse.Namespace
) -> list[Problem]:
    """A record-level problem, at the record's file and line, per example whose context makes more than
    --max-windows-per-example windows."""
    problems = []
    for split in SPLITS:
        for record_id, windows in Counter(features[split]["example_id"]).items():
            if windows > args.max_windows_per_example:
                file, location = report.sources[record_id]
                problems.append(
                    too_many_windows(
                        file,
                        location,
                        record_id,
                        windows,
                        args.max_seq_length,
                        args.doc_stride,
                        args.max_windows_per_example,
                    )
                )
    return problems


def drop_examples(report: LoadReport, features: dict[str, dict[str, list]], record_ids: set[str]) -> None:
    """Remove these examples (their records and every feature of theirs), counted as invalid records."""
    if not record_ids:
        return
    for split in SPLITS:
        kept = [i for i, example_id in enumerate(features[split]["example_id"]) if example_id not in record_ids]
        features[split] = {name: [values[i] for i in kept] for name, values in features[split].items()}
        records = [record for record in report.records[split] if record["id"] not in record_ids]
        report.invalid_records[split] += len(report.records[split]) - len(records)
        report.records[split] = records


def rejected(problems: list[Problem], skip_invalid: bool, log: Any) -> bool:
    """True, after printing them, when problems stop the job (any, or with --skip-invalid those of whole files);
    else False, after logging the records that are skipped."""
    refusal = rejection(problems, skip_invalid)
    if refusal:
        print(refusal, file=sys.stderr)
        return True
    for problem in problems:
        log.warning("skipped invalid record: %s", problem)
    return False


def none_left(report: LoadReport) -> bool:
    """True, after printing which, when a split has no valid record left."""
    error = none_left_error({split: len(report.records[split]) for split in SPLITS})
    if error:
        print(error, file=sys.stderr)
    return bool(error)


def write_split(out: Path, features: dict[str, list], declared: TaskFile) -> None:
    """One split's features and, beside them, its task and label names (what FineTune's head is built from)."""
    write_features(out, features)
    declared.write(out)


def write_validation(out: Path, features: dict[str, list], records: list[dict[str, Any]], declared: TaskFile) -> None:
    """Validation features, their task file, and the examples they came from (what FineTune scores:
    qa.evaluation)."""
    write_split(out, features, declared)
    with (out / EXAMPLES_FILE).open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def tokenize_benchmark(args: argparse.Namespace, tokenizer: Any, declared: TaskFile) -> dict[str, int] | None:
    """Verify the pinned benchmark (qa.benchmark.verify) and write its features; its counts, or None after
    printing why not (every record must be valid: an operator's benchmark is never skipped from). Its labels are
    read with the dataset's label names (the head the model is trained with), which must be the ones the benchmark
    declares (the claim step refuses other ones first)."""
    files, problem = benchmark.verify(args.benchmark_dir, args.benchmark_sha256)
    problem = problem or benchmark.declaration_problem(args.benchmark_dir, declared.task, declared.label_names)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return None
    report = load_dataset_files(
        {BENCHMARK_SPLIT: files}, args.benchmark_dir, task=task(declared.task), label_names=declared.label_names
    )
    if report.problems or not report.records[BENCHMARK_SPLIT]:
        if report.problems:
            print(summarize_problems(report.problems), file=sys.stderr)
        print("error: the benchmark has invalid records or none: fix it and stage a new version", file=sys.stderr)
        return None
    records = report.records[BENCHMARK_SPLIT]
    features = tokenize_split(BENCHMARK_SPLIT, records, tokenizer, args)
    write_validation(args.output_dir / BENCHMARK_OUTPUT, features, records, declared)
    return {"examples": len(records), "features": len(features["input_ids"])}


@dataclass(frozen=True)
class Tokenized:
    """What `validate_and_tokenize` wrote under its output dir: the stats (also STATS_FILE), and how long it took."""

    stats: dict[str, Any]
    examples: int  # train + validation (+ benchmark) examples tokenized
    features: int
    processes: int  # tokenizer processes of the largest split
    seconds: float


def validate_and_tokenize(args: argparse.Namespace, log: logging.Logger) -> Tokenized | None:
    """Validate the pinned dataset (args: parse_args's), tokenize it and write the features, the benchmark's and
    STATS_FILE under args.output_dir; None after printing on stderr why the dataset is refused. preprocess.py's
    core, which train.py also runs (--tokenize_data true: FineTune tokenizes on its own vCPUs)."""
    started = time.perf_counter()
    declared = read_task_file(args.manifest.parent, args.task)
    if declared.task != args.task:
        print(
            f"error: the dataset is for task {declared.task} ({args.manifest.parent}), this job's --task is "
            f"{args.task}: upload it to the pipeline of {declared.task}",
            file=sys.stderr,
        )
        return None
    task_module = task(args.task)
    files, problems = read_manifest(args.manifest, args.data_dir)
    problems = [*task_module.label_names_problems(declared.label_names, args.manifest.name), *problems]
    unreadable = columnar_reader_missing(files)
    if unreadable:
        print(f"error: {unreadable}", file=sys.stderr)
        return None
    report = (
        load_dataset_files(files, args.data_dir, task=task_module, label_names=declared.label_names)
        if not problems
        else None
    )
    if report is not None:
        problems = report.problems
    if rejected(problems, args.skip_invalid, log):
        return None
    assert report is not None
    if none_left(report):
        return None

    from transformers import AutoConfig, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(args.tokenizer_dir))
    if not tokenizer.is_fast:
        print(
            f"error: {args.task} needs a fast tokenizer (offset mappings, word ids): {args.tokenizer_dir} has none",
            file=sys.stderr,
        )
        return None
    config = (
        AutoConfig.from_pretrained(str(args.tokenizer_dir)) if (args.tokenizer_dir / "config.json").is_file() else None
    )
    too_long = length_limit_error(args.max_seq_length, tokenizer, config, "--max-seq-length")
    if too_long:
        print(f"error: {too_long}", file=sys.stderr)
        return None
    stats: dict = {
        "manifest_version": args.manifest_version,
        "max_seq_length": args.max_seq_length,
        "doc_stride": args.doc_stride,
        "splits": {},
    }
    tokenized = {split: tokenize_split(split, report.records[split], tokenizer, args) for split in SPLITS}
    too_many_windows = window_problems(report, tokenized, args)
    if rejected(too_many_windows, args.skip_invalid, log):
        return None
    drop_examples(report, tokenized, {str(problem.record_id) for problem in too_many_windows})
    if none_left(report):
        return None
    for split in SPLITS:
        records, features = report.records[split], tokenized[split]
        out = args.output_dir / split
        if split == VALIDATION_SPLIT:
            write_validation(out, features, records, declared)
        else:
            write_split(out, features, declared)
        lengths = [len(ids) for ids in features["input_ids"]]
        stats["splits"][split] = {
            "examples": len(records),
            "features": len(lengths),
            # Examples whose context is cut into several overlapping windows (no text is truncated).
            "windowed_examples": sum(1 for n in Counter(features["example_id"]).values() if n > 1),
            "invalid_records": report.invalid_records[split],
            # One count per feature: EstimateTrainingCost prices every feature from it.
            "length_histogram": length_histogram(lengths),
        }
        log.info("%s: %d examples -> %d features", split, len(records), len(lengths))
    if args.benchmark_sha256:
        counts = tokenize_benchmark(args, tokenizer, declared)
        if counts is None:
            return None
        stats[BENCHMARK_OUTPUT] = {"manifest_sha256": args.benchmark_sha256, **counts}
        log.info("benchmark: %d examples -> %d features", counts["examples"], counts["features"])
    (args.output_dir / STATS_OUTPUT).mkdir(parents=True, exist_ok=True)
    (args.output_dir / STATS_OUTPUT / STATS_FILE).write_text(json.dumps(stats, indent=2))
    counted = [*stats["splits"].values(), *([stats[BENCHMARK_OUTPUT]] if args.benchmark_sha256 else [])]
    return Tokenized(
        stats=stats,
        examples=sum(part["examples"] for part in counted),
        features=sum(part["features"] for part in counted),
        processes=max(_workers(args.num_workers, len(records)) for records in report.records.values()),
        seconds=time.perf_counter() - started,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tokenized = validate_and_tokenize(args, setup_logging())
    if tokenized is None:
        return 1
    splits = tokenized.stats["splits"]
    print(json.dumps({s: {k: v for k, v in d.items() if k != "length_histogram"} for s, d in splits.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
