"""The upload's manifest v2 carries the task and label names its dataset folder declares: from the folder's own
manifest.json object, or a save_to_disk folder's ClassLabel features; a folder without them, neither field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from qa.declared_task import DeclaredTask, declared_task
from qa.outputs import DATASET_MANIFEST_FILE
from tasks import TASK_NAMES, task

from config.layout import DatasetLayout
from local_runner.store import LocalObjectStore
from local_runner.trigger import upload_dataset
from tests.conftest import ROOT
from tests.tools.conftest import assert_one_line_error, run_cli
from tools.deployment import ToolError
from tools.upload_dataset import UploadPlan, dataset_declaration, upload, validate_dataset

SAMPLE = ROOT / "data" / "sample-squad"
LABELS = ("negative", "positive")
TEXT = "text-classification"


def with_own_manifest(tmp_path: Path, **declared: object) -> Path:
    """A copy of the sample whose own manifest.json is a v2-style object listing its files, plus `declared`."""
    dataset = tmp_path / "d"
    shutil.copytree(SAMPLE, dataset)
    files = [{"key": "train/train.jsonl"}, {"key": "validation/validation.json"}]
    (dataset / DATASET_MANIFEST_FILE).write_text(json.dumps({"files": files, **declared}))
    return dataset


def saved_to_disk(tmp_path: Path, rows: dict[str, list], features: dict[str, Any]) -> Path:
    """A DatasetDict.save_to_disk folder (train/, validation/) of `rows` with these datasets features."""
    from datasets import Dataset, DatasetDict, Features

    dataset = Dataset.from_dict(rows, features=Features(features))
    folder = tmp_path / "saved"
    DatasetDict({"train": dataset, "validation": dataset}).save_to_disk(str(folder))
    return folder


def test_the_folder_s_own_manifest_declares_the_task_and_label_names(tmp_path):
    dataset = with_own_manifest(tmp_path, task=TASK_NAMES[1], label_names=list(LABELS))
    assert declared_task(dataset) == DeclaredTask(TASK_NAMES[1], LABELS)


def test_a_folder_that_declares_nothing_is_the_pipeline_s_task_without_names(tmp_path):
    assert declared_task(SAMPLE) == DeclaredTask()  # its manifest.json is a ManifestFile list
    assert declared_task(with_own_manifest(tmp_path)) == DeclaredTask()


def test_class_label_features_of_a_saved_dataset_are_its_label_names(tmp_path):
    from datasets import ClassLabel, Sequence, Value

    rows: dict[str, list] = {"text": ["good", "bad"], "label": [1, 0]}
    features: dict[str, Any] = {"text": Value("string"), "label": ClassLabel(names=list(LABELS))}
    assert declared_task(saved_to_disk(tmp_path / "column", rows, features)) == DeclaredTask(None, LABELS)
    tags = ("O", "B-PER", "I-PER")
    rows = {"tokens": [["Ines", "Marrow"]], "ner_tags": [[1, 2]]}
    features = {"tokens": Sequence(Value("string")), "ner_tags": Sequence(ClassLabel(names=list(tags)))}
    assert declared_task(saved_to_disk(tmp_path / "tags", rows, features)) == DeclaredTask(None, tags)


def test_several_different_class_labels_are_refused_unless_the_manifest_names_them(tmp_path):
    from datasets import ClassLabel, Sequence

    rows = {"pos_tags": [[0, 1]], "ner_tags": [[0, 1]]}
    features = {
        "pos_tags": Sequence(ClassLabel(names=["NN", "VB"])),
        "ner_tags": Sequence(ClassLabel(names=["O", "B-LOC"])),
    }
    folder = saved_to_disk(tmp_path, rows, features)
    with pytest.raises(ValueError, match=r"2 different ClassLabel features") as refused:
        declared_task(folder)
    assert "column pos_tags" in str(refused.value) and "column ner_tags" in str(refused.value)
    (folder / DATASET_MANIFEST_FILE).write_text(json.dumps({"files": [], "label_names": ["O", "B-LOC"]}))
    assert declared_task(folder) == DeclaredTask(None, ("O", "B-LOC"))


@pytest.mark.parametrize("label_names", [["a", 1], "a b", {"a": 0}])
def test_label_names_that_are_not_a_list_of_strings_are_refused_in_one_line(tmp_path, label_names):
    dataset = with_own_manifest(tmp_path, label_names=label_names)
    with pytest.raises(ToolError, match="label_names must be a list of strings") as refused:
        dataset_declaration(dataset)
    assert "\n" not in str(refused.value)


def test_an_unknown_task_name_is_refused_in_one_line_with_the_closest_name(tmp_path):
    dataset = with_own_manifest(tmp_path, task=TASK_NAMES[1][:-1])
    result = run_cli("tools.upload_dataset", "--dataset", str(dataset), "--name", "x", "--validate-only", env={})
    assert_one_line_error(result, f"did you mean {TASK_NAMES[1]}?", "nothing uploaded")


def test_the_uploaded_manifest_carries_the_declaration(deployed, tmp_path):
    dataset = with_own_manifest(tmp_path, task=TASK_NAMES[1], label_names=list(LABELS))
    files = [(dataset / key, key) for key in ("train/train.jsonl", "validation/validation.json")]
    s3 = deployed.client("s3")
    for name, declared in (("declared", dataset_declaration(dataset)), ("plain", DeclaredTask())):
        upload(UploadPlan(deployed.datasets_bucket, name, "v1", files, declared=declared), s3)
        key = f"datasets/{name}/v1/{DATASET_MANIFEST_FILE}"
        manifest = json.loads(s3.get_object(Bucket=deployed.datasets_bucket, Key=key)["Body"].read())
        if declared.task is None:
            assert "task" not in manifest and "label_names" not in manifest
        else:
            assert (manifest["task"], manifest["label_names"]) == (TASK_NAMES[1], list(LABELS))


def test_the_local_runner_s_upload_carries_the_declaration(tmp_path):
    dataset = with_own_manifest(tmp_path, task=TASK_NAMES[2], label_names=["O", "B-PER"])
    store = LocalObjectStore(tmp_path / "s3")
    key, _ = upload_dataset(store, dataset, "datasets", "d", "v1")
    manifest = json.loads(store.path(f"s3://datasets/{key}").read_text())
    assert (manifest["task"], manifest["label_names"]) == (TASK_NAMES[2], ["O", "B-PER"])


def test_an_upload_for_a_task_the_environment_does_not_deploy_is_refused_before_anything_is_uploaded(
    deployed, deployed_env
):
    """dev deploys question answering only: the bundled text-classification sample (its manifest declares the task)
    is valid, then refused in one line naming the setting to add, with nothing in the datasets bucket."""
    dataset = ROOT / "data" / task(TEXT).SAMPLE_DATASET
    result = run_cli("tools.upload_dataset", "--dataset", str(dataset), "--name", "tickets", env=deployed_env)
    assert_one_line_error(result, f"environment dev has no pipeline of task {TEXT}", "environments.dev.pipelines")
    assert deployed.client("s3").list_objects_v2(Bucket=deployed.datasets_bucket).get("KeyCount") == 0


def test_an_upload_for_another_pipeline_lands_under_its_dataset_root(deployed, tmp_path):
    """The plan of an upload for the text-classification pipeline (`pipelines`) writes its files and manifest under
    that pipeline's root, which only its trigger matches (tests/stacks/test_several_pipelines.py). moto models no
    EventBridge delivery to SageMaker: which pipeline starts is asserted on the rule's pattern there."""
    dataset = ROOT / "data" / task(TEXT).SAMPLE_DATASET
    datasets = DatasetLayout.of_task(task(TEXT))
    files = validate_dataset(dataset, "tickets", "v1", dataset_declaration(dataset), datasets)
    plan = UploadPlan(
        deployed.datasets_bucket, "tickets", "v1", files, declared=dataset_declaration(dataset), datasets=datasets
    )
    upload(plan, deployed.client("s3"))
    listed = deployed.client("s3").list_objects_v2(Bucket=deployed.datasets_bucket)["Contents"]
    assert sorted(o["Key"] for o in listed) == [
        f"datasets-{TEXT}/tickets/v1/{key}" for key in (DATASET_MANIFEST_FILE, *sorted(k for _, k in files))
    ]
