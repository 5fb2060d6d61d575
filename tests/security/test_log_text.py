"""Issue 30, finding 8: dataset text in unmanaged logs. Before the fix, a rejected record's message quoted its
context and answer text ("context at 3 reads '...', not the answer '...'"), its answer_start value and any non-string
id, and ValidateAndTokenize prints those messages into SageMaker's account-wide /aws/sagemaker/ProcessingJobs group
(not encrypted with the project key, kept forever unless the account sets a retention: README "Where logs go").

Each path a rejected record takes is run here with records whose text holds a marker: the job's entry point
(refusing, and with --skip-invalid logging what it drops), the client's validation (`make upload-dataset
VALIDATE_ONLY=1`), the exception of the columnar conversion, and a local pipeline run (its console, the job's log
file, which is what CloudWatch holds, and the step's failure). The marker appears in none of them; every message
still names the file, line, id and field, and says the fix."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import preprocess
import pytest
from qa.data import MAX_SHOWN_ID_CHARS, entry_records

from config.paths import bundled_model_dir
from tests.conftest import ROOT
from tools.deployment import ToolError
from tools.upload_dataset import validate_dataset

SECRET = "Zanzibar-7f3a-PLANTED"  # stands for text that must stay in the dataset bucket
CONTEXT = f"The vault code is {SECRET}, said the clerk."
GOOD = {
    "id": "good-1",
    "title": "T",
    "context": "Paris is the capital of France.",
    "question": "What is the capital of France?",
    "answers": {"text": ["Paris"], "answer_start": [0]},
}
BAD_RECORDS = [
    # line 2: the answer is in the context, at another offset (the message used to quote both)
    {**GOOD, "id": "misplaced", "context": CONTEXT, "answers": {"text": [SECRET], "answer_start": [3]}},
    # line 3: the answer is nowhere in the context
    {**GOOD, "id": "absent", "answers": {"text": [SECRET], "answer_start": [0]}},
    # line 4: text where the offset belongs (the message used to repeat the value)
    {**GOOD, "id": "text-offset", "answers": {"text": ["Paris"], "answer_start": [SECRET]}},
    # line 5: an id that is an object (the message used to print it)
    {**GOOD, "id": {"note": SECRET}},
    # line 6: text in the id's place (a column mix-up), with an empty question
    {**GOOD, "id": CONTEXT * 3, "question": ""},
]
# Where each message points, and the fix it gives.
EXPECTED = [
    "train/train.jsonl:line 2 id=misplaced field=answers.answer_start[0]: the context at 3 is not answers.text[0] "
    f"({len(SECRET)} characters); it occurs at {CONTEXT.index(SECRET)} (fix: set answer_start to the offset",
    "train/train.jsonl:line 3 id=absent field=answers.text[0]: the context at 0 is not answers.text[0] "
    f"({len(SECRET)} characters), which occurs nowhere in the context (fix: the answer must be a span",
    "train/train.jsonl:line 4 id=text-offset field=answers.answer_start[0]: must be an integer, got str (fix: ",
    "train/train.jsonl:line 5 field=id: missing or not a non-empty string (fix: ",
    f"train/train.jsonl:line 6 id=<{len(CONTEXT) * 3} characters, not shown> field=question: is empty (fix: ",
]


def planted_dataset(root: Path) -> Path:
    """A dataset folder (what `make upload-dataset` reads) and its manifest (what the processing job reads)."""
    for split, records in (("train", [GOOD, *BAD_RECORDS]), ("validation", [dict(GOOD, id="good-v")])):
        (root / split).mkdir(parents=True)
        lines = [json.dumps(record) for record in records]
        (root / split / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = [{"prefix": "s3://bucket/datasets/planted/v1/"}, "train/train.jsonl", "validation/validation.jsonl"]
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def assert_where_not_what(text: str) -> None:
    assert SECRET not in text
    for message in EXPECTED:
        assert message in text, f"{message!r} not in:\n{text}"


def run_job(root: Path, out: Path, *extra: str) -> int:
    """ValidateAndTokenize's entry point, with the arguments the definition gives it."""
    return preprocess.main(
        ["--manifest", str(root / "manifest.json"), "--data-dir", str(root), "--output-dir", str(out), *extra]
    )


def test_the_processing_job_names_rejected_records_without_their_text(tmp_path, capsys, caplog):
    root = planted_dataset(tmp_path / "data")
    assert len(CONTEXT) * 3 > MAX_SHOWN_ID_CHARS
    with caplog.at_level(logging.DEBUG):
        assert run_job(root, tmp_path / "out") == 1
    out, err = capsys.readouterr()
    assert_where_not_what(err)
    assert SECRET not in out + caplog.text
    assert "error: dataset rejected (5 problem(s))" in err


def test_records_dropped_by_skip_invalid_are_logged_without_their_text(tmp_path, capsys, caplog):
    root = planted_dataset(tmp_path / "data")
    tokenizer = ("--tokenizer-dir", str(bundled_model_dir()))
    with caplog.at_level(logging.DEBUG):
        assert run_job(root, tmp_path / "out", *tokenizer, "--skip-invalid", "true") == 0
    out, err = capsys.readouterr()
    assert_where_not_what(caplog.text)
    assert all(SECRET not in record.getMessage() for record in caplog.records)
    assert SECRET not in out + err


def test_the_clients_validation_says_the_same_without_the_text(tmp_path, capsys):
    """`make upload-dataset VALIDATE_ONLY=1` (and the upload itself) validate with the same messages."""
    root = planted_dataset(tmp_path / "data")
    with pytest.raises(ToolError) as raised:
        validate_dataset(root, "planted", "v1")
    out, err = capsys.readouterr()
    assert_where_not_what(err)
    assert SECRET not in out + str(raised.value)


def test_the_conversions_exception_names_the_record_without_its_text(tmp_path):
    root = planted_dataset(tmp_path / "data")
    with pytest.raises(ValueError) as raised:
        list(entry_records(root / "train" / "train.jsonl"))
    assert SECRET not in str(raised.value)
    assert "train.jsonl:line 2 id=misplaced field=answers.answer_start[0]" in str(raised.value)


@pytest.mark.slow
def test_a_local_run_of_an_invalid_dataset_fails_validation_never_trains_and_logs_no_text(dev, tmp_path, capfd, caplog):
    """The run stops at DatasetValid (ClaimManifest validated the records: processing.tokenize_in "fine_tune"): its
    console, the claim function's log and the step's failure name the bad record (file, line, id, field) and quote
    none of its text; no job starts."""
    from tests.local_runner.test_runner import local_run

    dataset = tmp_path / "dataset"
    shutil.copytree(ROOT / "data" / "sample-squad", dataset)
    train = dataset / "train" / "train.jsonl"
    records = [json.loads(line) for line in train.read_text().splitlines()]
    records[5]["context"] = f"{records[5]['context']} {SECRET}"
    records[5]["answers"] = {"text": [SECRET], "answer_start": [0]}
    train.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert local_run(dev, tmp_path / "run", dataset=dataset) == 1
    out, err = capfd.readouterr()
    assert "train/train.jsonl:line 6 id=train-000-5 field=answers.answer_start[0]: the context at 0 is not" in out
    assert "DatasetRejected failed" in out
    assert "> FineTune" not in out
    assert not list((tmp_path / "run").rglob("job.log"))  # no processing or training job ran
    assert "id=train-000-5" in caplog.text  # the claim function's log holds the whole list
    assert SECRET not in out + err + caplog.text
