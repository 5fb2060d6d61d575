#!/usr/bin/env python3
"""Validate a SQuAD-format dataset and tokenize it into train/validation feature shards (processing job).

Container layout (SageMaker Processing), each overridable by a flag:
  /opt/ml/processing/input/data/manifest.json       the pinned manifest (SageMaker ManifestFile format)
  /opt/ml/processing/input/data/                    the files it names (train/..., validation/...)
  /opt/ml/processing/input/model/                   the base model's tokenizer
  /opt/ml/processing/output/{train,validation,stats}/
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import Counter
from pathlib import Path

from qa.cli import setup_logging, str2bool
from qa.data import SPLITS, load_dataset_files, read_manifest, summarize_problems
from qa.features import (
    EXAMPLES_FILE,
    FEATURES_FILE,
    length_limit_error,
    prepare_train_features,
    prepare_validation_features,
)

PROCESSING = "/opt/ml/processing"
HISTOGRAM_BUCKET = 32


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", type=Path, default=Path(f"{PROCESSING}/input/data/manifest.json"))
    parser.add_argument("--data-dir", type=Path, default=Path(f"{PROCESSING}/input/data"))
    parser.add_argument("--tokenizer-dir", type=Path, default=Path(f"{PROCESSING}/input/model"))
    parser.add_argument("--output-dir", type=Path, default=Path(f"{PROCESSING}/output"))
    parser.add_argument("--max-seq-length", type=int, default=384)
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument("--skip-invalid", type=str2bool, default=False, help="true: drop bad records, count them")
    parser.add_argument("--num-workers", type=int, default=0, help="tokenizer processes; 0 = one per core")
    parser.add_argument(
        "--manifest-version",
        help="the manifest object's S3 version id: part of the step's cache key (so a re-upload under the same "
        "key is tokenized again), recorded in stats.json",
    )
    return parser.parse_args(argv)


def _workers(requested: int, records: int) -> int:
    """Processes for tokenization: all cores, but no more than one per 2,000 records."""
    cores = requested or os.cpu_count() or 1
    return max(1, min(cores, math.ceil(records / 2000)))


def _length_histogram(lengths: list[int]) -> dict[str, int]:
    counts = Counter((n // HISTOGRAM_BUCKET) * HISTOGRAM_BUCKET for n in lengths)
    return {f"{low}-{low + HISTOGRAM_BUCKET - 1}": counts[low] for low in sorted(counts)}


def tokenize_split(split: str, records: list[dict], tokenizer, args: argparse.Namespace):
    """A `datasets.Dataset` of features for one split."""
    from datasets import Dataset

    prepare = prepare_train_features if split == "train" else prepare_validation_features
    dataset = Dataset.from_list(records)
    return dataset.map(
        prepare,
        batched=True,
        batch_size=1000,
        num_proc=_workers(args.num_workers, len(records)) if len(records) > 2000 else None,
        remove_columns=dataset.column_names,
        fn_kwargs={"tokenizer": tokenizer, "max_seq_length": args.max_seq_length, "doc_stride": args.doc_stride},
        desc=f"tokenizing {split}",
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log = setup_logging()
    files, problems = read_manifest(args.manifest, args.data_dir)
    report = load_dataset_files(files, args.data_dir) if not problems else None
    if report is not None:
        problems = report.problems
    fatal = [p for p in problems if not (args.skip_invalid and p.record_level)]
    if fatal:
        print(summarize_problems(fatal), file=sys.stderr)
        print(
            f"error: dataset rejected ({len(fatal)} problem(s)); fix them, or pass --skip-invalid true to drop "
            "invalid records",
            file=sys.stderr,
        )
        return 1
    assert report is not None
    for problem in problems:
        log.warning("skipped invalid record: %s", problem)
    empty = [split for split in SPLITS if not report.records[split]]
    if empty:
        print(f"error: no valid {' or '.join(empty)} records left", file=sys.stderr)
        return 1

    from transformers import AutoConfig, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(args.tokenizer_dir))
    if not tokenizer.is_fast:
        print("error: question answering needs a fast tokenizer (offset mappings)", file=sys.stderr)
        return 1
    config = (
        AutoConfig.from_pretrained(str(args.tokenizer_dir)) if (args.tokenizer_dir / "config.json").is_file() else None
    )
    too_long = length_limit_error(args.max_seq_length, tokenizer, config, "--max-seq-length")
    if too_long:
        print(f"error: {too_long}", file=sys.stderr)
        return 1
    stats: dict = {
        "manifest_version": args.manifest_version,
        "max_seq_length": args.max_seq_length,
        "doc_stride": args.doc_stride,
        "splits": {},
    }
    for split in SPLITS:
        records = report.records[split]
        features = tokenize_split(split, records, tokenizer, args)
        out = args.output_dir / split
        out.mkdir(parents=True, exist_ok=True)
        features.to_parquet(str(out / FEATURES_FILE))
        if split == "validation":
            with (out / EXAMPLES_FILE).open("w", encoding="utf-8") as handle:
                for record in records:
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        lengths = [len(ids) for ids in features["input_ids"]]
        stats["splits"][split] = {
            "examples": len(records),
            "features": len(features),
            "truncated_examples": sum(1 for n in Counter(features["example_id"]).values() if n > 1),
            "invalid_records": report.invalid_records[split],
            "length_histogram": _length_histogram(lengths),
        }
        log.info("%s: %d examples -> %d features", split, len(records), len(features))
    (args.output_dir / "stats").mkdir(parents=True, exist_ok=True)
    (args.output_dir / "stats" / "stats.json").write_text(json.dumps(stats, indent=2))
    print(json.dumps({s: {k: v for k, v in d.items() if k != "length_histogram"} for s, d in stats["splits"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
