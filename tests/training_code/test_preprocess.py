"""ValidateAndTokenize on its CPU image: tokenization without `datasets`, numpy feature files without pickle, and
the whole path (preprocess, train, evaluate) run where importing `datasets` or `pyarrow` fails."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import numpy as np
import preprocess
import pytest
from qa.data import SPLITS, load_dataset_files, read_manifest
from qa.feature_files import (
    EXAMPLE_IDS_FILE,
    FEATURES_FILE,
    NO_OFFSET,
    PER_FEATURE_COLUMNS,
    read_features,
    write_features,
)
from qa.features import prepare_train_features, prepare_validation_features
from qa.outputs import EVALUATION_FILE
from qa.task_file import TaskFile, read_task_file
from tasks import task as task_module

from config.paths import SAMPLE_DATASET, TRAINING_CODE, bundled_model_dir
from tests.training_code.conftest import preprocess_sample_args
from tests.training_code.runner import run_training
from tests.training_code.test_dataset_formats import write_copy

PROCESSING_IMAGE = Path(__file__).with_name("processing_image")  # its sitecustomize hides datasets and pyarrow


@pytest.fixture(scope="module")
def sample_records() -> dict[str, list[dict]]:
    files, problems = read_manifest(SAMPLE_DATASET / "manifest.json", SAMPLE_DATASET)
    assert not problems
    return load_dataset_files(files, SAMPLE_DATASET).records


def tokenize_args(num_workers: int = 1) -> Namespace:
    return Namespace(task="question-answering", max_seq_length=48, doc_stride=16, num_workers=num_workers)


def datasets_map_features(split: str, records: list[dict], tokenizer, args: Namespace) -> dict[str, list]:
    """The features as preprocess.py built them before: `datasets.Dataset.map` of the same preparation."""
    from datasets import Dataset

    prepare = prepare_train_features if split == "train" else prepare_validation_features
    dataset = Dataset.from_list(records)
    mapped = dataset.map(
        prepare,
        batched=True,
        batch_size=1000,
        remove_columns=dataset.column_names,
        fn_kwargs={"tokenizer": tokenizer, "max_seq_length": args.max_seq_length, "doc_stride": args.doc_stride},
    )
    return mapped.to_dict()


def test_the_pool_ends_when_the_parent_handles_sigterm(sample_records, tokenizer, monkeypatch):
    """train.py tokenizes with the pool in a process that may hold the spot-interruption SIGTERM handler; the pool's
    workers must still end on its terminate() (before the fix they inherited the handler and the parent waited on
    them forever, as a test worker of the suite once did)."""
    import signal
    import threading

    monkeypatch.setattr(preprocess, "RECORDS_PER_WORKER", 100)
    monkeypatch.setattr(preprocess, "TOKENIZE_BATCH", 50)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        done: list[dict] = []
        args = tokenize_args(num_workers=2)
        worker = threading.Thread(
            target=lambda: done.append(preprocess.tokenize_split("train", sample_records["train"], tokenizer, args)),
            daemon=True,
        )
        worker.start()
        worker.join(timeout=120)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert done, "the pool did not end: a worker kept the parent's SIGTERM handler"


@pytest.mark.parametrize("split", SPLITS)
def test_tokenization_gives_the_features_of_the_datasets_map_path(sample_records, tokenizer, split):
    args = tokenize_args()  # 48 tokens, stride 16: the contexts overflow into several windows
    features = preprocess.tokenize_split(split, sample_records[split], tokenizer, args)
    reference = datasets_map_features(split, sample_records[split], tokenizer, args)
    assert len(features["input_ids"]) > len(sample_records[split])  # windows were cut
    assert features == reference


def test_a_pool_of_tokenizer_processes_gives_the_same_features_in_order(sample_records, tokenizer, monkeypatch):
    records = sample_records["train"]
    alone = preprocess.tokenize_split("train", records, tokenizer, tokenize_args())
    monkeypatch.setattr(preprocess, "RECORDS_PER_WORKER", 100)
    monkeypatch.setattr(preprocess, "TOKENIZE_BATCH", 50)
    assert preprocess._workers(2, len(records)) == 2
    pooled = preprocess.tokenize_split("train", records, tokenizer, tokenize_args(num_workers=2))
    assert pooled == alone


@pytest.mark.parametrize("split", SPLITS)
def test_feature_files_hold_plain_arrays_and_read_back_as_written(tmp_path, sample_records, tokenizer, split):
    features = preprocess.tokenize_split(split, sample_records[split], tokenizer, tokenize_args())
    write_features(tmp_path, features)
    assert read_features(tmp_path) == features
    with np.load(tmp_path / FEATURES_FILE, allow_pickle=False) as stored:
        # No object arrays: integers, and the names of the per-feature columns as a fixed-width string array.
        assert all(stored[name].dtype.kind in "iu" for name in stored.files if name != PER_FEATURE_COLUMNS)
        assert stored[PER_FEATURE_COLUMNS].dtype.kind == "U"
        if split == "validation":
            assert (stored["offset_mapping"] == NO_OFFSET).any()  # None offsets stored as -1
    assert json.loads((tmp_path / EXAMPLE_IDS_FILE).read_text()) == features["example_id"]
    assert read_features(tmp_path, ("input_ids",)) == {"input_ids": features["input_ids"]}


def on_processing_image(*args: str, cwd: Path = TRAINING_CODE) -> subprocess.CompletedProcess:
    """Run Python as the processing job runs it: the script's folder, no datasets, no pyarrow."""
    env = {**os.environ, "PYTHONPATH": str(PROCESSING_IMAGE), "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("module", ["datasets", "pyarrow", "pyarrow.parquet"])
def test_the_simulated_image_has_no_datasets_and_no_pyarrow(module):
    package = module.split(".")[0]
    run = on_processing_image(
        "-c", f"import importlib.util as u; assert u.find_spec({package!r}) is None; import {module}"
    )
    assert run.returncode == 1 and f"ModuleNotFoundError: No module named {package!r}" in run.stderr, run.stderr


@pytest.mark.slow
def test_preprocess_train_and_evaluate_run_without_datasets_and_pyarrow(tmp_path, tiny_model_dir, sample_features):
    out = tmp_path / "features"
    run = on_processing_image("preprocess.py", *preprocess_sample_args(out))
    assert run.returncode == 0, run.stderr[-3000:]
    for split in SPLITS:
        assert read_features(out / split) == read_features(sample_features / split), split

    hps = {"max_steps": 2, "per_device_train_batch_size": 4, "logging_steps": 1, "eval_batch_size": 16}
    shim = {"PYTHONPATH": str(PROCESSING_IMAGE)}  # the training image needs neither for these files
    trained = run_training(tiny_model_dir, out, tmp_path / "job", hps, extra_env=shim)
    assert trained.returncode == 0, trained.output[-3000:]
    [line] = trained.lines("evaluation: ")
    report = json.loads((tmp_path / "job" / "model" / EVALUATION_FILE).read_text())
    assert report["examples"] == 84 and line.startswith("evaluation: exact_match=")


def test_a_csv_dataset_preprocesses_on_the_image_to_the_features_of_the_json_files(
    tmp_path, sample_records, sample_features
):
    """CSV is read with the standard library's csv module: no pyarrow needed."""
    data = write_copy(tmp_path / "data", sample_records, "csv")
    args = preprocess_sample_args(tmp_path / "out")
    args[args.index("--manifest") + 1] = str(data / "manifest.json")
    args[args.index("--data-dir") + 1] = str(data)
    run = on_processing_image("preprocess.py", *args)
    assert run.returncode == 0, run.stderr[-3000:]
    for split in SPLITS:
        assert read_features(tmp_path / "out" / split) == read_features(sample_features / split), split


def test_a_parquet_input_on_the_image_fails_with_one_line_naming_the_conversion(tmp_path):
    data = tmp_path / "data"
    for split in SPLITS:
        (data / split).mkdir(parents=True)
        (data / split / "data.parquet").write_bytes(b"PAR1")  # never opened: refused by its suffix
    manifest = [{"prefix": "s3://bucket/datasets/x/v1/"}, "train/data.parquet", "validation/data.parquet"]
    (data / "manifest.json").write_text(json.dumps(manifest))
    args = preprocess_sample_args(tmp_path / "out")
    args[args.index("--manifest") + 1] = str(data / "manifest.json")
    args[args.index("--data-dir") + 1] = str(data)
    run = on_processing_image("preprocess.py", *args)
    assert run.returncode == 1
    [line] = run.stderr.strip().splitlines()
    assert line.startswith(f"error: {data / 'train' / 'data.parquet'} is Parquet/Arrow data"), line
    assert "python -m tools.upload_dataset" in line and "JSON Lines" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("task_name", ["text-classification", "token-classification"])
def test_a_classification_dataset_is_tokenized_with_its_tasks_features_and_label_names(tmp_path, task_name, capsys):
    """The pinned folder's task file (ClaimManifest writes it) names the task and label names; preprocess.py writes
    the task's features and the task file beside each split (what FineTune builds its head from); a task file of
    another task than --task is refused in one line."""
    task = task_module(task_name)
    folder = shutil.copytree(SAMPLE_DATASET.parent / task.SAMPLE_DATASET, tmp_path / "pinned")
    label_names = tuple(json.loads((folder / "manifest.json").read_text())["label_names"])
    TaskFile(task_name, label_names).write(folder)
    out = tmp_path / "out"
    argv = ["--task", task_name, "--manifest", str(folder / "manifest.json"), "--data-dir", str(folder)]
    argv += ["--tokenizer-dir", str(bundled_model_dir()), "--output-dir", str(out)]
    assert preprocess.main(argv) == 0
    for split in ("train", "validation"):
        assert read_task_file(out / split, "question-answering") == TaskFile(task_name, label_names)
        columns = read_features(out / split)
        lengths = [len(ids) for ids in columns["input_ids"]]
        assert len(lengths) == sum(1 for line in (folder / split / f"{split}.jsonl").open() if line.strip())
    train = read_features(out / "train")
    if task_name == "token-classification":  # a label per token, -100 off the first sub-tokens
        assert [len(labels) for labels in train["labels"]] == [len(ids) for ids in train["input_ids"]]
        assert all(labels[0] == -100 for labels in train["labels"])  # [CLS]
    else:  # a label index per record
        assert set(train["labels"]) <= set(range(len(label_names)))
    TaskFile("token-classification" if task_name == "text-classification" else "text-classification").write(folder)
    assert preprocess.main([*argv[:-1], str(tmp_path / "refused")]) == 1
    assert f"this job's --task is {task_name}" in capsys.readouterr().err


def test_a_benchmark_of_other_label_names_than_the_dataset_s_is_refused(tmp_path, capsys):
    """The benchmark's labels are read with the dataset's names (the model's head): a staged benchmark that declares
    them in another order is refused in one line before anything is tokenized (the claim refuses such an upload
    first); the same benchmark with the dataset's order is tokenized."""
    from qa import benchmark

    task = task_module("text-classification")
    folder = shutil.copytree(SAMPLE_DATASET.parent / task.SAMPLE_DATASET, tmp_path / "pinned")
    manifest = json.loads((folder / "manifest.json").read_text())
    names = tuple(manifest["label_names"])
    TaskFile(task.NAME, names).write(folder)

    def staged(label_names: list[str], root: Path) -> tuple[Path, str]:
        source = shutil.copytree(folder, root / "source")
        (source / "manifest.json").write_text(json.dumps({**manifest, "label_names": label_names}))
        # Labels by name: the same records whichever order the names are declared in.
        records = map(json.loads, (folder / "validation" / "validation.jsonl").read_text().splitlines())
        lines = [json.dumps({**record, "label": names[record["label"]]}) + "\n" for record in records]
        (source / "validation" / "validation.jsonl").write_text("".join(lines))

        def put(key: str, body: bytes) -> str:
            (root / key).parent.mkdir(parents=True, exist_ok=True)
            (root / key).write_bytes(body)
            return "v1"

        _, sha256 = benchmark.stage(source, "b", "v1", put, task.NAME)
        return root / benchmark.prefix("b", "v1"), sha256

    argv = ["--task", task.NAME, "--manifest", str(folder / "manifest.json"), "--data-dir", str(folder)]
    argv += ["--tokenizer-dir", str(bundled_model_dir())]
    reordered, sha256 = staged([names[1], names[0], *names[2:]], tmp_path / "reordered")
    bench = ["--benchmark-dir", str(reordered), "--benchmark-sha256", sha256]
    assert preprocess.main([*argv, "--output-dir", str(tmp_path / "refused"), *bench]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()[-1:]
    assert line.startswith("error: the benchmark's label names [") and "would compare other classes" in line
    same, sha256 = staged(list(names), tmp_path / "same")
    bench = ["--benchmark-dir", str(same), "--benchmark-sha256", sha256]
    assert preprocess.main([*argv, "--output-dir", str(tmp_path / "out"), *bench]) == 0
