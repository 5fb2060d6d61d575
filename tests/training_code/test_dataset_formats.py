"""Datasets as users keep them: Parquet, CSV and `datasets` save_to_disk copies of the bundled sample validate
and preprocess to the same features as its JSON files; anything else gets one line naming the formats; JSON
Lines validation streams with bounded memory."""

from __future__ import annotations

import csv
import json
import tracemalloc
from pathlib import Path

import preprocess
import pytest
from qa.data import (
    ACCEPTED_FORMATS,
    MAX_JSON_FILE_BYTES,
    SPLITS,
    load_dataset_files,
    read_manifest,
    split_entries,
)
from qa.feature_files import read_features
from qa.outputs import MANIFEST_V2_FORMAT

from config.paths import SAMPLE_DATASET
from tests.training_code.conftest import preprocess_sample_args

FORMATS = ("parquet", "csv", "save_to_disk")


@pytest.fixture(scope="module")
def sample_records() -> dict[str, list[dict]]:
    files, problems = read_manifest(SAMPLE_DATASET / "manifest.json", SAMPLE_DATASET)
    assert not problems
    report = load_dataset_files(files, SAMPLE_DATASET)
    assert not report.problems
    return report.records


def write_copy(root: Path, records: dict[str, list[dict]], fmt: str) -> Path:
    """The sample dataset in one format, with its manifest (the entries name files, or folders for save_to_disk)."""
    from datasets import Dataset

    entries = []
    for split in SPLITS:
        (root / split).mkdir(parents=True, exist_ok=True)
        dataset = Dataset.from_list(records[split])
        if fmt == "parquet":
            dataset.to_parquet(str(root / split / "data.parquet"))
            entries.append(f"{split}/data.parquet")
        elif fmt == "csv":
            with (root / split / "data.csv").open("w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(records[split][0]))
                writer.writeheader()
                for record in records[split]:
                    writer.writerow({**record, "answers": json.dumps(record["answers"])})
            entries.append(f"{split}/data.csv")
        else:
            dataset.save_to_disk(str(root / split / "saved"))
            entries.append(f"{split}/saved")
    (root / "manifest.json").write_text(json.dumps([{"prefix": "s3://bucket/datasets/sample/v1/"}, *entries]))
    return root


def validate(root: Path):
    files, problems = read_manifest(root / "manifest.json", root)
    assert not problems, problems
    return load_dataset_files(files, root)


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_loads_the_same_records(tmp_path, sample_records, fmt):
    report = validate(write_copy(tmp_path, sample_records, fmt))
    assert not report.problems
    assert report.records == sample_records


@pytest.mark.parametrize("fmt", FORMATS)
def test_records_in_each_format_are_validated_with_the_same_messages(tmp_path, sample_records, fmt):
    broken = {split: [dict(r) for r in records] for split, records in sample_records.items()}
    first = broken["train"][0]
    first["answers"] = {"text": first["answers"]["text"], "answer_start": [first["answers"]["answer_start"][0] + 1]}
    broken["train"][1]["question"] = ""
    report = validate(write_copy(tmp_path, broken, fmt))
    messages = [str(p) for p in report.problems]
    assert len(messages) == 2 and report.invalid_records["train"] == 2
    assert f"row 1 id={first['id']} field=answers.answer_start[0]: the context at" in messages[0]
    assert "row 2" in messages[1] and "field=question: is empty" in messages[1]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_preprocesses_to_the_features_of_the_json_files(tmp_path, sample_records, sample_features, fmt):
    root = write_copy(tmp_path / "data", sample_records, fmt)
    out = tmp_path / "features"
    args = preprocess_sample_args(out)
    args[args.index("--manifest") + 1] = str(root / "manifest.json")
    args[args.index("--data-dir") + 1] = str(root)
    assert preprocess.main(args) == 0
    for split in SPLITS:
        assert read_features(out / split) == read_features(sample_features / split), split


def test_an_unknown_format_gets_one_line_naming_the_accepted_ones_and_the_conversion(tmp_path, sample_records):
    root = write_copy(tmp_path, sample_records, "parquet")
    (root / "train" / "data.xlsx").write_bytes(b"PK\x03\x04")
    (root / "manifest.json").write_text(
        json.dumps([{"prefix": "s3://b/d/"}, "train/data.xlsx", "validation/data.parquet"])
    )
    [problem] = [str(p) for p in validate(root).problems]
    assert problem.startswith(f"train/data.xlsx: unknown file type '.xlsx': accepted are {ACCEPTED_FORMATS}")
    assert ".to_json('train.jsonl')" in problem


def test_columns_that_are_not_squad_are_named(tmp_path):
    from datasets import Dataset

    for split in SPLITS:
        (tmp_path / split).mkdir()
        Dataset.from_list([{"q": "x", "ctx": "y"}]).to_parquet(str(tmp_path / split / "d.parquet"))
    (tmp_path / "manifest.json").write_text(
        json.dumps([{"prefix": "s3://b/d/"}, "train/d.parquet", "validation/d.parquet"])
    )
    problems = [str(p) for p in validate(tmp_path).problems]
    assert problems[0].startswith("train/d.parquet field=id,context,question,answers: no column id, context")
    assert "(has q, ctx)" in problems[0]


def test_a_save_to_disk_folder_listed_file_by_file_is_read_once_as_the_folder(tmp_path, sample_records):
    """As a manifest that lists every uploaded object names them: the folder's files become the folder."""
    root = write_copy(tmp_path, sample_records, "save_to_disk")
    entries = {split: split_entries(root / split) for split in SPLITS}
    assert entries == {split: [root / split / "saved"] for split in SPLITS}
    listed = [f"{split}/saved/{p.name}" for split in SPLITS for p in sorted((root / split / "saved").iterdir())]
    (root / "manifest.json").write_text(json.dumps([{"prefix": "s3://b/d/"}, *listed]))
    report = validate(root)
    assert not report.problems and report.records == sample_records


def test_save_to_disk_metadata_without_its_state_gets_the_fix(tmp_path, sample_records):
    root = write_copy(tmp_path, sample_records, "save_to_disk")
    (root / "train" / "saved" / "state.json").unlink()
    (root / "manifest.json").write_text(
        json.dumps([{"prefix": "s3://b/d/"}, "train/saved/dataset_info.json", "validation/saved"])
    )
    [problem] = [str(p) for p in validate(root).problems]
    assert "is the metadata of a datasets save_to_disk folder" in problem
    assert "name the folder (saved/) in the manifest" in problem


def test_a_json_file_over_the_limit_is_refused_with_the_limit_named(tmp_path, monkeypatch, sample_records):
    import qa.data

    monkeypatch.setattr(qa.data, "MAX_JSON_FILE_BYTES", 100)
    (tmp_path / "train").mkdir()
    (tmp_path / "validation").mkdir()
    (tmp_path / "train" / "big.json").write_text(json.dumps({"data": []}) + " " * 200)
    (tmp_path / "validation" / "v.jsonl").write_text(json.dumps(sample_records["validation"][0]) + "\n")
    (tmp_path / "manifest.json").write_text(
        json.dumps([{"prefix": "s3://b/d/"}, "train/big.json", "validation/v.jsonl"])
    )
    [problem] = [str(p) for p in validate(tmp_path).problems]
    assert "SQuAD JSON is parsed whole" in problem and "over the 0 MiB limit for one .json file" in problem
    assert "convert it to JSON Lines" in problem
    assert MAX_JSON_FILE_BYTES == 1 << 30  # the limit the README states


def test_json_lines_validation_streams_with_bounded_memory(tmp_path, sample_records):
    """A ~24 MB JSON Lines file validated without keeping records: the peak of Python allocations stays a
    small fraction of the file (one line at a time, plus the ids seen), where reading it whole took ~6x it."""
    (tmp_path / "train").mkdir()
    (tmp_path / "validation").mkdir()
    template = sample_records["train"][0]
    padding = " filler text" * 250  # ~3 KB of context per record
    with (tmp_path / "train" / "big.jsonl").open("w", encoding="utf-8") as handle:
        for i in range(8000):
            record = {**template, "id": f"r{i}", "context": template["context"] + padding}
            handle.write(json.dumps(record) + "\n")
    (tmp_path / "validation" / "v.jsonl").write_text(json.dumps(sample_records["validation"][0]) + "\n")
    (tmp_path / "manifest.json").write_text(
        json.dumps([{"prefix": "s3://b/d/"}, "train/big.jsonl", "validation/v.jsonl"])
    )
    size = (tmp_path / "train" / "big.jsonl").stat().st_size
    files, _ = read_manifest(tmp_path / "manifest.json", tmp_path)
    tracemalloc.start()
    try:
        report = load_dataset_files(files, tmp_path, keep_records=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not report.problems and report.valid_records["train"] == 8000 and not report.records["train"]
    assert size > 20e6 and peak < size / 10, (size, peak)


def test_a_manifest_v2_names_the_files_by_key(tmp_path, sample_records):
    root = write_copy(tmp_path, sample_records, "parquet")
    files = [{"key": f"{split}/data.parquet", "version_id": "v1", "sha256": "0" * 64, "size": 1} for split in SPLITS]
    manifest = {"format": MANIFEST_V2_FORMAT, "dataset": "sample", "version": "v1", "files": files}
    (root / "manifest.json").write_text(json.dumps(manifest))
    listed, problems = read_manifest(root / "manifest.json", root)
    assert not problems and listed == {split: [root / split / "data.parquet"] for split in SPLITS}
    (root / "manifest.json").write_text(json.dumps({**manifest, "files": ["train/data.parquet"]}))
    [problem] = [str(p) for p in read_manifest(root / "manifest.json", root)[1]]
    assert problem.startswith("manifest.json field=files: needs a list of {'key': ...} objects")
