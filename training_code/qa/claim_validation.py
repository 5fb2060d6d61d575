"""ClaimManifest's dataset check (processing.tokenize_in "fine_tune"): every record of the pinned dataset validated
before any instance starts, with the same problem lines as ValidateAndTokenize (qa.data), a refusal of records
certainly over processing.max_windows_per_example, and approximate stats.json for EstimateTrainingCost.

Standard library only: it runs in the claim's Lambda function, which has no tokenizer. So token counts are
bounded or estimated from words:
- a lower bound (the window refusal): every whitespace-separated word with a letter or digit is at least one token
  of a WordPiece or BPE tokenizer (their pre-tokenizers split on whitespace, then split further; only characters
  they drop, controls and format characters, make no token, and a word with a letter or digit keeps it), and a
  BERT-style pair has 3 special tokens ([CLS] q [SEP] context [SEP]); fewer tokens make fewer windows, so the
  bound never refuses a record that FineTune's exact check (the tokenizer) accepts;
- an estimate (the stats): words x WordPieces per word, windowed as the task's features are.
Both come from the task's claim_features (training_code/tasks/); question answering's are here.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from qa.data import (
    columnar_reader_missing,
    load_dataset_files,
    none_left_error,
    rejection,
)
from qa.features import length_histogram, too_many_windows
from qa.outputs import SPLITS

# WordPieces per whitespace-separated word, measured on data/sample-squad (504 records) with the bundled tokenizer
# (config.paths.bundled_model_dir(), a BertTokenizerFast with BERT's uncased WordPiece vocabulary), no special
# tokens: questions 4,790 / 3,096 words = 1.547, contexts 39,452 / 26,831 words = 1.470.
WORDPIECES_PER_QUESTION_WORD = 1.547
WORDPIECES_PER_CONTEXT_WORD = 1.470
PAIR_SPECIAL_TOKENS = 3  # [CLS] question [SEP] context [SEP] (BERT; RoBERTa's 4 only make more windows)
ESTIMATE_METHOD = "words x WordPieces per word measured on the task's sample, windowed as its features are ({})"

# Validation throughput of validate_dataset on one core, measured on this project's VM (2 shared cores, CPython
# 3.11, the venv's; the Lambda runtime is 3.12) with `python -m bench.claim_validation_throughput` (the sample
# repeated 1,000 times with unique ids: a 191 MB JSON Lines file, a 15 MB compact SQuAD JSON file), median of 3
# rounds in CPU seconds, 2026-12-02: JSON Lines 18.1 MB/s, SQuAD JSON 8.8 MB/s (its questions share a paragraph's
# context, each checked against it; a single earlier run gave 22.3 and 11.6: the VM is shared). Lambda gives one
# vCPU per 1,769 MB of memory (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html); validation
# uses one.
MEASURED_JSON_LINES_MB_S = 18.1
MEASURED_SQUAD_JSON_MB_S = 8.8
# The claim function's timeout (stacks/functions.py sets it in fine_tune mode): below a Lambda step's 10 minutes
# (https://docs.aws.amazon.com/sagemaker/latest/dg/build-and-manage-steps-types.html#step-type-lambda) and Lambda's
# 900 s (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
CLAIM_TIMEOUT_SECONDS = 540
# Its memory: the most Lambda allows (stacks/functions.py says why: a SQuAD JSON file is parsed whole).
CLAIM_VALIDATION_MEMORY_MB = 10_240
# The largest dataset the claim validates: the slower format's throughput over a third of the timeout (a safety
# factor of 3 for a slower vCPU than this VM's, the download from S3 and the claim's other calls), in whole 100 MB.
CLAIM_SAFETY_FACTOR = 3
CLAIM_MAX_DATASET_MB = int(MEASURED_SQUAD_JSON_MB_S * CLAIM_TIMEOUT_SECONDS / CLAIM_SAFETY_FACTOR) // 100 * 100
# A Lambda step output is at most 1,024 characters (OutputParameter Value,
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_OutputParameter.html); the Fail step that shows
# DatasetError allows 3,072 (FailStepMetadata ErrorMessage,
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_FailStepMetadata.html): the output's limit binds.
OUTPUT_MAX_CHARS = 1024


def size_error(total_bytes: int, limit_mb: int = CLAIM_MAX_DATASET_MB) -> str | None:
    """One line when the dataset is larger than the claim validates within its timeout, else None."""
    if total_bytes <= limit_mb * 10**6:
        return None
    return (
        f"error: the dataset is {total_bytes / 10**6:,.0f} MB, over the {limit_mb:,} MB that ClaimManifest validates "
        f'within its Lambda timeout: set processing.tokenize_in: "cpu_job" in cdk.json and redeploy (make deploy), '
        "then upload it again (ValidateAndTokenize validates it on a CPU instance)"
    )


def fitted(text: str, limit: int = OUTPUT_MAX_CHARS) -> str:
    """`text` within `limit` characters: whole lines while they fit, then "... N more problems" (the count of the
    lines left out; the function's log has them all); a first line too long on its own is cut."""
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    kept: list[str] = []
    for index, line in enumerate(lines):  # breaks: were every line kept with its tail, the text would fit
        tail = f"... {len(lines) - index} more problems"
        if len("\n".join([*kept, line, tail])) > limit:
            break
        kept.append(line)
    if kept:
        return "\n".join([*kept, tail])
    if len(lines) == 1:
        return lines[0][: limit - 3] + "..."
    tail = f"... {len(lines) - 1} more problems"
    return lines[0][: limit - len(tail) - 4] + "...\n" + tail


# What certain_tokens keeps: letters, digits and the four characters every WordPiece/BPE pre-tokenizer splits at
# (BERT's whitespace is these and Unicode Zs; Python's str.split splits at more, such as \x1c, which BERT drops).
_NOT_KEPT = re.compile(r"[^\w \t\n\r]|_")


def certain_tokens(text: str) -> int:
    """A lower bound on the tokens of `text`: its words (split at space, tab, newline, carriage return) that hold a
    letter or digit. Linear in the text (no backtracking): the other characters are removed, then words counted."""
    return len(_NOT_KEPT.sub("", text).split())


def estimated_tokens(text: str, per_word: float) -> int:
    return max(1, round(len(text.split()) * per_word)) if text.strip() else 0


def windows(question_tokens: int, context_tokens: int, max_seq_length: int, doc_stride: int) -> int:
    """Windows of a context as the tokenizer makes them (truncation="only_second", stride=doc_stride,
    return_overflowing_tokens: qa/features.py): the first holds `room` context tokens, each next one `room -
    doc_stride` new ones. 1 when the question leaves no room to slide (the tokenizer itself refuses that pair)."""
    room = max_seq_length - question_tokens - PAIR_SPECIAL_TOKENS
    if room <= doc_stride or context_tokens <= room:
        return 1
    return 1 + math.ceil((context_tokens - room) / (room - doc_stride))


def feature_lengths(question_tokens: int, context_tokens: int, max_seq_length: int, doc_stride: int) -> list[int]:
    """The token length of each window: full windows of max_seq_length, the last one holding what is left."""
    count = windows(question_tokens, context_tokens, max_seq_length, doc_stride)
    if count == 1:
        return [min(max_seq_length, question_tokens + context_tokens + PAIR_SPECIAL_TOKENS)]
    room = max_seq_length - question_tokens - PAIR_SPECIAL_TOKENS
    last = context_tokens - (count - 1) * (room - doc_stride)
    return [max_seq_length] * (count - 1) + [question_tokens + last + PAIR_SPECIAL_TOKENS]


@dataclass
class _Split:
    """What the stats say of one split, accumulated a record at a time (bounded memory: a histogram)."""

    lengths: Counter[int] = field(default_factory=Counter)
    examples: int = 0
    windowed: int = 0


@dataclass(frozen=True)
class ClaimValidation:
    """The claim's verdict: "" or the refusal text (the lines ValidateAndTokenize would print), and the
    approximate stats.json (None when refused)."""

    error: str
    stats: dict[str, Any] | None


def validate_dataset(
    files: dict[str, list[Path]],
    root: Path,
    *,
    max_seq_length: int,
    doc_stride: int,
    max_windows_per_example: int,
    skip_invalid: bool,
    manifest_version: str | None = None,
    task: ModuleType | None = None,
    label_names: tuple[str, ...] | None = None,
) -> ClaimValidation:
    """Validate every record of `files` (split -> paths under `root`, as the pinned folder lays them out) as
    records of `task` (default question answering) with the manifest's `label_names`, as preprocess.py does, in its
    order: the label names, whole files and records, a split with no valid record, records certainly over
    max_windows_per_example, a split with none left. With skip_invalid, record-level problems drop their record."""
    from qa.data import default_task

    task = task or default_task()
    names_problems = task.label_names_problems(label_names, "manifest.json")
    if names_problems:
        return ClaimValidation(str(rejection(names_problems, skip_invalid)), None)
    unreadable = columnar_reader_missing(files, pyarrow=False)  # the Lambda runtime has no pyarrow
    if unreadable:
        return ClaimValidation(f"error: {unreadable}", None)
    over: list[tuple[str, str, int]] = []  # (split, record id, windows at least): records certainly over the limit
    splits = {split: _Split() for split in SPLITS}

    estimate = task.claim_features(max_seq_length, doc_stride)

    def count(split: str, record: dict[str, Any]) -> None:
        lower, lengths = estimate(record)
        if lower > max_windows_per_example:
            over.append((split, record["id"], lower))
            return
        accumulated = splits[split]
        accumulated.lengths.update(lengths)
        accumulated.examples += 1
        accumulated.windowed += len(lengths) > 1

    report = load_dataset_files(files, root, keep_records=False, on_valid=count, task=task, label_names=label_names)
    refusal = rejection(report.problems, skip_invalid) or none_left_error(report.valid_records)
    if refusal:
        return ClaimValidation(refusal, None)
    window_problems = [
        too_many_windows(
            *report.sources[record_id], record_id, lower, max_seq_length, doc_stride, max_windows_per_example
        )
        for _, record_id, lower in over
    ]
    refusal = rejection(window_problems, skip_invalid)
    for split, _, _ in over:
        report.invalid_records[split] += 1
    refusal = refusal or none_left_error({split: splits[split].examples for split in SPLITS})
    if refusal:
        return ClaimValidation(refusal, None)
    stats = {
        "estimated": True,
        "method": ESTIMATE_METHOD.format(task.claim_features.__module__),
        "manifest_version": manifest_version,
        "max_seq_length": max_seq_length,
        "doc_stride": doc_stride,
        "splits": {
            split: {
                "examples": splits[split].examples,
                "features": sum(splits[split].lengths.values()),
                "windowed_examples": splits[split].windowed,
                "invalid_records": report.invalid_records[split],
                "length_histogram": length_histogram(splits[split].lengths),
            }
            for split in SPLITS
        },
    }
    return ClaimValidation("", stats)
