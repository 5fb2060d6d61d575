"""ClaimManifest's dataset check (qa/claim_validation.py, processing.tokenize_in "fine_tune"): the refusal is the lines
ValidateAndTokenize prints for the same files, the window bound never refuses what the tokenizer accepts, the stats
approximate the processing job's, and a dataset over the claim's size limit is refused in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pipeline_functions as functions
import pytest
from qa.claim_validation import (
    CLAIM_MAX_DATASET_MB,
    OUTPUT_MAX_CHARS,
    certain_tokens,
    fitted,
    size_error,
    validate_dataset,
    windows,
)
from qa.data import read_manifest
from qa.features import prepare_validation_features
from qa.outputs import SPLITS

from config.paths import SAMPLE_DATASET
from tests.training_code.test_data_validation import (
    GOOD,
    MALFORMED_RECORDS,
    run_preprocess,
    with_,
    write_dataset,
)
from tests.training_code.test_pipeline_functions import event, local, statuses, upload  # noqa: F401 (a fixture)


def claim_verdict(
    root: Path,
    skip_invalid: bool = False,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_windows_per_example=100,
):
    files, problems = read_manifest(root / "manifest.json", root)
    assert not problems
    return validate_dataset(
        files,
        root,
        skip_invalid=skip_invalid,
        max_seq_length=max_seq_length,
        doc_stride=doc_stride,
        max_windows_per_example=max_windows_per_example,
    )


def processing_job_lines(root: Path, out: Path, pretrained_dir: Path, capsys, *extra: str) -> str:
    capsys.readouterr()
    assert run_preprocess(root, out, pretrained_dir, *extra) == 1
    return capsys.readouterr().err.strip()


LONG = with_(id="long", context="Paris is the capital of France. " + "It rains there in the autumn. " * 400)
BAD_FILES: dict[str, dict[str, Any]] = {
    **{f"record: {kind}": {"train_lines": [record, GOOD]} for kind, (record, _) in MALFORMED_RECORDS.items()},
    "empty file": {"raw_train": b""},
    "invalid JSON line": {"raw_train": b'{"id": "q1", "context": \n'},
    "not UTF-8": {"raw_train": b"\xff\xfe\x00garbage"},
    "SQuAD JSON without data": {"raw_train": b'{"version": "1.1"}', "train_name": "train/a.json"},
    "SQuAD JSON not JSON": {"raw_train": b'{"data": [}', "train_name": "train/a.json"},
    "unknown file type": {"raw_train": b"x", "train_name": "train/a.txt"},
    "duplicate ids across files": {"train_lines": [GOOD, dict(GOOD, id="v1")]},
    "several problems at once": {"train_lines": [with_(id=...), with_(id="a", context=""), GOOD]},
    "no valid train record": {"train_lines": [with_(id="bad", question="")], "skip": True},
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_the_claim_refuses_with_the_lines_of_the_processing_job(tmp_path, pretrained_dir, capsys, case):
    spec = dict(BAD_FILES[case])
    skip = spec.pop("skip", False)
    root = write_dataset(tmp_path / "d", spec.pop("train_lines", []), **spec)
    extra = ("--skip-invalid", "true") if skip else ()
    expected = processing_job_lines(root, tmp_path / "out", pretrained_dir, capsys, *extra)
    verdict = claim_verdict(root, skip_invalid=skip)
    assert verdict.error == expected and verdict.stats is None


def test_skip_invalid_drops_bad_records_but_not_whole_file_problems(tmp_path, pretrained_dir):
    records = [GOOD, with_(id="bad1", question=""), with_(id="bad2", answers_answer_start=[2]), dict(GOOD, id="q2")]
    verdict = claim_verdict(write_dataset(tmp_path / "d", records), skip_invalid=True)
    assert verdict.error == ""
    assert verdict.stats is not None
    assert (verdict.stats["splits"]["train"]["examples"], verdict.stats["splits"]["train"]["invalid_records"]) == (2, 2)
    assert claim_verdict(write_dataset(tmp_path / "e", [], raw_train=b""), skip_invalid=True).error


def test_a_columnar_file_is_refused_as_the_processing_image_refuses_it(tmp_path):
    root = write_dataset(tmp_path / "d", [], raw_train=b"PAR1", train_name="train/a.parquet")
    verdict = claim_verdict(root)
    assert verdict.error.startswith("error: ") and "python -m tools.upload_dataset" in verdict.error
    assert verdict.error.count("\n") == 0


def test_a_context_certainly_over_the_window_bound_is_refused_with_the_processing_jobs_line_or_dropped(
    tmp_path, pretrained_dir, capsys
):
    root = write_dataset(tmp_path / "d", [GOOD, LONG])
    job = processing_job_lines(root, tmp_path / "out", pretrained_dir, capsys, "--max-windows-per-example", "4")
    refusal = claim_verdict(root, max_windows_per_example=4).error
    pattern = r"makes (\d+) windows of 384 tokens \(doc stride 128\)"
    # The same line but for the count: the claim's is a lower bound of the tokenizer's.
    assert re.sub(pattern, "", refusal) == re.sub(pattern, "", job)
    claimed, counted = re.search(pattern, refusal), re.search(pattern, job)
    assert claimed is not None and counted is not None and int(claimed[1]) <= int(counted[1])
    dropped = claim_verdict(root, skip_invalid=True, max_windows_per_example=4)
    assert dropped.error == "" and dropped.stats["splits"]["train"]["invalid_records"] == 1
    only_long = write_dataset(tmp_path / "e", [LONG])
    assert claim_verdict(only_long, skip_invalid=True, max_windows_per_example=4).error == (
        "error: no valid train records left"
    )


def exact_windows(tokenizer, question: str, context: str, max_seq_length: int, doc_stride: int) -> int:
    batch = {"id": ["x"], "question": [question], "context": [context]}
    return len(prepare_validation_features(batch, tokenizer, max_seq_length, doc_stride)["example_id"])


CRAFTED_CONTEXTS = [
    "word " * 3000,
    "un\x1cseparated\x1cwords " * 500,  # str.split() splits at \x1c, BERT drops it: one word for the bound
    "zero\u200bwidth\u200bspaces " * 500,
    "-- ... !!! ?? " * 800,  # punctuation only: no certain token, many real ones
    "Ünïcödé àccents café " * 700,
    "東京は日本の首都です。" * 300,
    "x" * 20000,
    "a1 " * 2500 + "\u00a0".join(["b"] * 500),
]


@pytest.mark.parametrize(("max_seq_length", "doc_stride"), [(384, 128), (128, 32), (64, 16)])
def test_the_window_bound_never_exceeds_the_tokenizers_count(tokenizer, max_seq_length, doc_stride):
    sample = [json.loads(line) for line in (SAMPLE_DATASET / "train" / "train.jsonl").read_text().splitlines()]
    pairs = [(r["question"], r["context"]) for r in sample]
    pairs += [("What falls in the autumn?", context) for context in CRAFTED_CONTEXTS]
    longest = 0
    for question, context in pairs:
        bound = windows(certain_tokens(question.lstrip()), certain_tokens(context), max_seq_length, doc_stride)
        exact = exact_windows(tokenizer, question, context, max_seq_length, doc_stride)
        assert bound <= exact, (question[:40], context[:40], bound, exact)
        longest = max(longest, bound)
    assert longest > 10  # the crafted contexts make many windows: the bound is tested where it refuses


def mean_length(histogram: dict[str, int]) -> float:
    return sum((int(bucket.split("-")[0]) + 16) * count for bucket, count in histogram.items()) / sum(
        histogram.values()
    )


@pytest.mark.parametrize(("max_seq_length", "doc_stride"), [(384, 128), (64, 16)])
def test_the_estimated_stats_are_within_ten_percent_of_the_processing_jobs_on_the_sample(
    tmp_path, pretrained_dir, max_seq_length, doc_stride
):
    """Tolerance: features and mean feature length (bucket midpoints) within 10%, example counts exact."""
    windowing = ("--max-seq-length", str(max_seq_length), "--doc-stride", str(doc_stride))
    assert run_preprocess(SAMPLE_DATASET, tmp_path, pretrained_dir, *windowing) == 0
    exact = json.loads((tmp_path / "stats" / "stats.json").read_text())
    estimated = claim_verdict(SAMPLE_DATASET, max_seq_length=max_seq_length, doc_stride=doc_stride).stats
    assert estimated is not None and estimated["estimated"] is True and estimated["method"]
    assert set(estimated["splits"]["train"]) == set(exact["splits"]["train"])
    for split in SPLITS:
        want, got = exact["splits"][split], estimated["splits"][split]
        assert (got["examples"], got["invalid_records"]) == (want["examples"], want["invalid_records"])
        assert got["features"] == pytest.approx(want["features"], rel=0.10)
        assert mean_length(got["length_histogram"]) == pytest.approx(mean_length(want["length_histogram"]), rel=0.10)


def test_a_dataset_over_the_size_limit_is_refused_in_one_line_naming_size_limit_and_fix():
    assert size_error(CLAIM_MAX_DATASET_MB * 10**6) is None
    refusal = size_error(CLAIM_MAX_DATASET_MB * 10**6 + 1)
    assert refusal is not None and "\n" not in refusal
    assert f"over the {CLAIM_MAX_DATASET_MB:,} MB" in refusal
    assert 'processing.tokenize_in: "cpu_job"' in refusal and "cdk.json" in refusal and "redeploy" in refusal


def test_a_long_refusal_fits_a_lambda_step_output_and_says_how_many_lines_are_left_out():
    lines = [f"  - train/a.jsonl:line {n} id=q{n} field=question: is empty (fix: fill it in)" for n in range(100)]
    text = "\n".join(["100 problem(s) in the dataset:", *lines, "error: dataset rejected"])
    shown = fitted(text)
    assert len(shown) <= OUTPUT_MAX_CHARS and shown.startswith("100 problem(s) in the dataset:\n  - train/a.jsonl")
    kept = shown.count("\n")
    assert shown.endswith(f"... {len(text.splitlines()) - kept} more problems")
    assert len(fitted("x" * 5000)) == OUTPUT_MAX_CHARS and fitted("x" * 5000).endswith("x...")
    cut = fitted("x" * 5000 + "\nerror: dataset rejected")
    assert len(cut) <= OUTPUT_MAX_CHARS and cut.endswith("...\n... 1 more problems")
    assert fitted("short") == "short"


# ------------------------------------------------------------------------------------------- in the handler


def validating_event(version: str, **overrides: object) -> dict:
    windowing = {"MaxSeqLength": 384, "DocStride": 128, "MaxWindowsPerExample": 100}
    return {**event("a", version), "ValidateRecords": "true", "SkipInvalidRecords": "false", **windowing, **overrides}


def sample_files() -> dict[str, bytes]:
    return {
        "train/train.jsonl": (SAMPLE_DATASET / "train" / "train.jsonl").read_bytes(),
        "validation/validation.json": (SAMPLE_DATASET / "validation" / "validation.json").read_bytes(),
    }


def test_the_claim_writes_its_stats_beside_the_pinned_folder_and_reads_each_file_at_its_version(
    tmp_path,
    local,  # noqa: F811
):
    version = upload(local, sample_files())
    # Written after the upload: the claim validates the version the manifest pins, not this.
    local.put("datasets", "datasets/squad/v1/train/train.jsonl", b"not json\n")
    statuses(tmp_path, a="Executing")
    result = functions.claim_handler(validating_event(version))
    assert result["DatasetError"] == "" and result["ParameterError"] == ""
    stats_uri, input_uri = result["StatsUri"], result["InputUri"]
    digest = input_uri.rstrip("/").rsplit("/", 1)[1]
    assert stats_uri == f"s3://artifacts/inputs/claim-stats/{digest}/stats.json"
    assert not stats_uri.startswith(input_uri)  # not in FineTune's data channel
    stats = json.loads(local.get(*functions.split_uri(stats_uri))[0])
    assert stats["estimated"] is True and stats["splits"]["train"]["examples"] == 420
    assert stats["manifest_version"] == version
    assert not list(Path(functions.tempfile.gettempdir()).glob("claim-*"))  # /tmp emptied for the next invocation


def test_the_claim_refuses_a_bad_dataset_and_one_over_the_size_limit(tmp_path, local, monkeypatch):  # noqa: F811
    statuses(tmp_path, a="Executing")
    bad = upload(local, {**sample_files(), "train/train.jsonl": b'{"id": "x"}\n'})
    refused = functions.claim_handler(validating_event(bad))
    assert refused["DatasetError"].startswith("3 problem(s) in the dataset:\n  - train/train.jsonl:line 1 id=x")
    assert refused["StatsUri"] == "" and len(refused["DatasetError"]) <= OUTPUT_MAX_CHARS
    monkeypatch.setattr(functions, "size_error", lambda total: size_error(total, limit_mb=0))
    big = upload(local, sample_files(), key="datasets/squad/v2/manifest.json")
    result = functions.claim_handler(validating_event(big, ManifestKey="datasets/squad/v2/manifest.json"))
    assert result["DatasetError"].startswith("error: the dataset is 0 MB, over the 0 MB")


def test_without_validation_the_claim_reads_no_record(tmp_path, local):  # noqa: F811
    statuses(tmp_path, a="Executing")
    version = upload(local, {**sample_files(), "train/train.jsonl": b'{"id": "x"}\n'})
    result = functions.claim_handler(event("a", version))
    assert result["InputUri"] and "DatasetError" not in result and "StatsUri" not in result  # as cpu_job declares
    ignored = functions.claim_handler(validating_event(version, ManifestKey="datasets/not-a-manifest.json"))
    assert (ignored["Ignored"] != "", ignored["DatasetError"], ignored["StatsUri"]) == (True, "", "")


def test_the_claims_refusal_quotes_no_record_text(tmp_path):
    """DatasetError reaches the execution's failure reason and the function's log: like the processing job's lines
    (tests/security/test_log_text.py), it names file, line, id and field, never the record's text."""
    from tests.security.test_log_text import BAD_RECORDS, SECRET

    verdict = claim_verdict(write_dataset(tmp_path / "d", BAD_RECORDS))
    assert verdict.error.startswith(f"{len(verdict.error.splitlines()) - 2} problem(s) in the dataset:")
    assert SECRET not in verdict.error
