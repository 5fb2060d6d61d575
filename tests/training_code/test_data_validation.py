"""Dataset validation: every kind of malformed input is reported with file, location, id, field and fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

import preprocess
import pytest
from qa.data import load_dataset_files, read_manifest

GOOD = {
    "id": "q1",
    "title": "T",
    "context": "Paris is the capital of France.",
    "question": "What is the capital of France?",
    "answers": {"text": ["Paris"], "answer_start": [0]},
}
GOOD_VALIDATION = dict(GOOD, id="v1")


def write_dataset(root: Path, train_lines: list, *, raw_train: bytes | None = None, train_name="train/a.jsonl"):
    """A dataset dir with a manifest, one train file (JSON Lines) and one valid validation file."""
    (root / "train").mkdir(parents=True, exist_ok=True)
    (root / "validation").mkdir(parents=True, exist_ok=True)
    train_path = root / train_name
    if raw_train is not None:
        train_path.write_bytes(raw_train)
    else:
        train_path.write_text("\n".join(json.dumps(line) for line in train_lines) + "\n", encoding="utf-8")
    (root / "validation" / "v.jsonl").write_text(json.dumps(GOOD_VALIDATION) + "\n")
    manifest = [{"prefix": "s3://bucket/datasets/x/v1/"}, train_name, "validation/v.jsonl"]
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def problems_for(root: Path) -> list[str]:
    files, problems = read_manifest(root / "manifest.json", root)
    if not problems:
        problems = load_dataset_files(files, root).problems
    return [str(p) for p in problems]


def with_(**changes):
    record = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        if key.startswith("answers_"):
            record["answers"][key.removeprefix("answers_")] = value
        elif value is ...:
            del record[key]
        else:
            record[key] = value
    return record


MALFORMED_RECORDS = {
    "missing id": (with_(id=...), r"train/a.jsonl:line 1 field=id: missing or not a non-empty string"),
    "numeric id": (with_(id=7), r"id=7 field=id: missing or not a non-empty string"),
    "missing context": (with_(context=...), r"id=q1 field=context: missing \(fix: add 'context'\)"),
    "missing question": (with_(question=...), r"id=q1 field=question: missing"),
    "question not a string": (with_(question=["x"]), r"field=question: must be a string, got list"),
    "empty context": (with_(context="   "), r"field=context: is empty"),
    "empty question": (with_(question=""), r"field=question: is empty"),
    "answers missing": (with_(answers=...), r"field=answers: missing or not an object"),
    "answers not lists": (with_(answers_text="Paris"), r"field=answers: text and answer_start must be lists"),
    "length mismatch": (with_(answers_answer_start=[0, 5]), r"field=answers: 1 texts but 2 answer_start values"),
    "no answers": (with_(answers_text=[], answers_answer_start=[]), r"field=answers: no answer"),
    "empty answer text": (with_(answers_text=[" "]), r"field=answers.text\[0\]: empty or not a string"),
    "answer_start not int": (with_(answers_answer_start=["0"]), r"answers.answer_start\[0\]: must be an integer"),
    "answer_start bool": (with_(answers_answer_start=[True]), r"answers.answer_start\[0\]: must be an integer"),
    "answer_start negative": (with_(answers_answer_start=[-1]), r"-1 puts the answer outside the context"),
    "answer_start past end": (
        with_(answers_answer_start=[40]),
        r"40 puts the answer outside the context \(length 31\)",
    ),
    "answer not at start": (
        with_(answers_answer_start=[1]),
        r"answer_start\[0\]: the context at 1 is not answers.text\[0\] \(5 characters\); it occurs at 0 \(fix: set "
        r"answer_start to the offset",
    ),
    "answer not in context": (
        with_(answers_text=["Lyon"]),
        r"field=answers.text\[0\]: the context at 0 is not answers.text\[0\] \(4 characters\), which occurs nowhere",
    ),
    "id not a string or number": (with_(id={"q": 1}), r"line 1 field=id: missing or not a non-empty string"),
    "record not an object": (["a", "list"], r"line 1: record is not a JSON object"),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED_RECORDS))
def test_malformed_record_is_reported_with_location(tmp_path, kind):
    record, expected = MALFORMED_RECORDS[kind]
    problems = problems_for(write_dataset(tmp_path, [record]))
    assert len(problems) >= 1
    assert any(__import__("re").search(expected, p) for p in problems), problems
    assert all("(fix: " in p for p in problems)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"", r"train/a.jsonl: file is empty"),
        (b'{"id": "q1", "context": \n', r"train/a.jsonl:line 1: invalid JSON"),
        (b"\xff\xfe\x00garbage", r"train/a.jsonl:line 1: not UTF-8"),
    ],
)
def test_unreadable_files(tmp_path, raw, expected):
    problems = problems_for(write_dataset(tmp_path, [], raw_train=raw))
    assert any(__import__("re").search(expected, p) for p in problems), problems


def test_squad_json_without_data_list(tmp_path):
    root = write_dataset(tmp_path, [], raw_train=b'{"version": "1.1"}', train_name="train/a.json")
    assert any("field=data: SQuAD JSON needs a top-level 'data' list" in p for p in problems_for(root))


def test_squad_json_errors_name_the_record_path(tmp_path):
    document = {
        "data": [
            {"title": "T", "paragraphs": [{"context": "abc", "qas": [{"id": "x", "question": "q?", "answers": []}]}]}
        ]
    }
    root = write_dataset(tmp_path, [], raw_train=json.dumps(document).encode(), train_name="train/a.json")
    assert problems_for(root) == [
        "train/a.json:data[0].paragraphs[0].qas[0] id=x field=answers: no answer "
        "(fix: SQuAD v1.1 needs at least one answer per question)"
    ]


def test_duplicate_ids_across_files(tmp_path):
    root = write_dataset(tmp_path, [GOOD, dict(GOOD, id="v1")])
    problems = problems_for(root)
    assert any(
        "validation/v.jsonl:line 1 id=v1 field=id: duplicate id (first seen at train/a.jsonl:line 2)" in p
        for p in problems
    )


def test_manifest_naming_a_missing_file(tmp_path):
    root = write_dataset(tmp_path, [GOOD])
    manifest = [*json.loads((root / "manifest.json").read_text()), "train/missing.jsonl"]
    (root / "manifest.json").write_text(json.dumps(manifest))
    assert problems_for(root) == [
        "manifest.json:entry 3: names train/missing.jsonl, which does not exist (fix: upload it first)"
    ]


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ("not json", "manifest is not valid JSON"),
        ('{"train": "a"}', "manifest must be a hfqa-dataset-manifest/2 object or start with a {'prefix': ...} object"),
        ('[{"prefix": "s3://b/p/"}, "test/a.jsonl"]', "'test/a.jsonl' is not under train/ or validation/"),
    ],
)
def test_invalid_manifests(tmp_path, manifest, expected):
    root = write_dataset(tmp_path, [GOOD])
    (root / "manifest.json").write_text(manifest)
    assert any(expected in p for p in problems_for(root))


def test_all_problems_are_reported_at_once(tmp_path):
    records = [with_(id=...), with_(id="a", context=""), with_(id="b", answers_answer_start=[3]), GOOD]
    problems = problems_for(write_dataset(tmp_path, records))
    lines = {p.split(" ", 2)[1] for p in problems}  # "train/a.jsonl:line N ..." -> "N"
    assert lines == {"1", "2", "3"}  # the fourth, valid record has none


def run_preprocess(root: Path, out: Path, pretrained_dir: Path, *extra: str) -> int:
    return preprocess.main(
        [
            "--manifest",
            str(root / "manifest.json"),
            "--data-dir",
            str(root),
            "--tokenizer-dir",
            str(pretrained_dir),
            "--output-dir",
            str(out),
            *extra,
        ]
    )


def test_preprocess_rejects_invalid_data_with_a_summary(tmp_path, pretrained_dir, capsys):
    root = write_dataset(tmp_path / "d", [GOOD, with_(id="bad", answers_answer_start=[2])])
    assert run_preprocess(root, tmp_path / "out", pretrained_dir) == 1
    err = capsys.readouterr().err
    assert "1 problem(s) in the dataset" in err and "id=bad" in err and "--skip-invalid true" in err
    assert not (tmp_path / "out" / "train").exists()


def test_skip_invalid_drops_and_counts_bad_records(tmp_path, pretrained_dir):
    records = [GOOD, with_(id="bad1", question=""), with_(id="bad2", answers_answer_start=[2]), dict(GOOD, id="q2")]
    root = write_dataset(tmp_path / "d", records)
    assert run_preprocess(root, tmp_path / "out", pretrained_dir, "--skip-invalid", "true") == 0
    stats = json.loads((tmp_path / "out" / "stats" / "stats.json").read_text())
    assert stats["splits"]["train"]["examples"] == 2
    assert stats["splits"]["train"]["invalid_records"] == 2
    assert stats["splits"]["validation"] == {**stats["splits"]["validation"], "examples": 1, "invalid_records": 0}


def test_skip_invalid_does_not_hide_file_level_problems(tmp_path, pretrained_dir):
    root = write_dataset(tmp_path / "d", [], raw_train=b"")
    assert run_preprocess(root, tmp_path / "out", pretrained_dir, "--skip-invalid", "true") == 1


def test_explicit_booleans_only(tmp_path, pretrained_dir):
    root = write_dataset(tmp_path / "d", [GOOD])
    with pytest.raises(SystemExit):
        run_preprocess(root, tmp_path / "out", pretrained_dir, "--skip-invalid", "maybe")


def test_the_manifest_version_is_recorded_in_the_stats(tmp_path, pretrained_dir):
    root = write_dataset(tmp_path / "d", [GOOD])
    assert run_preprocess(root, tmp_path / "ok", pretrained_dir, "--manifest-version", "3HL4kqtJlcpXroDTDmJ") == 0
    stats = json.loads((tmp_path / "ok" / "stats" / "stats.json").read_text())
    assert stats["manifest_version"] == "3HL4kqtJlcpXroDTDmJ"


def test_a_context_over_the_window_bound_is_refused_in_one_line_or_dropped(tmp_path, pretrained_dir, capsys):
    """Issue 29: 160 examples with ~450 KB contexts became 82,464 features (515 windows a question, nearly all without
    the answer) and nothing refused them before FineTune. A record whose context makes more windows than
    --max-windows-per-example (processing.max_windows_per_example) is a record-level problem at its file and line;
    SkipInvalidRecords drops it. The stats say how many examples were windowed, and count every feature."""
    from qa.feature_files import read_features

    long = with_(id="long", context="Paris is the capital of France. " + "It rains there in the autumn. " * 400)
    root = write_dataset(tmp_path / "d", [GOOD, long])
    bound = ("--max-windows-per-example", "4")
    assert run_preprocess(root, tmp_path / "refused", pretrained_dir, *bound) == 1
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if "id=long" in line]
    assert re.fullmatch(
        r"  - train/a\.jsonl:line 2 id=long field=context: makes \d+ windows of 384 tokens \(doc stride 128\), more "
        r"than the 4 allowed \(processing\.max_windows_per_example\) \(fix: split the context into passages.*\)",
        line,
    )
    assert not (tmp_path / "refused" / "train").exists()

    assert run_preprocess(root, tmp_path / "dropped", pretrained_dir, *bound, "--skip-invalid", "true") == 0
    train = json.loads((tmp_path / "dropped" / "stats" / "stats.json").read_text())["splits"]["train"]
    assert (train["examples"], train["invalid_records"], train["windowed_examples"]) == (1, 1, 0)
    assert read_features(tmp_path / "dropped" / "train")["example_id"] == ["q1"]

    assert run_preprocess(root, tmp_path / "kept", pretrained_dir) == 0  # within the default bound
    train = json.loads((tmp_path / "kept" / "stats" / "stats.json").read_text())["splits"]["train"]
    features = read_features(tmp_path / "kept" / "train")["example_id"]
    assert train["windowed_examples"] == 1 and train["features"] == len(features) > 4
    assert sum(train["length_histogram"].values()) == train["features"]  # what the cost step prices
