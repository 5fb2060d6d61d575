"""qa/benchmark.py by task: a benchmark folder is checked as records of the pipeline's task with the label names its
manifest declares, the staged manifest keeps those names, and a benchmark whose task or label names differ from the
dataset's (or a model's) is named in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from qa import benchmark
from tasks import DEFAULT_TASK, TASK_NAMES, task

from config.paths import PROJECT_ROOT


def sample(task_name: str) -> Path:
    return PROJECT_ROOT / "data" / task(task_name).SAMPLE_DATASET


def declared_names(task_name: str) -> tuple[str, ...] | None:
    manifest = json.loads((sample(task_name) / "manifest.json").read_text(encoding="utf-8"))
    names = manifest.get("label_names") if isinstance(manifest, dict) else None
    return None if names is None else tuple(names)


def put_into(root: Path, staged: dict[str, bytes]):
    """A `put` for benchmark.stage writing each object under `root` (as the job's download has it) and into `staged`."""

    def put(key: str, body: bytes) -> str:
        staged[key] = body
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(body)
        return "v1"

    return put


@pytest.mark.parametrize("task_name", TASK_NAMES)
def test_each_task_s_sample_is_a_benchmark_of_its_pipeline_and_keeps_its_label_names(task_name, tmp_path):
    files, declared = benchmark.check_folder(sample(task_name), task_name)
    assert files and all(key.startswith("validation/") for _, key in files)
    assert declared.label_names == declared_names(task_name)
    assert (declared.label_names is not None) == task(task_name).USES_LABEL_NAMES
    staged: dict[str, bytes] = {}
    _, sha256 = benchmark.stage(sample(task_name), "b", "v1", put_into(tmp_path, staged), task_name)
    folder = tmp_path / benchmark.prefix("b", "v1")
    manifest = json.loads(staged[benchmark.manifest_key("b", "v1")])
    assert manifest.get("label_names") == (list(declared.label_names) if declared.label_names else None)
    assert benchmark.verify(folder, sha256)[1] == ""
    assert benchmark.declaration_problem(folder, task_name, declared.label_names) == ""


@pytest.mark.parametrize("task_name", [name for name in TASK_NAMES if name != DEFAULT_TASK])
def test_another_task_s_folder_is_refused_for_the_question_answering_pipeline(task_name):
    with pytest.raises(ValueError) as refused:
        benchmark.check_folder(sample(task_name), DEFAULT_TASK)
    assert str(refused.value) == (
        f"its manifest.json declares task {task_name}: the {DEFAULT_TASK} pipeline's benchmark holds {DEFAULT_TASK} "
        "records (TASK= names the pipeline)"
    )


def test_records_are_validated_as_the_task_s_with_the_declared_label_names(tmp_path):
    folder = tmp_path / "benchmark"
    shutil.copytree(sample("text-classification"), folder)
    with (folder / "validation" / "validation.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "odd", "text": "Where is my refund?", "label": "refunds"}) + "\n")
    with pytest.raises(ValueError) as refused:
        benchmark.check_folder(folder, "text-classification")
    assert "id=odd field=label" in str(refused.value)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    (folder / "manifest.json").write_text(json.dumps({**manifest, "label_names": []}), encoding="utf-8")
    with pytest.raises(ValueError, match="field=label_names"):
        benchmark.check_folder(folder, "text-classification")


def test_a_benchmark_of_other_label_names_or_another_task_is_one_line(tmp_path):
    names = declared_names("text-classification")
    assert names is not None
    benchmark.stage(sample("text-classification"), "b", "v1", put_into(tmp_path, {}), "text-classification")
    folder = tmp_path / benchmark.prefix("b", "v1")
    reordered = (names[1], names[0], *names[2:])
    assert benchmark.declaration_problem(folder, "text-classification", reordered) == (
        f"the benchmark's label names {list(names)} are not {list(reordered)}: the scores would compare other "
        "classes; declare the benchmark's label names in its order"
    )
    assert benchmark.declaration_problem(folder, "token-classification", names) == (
        "the benchmark holds text-classification records, not token-classification ones: pin a token-classification "
        "benchmark"
    )
