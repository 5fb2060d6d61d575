"""make evaluate: the package registered by the session's tiny dev demo (tests/demo_runs.py, no training here)
answers a benchmark through its own inference code, scored as the F1 gate scores. A benchmark every model answers
(each context is its answer: tests/demo_runs.poisoned_dataset) must score 100; the prod demo's staged benchmark is
found, verified against prod's pin and scored question by question. The other tasks' demo packages score their own
validation split through the endpoint as FineTune scored it from the logits (what they recorded)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from qa.data import load_dataset_files
from tasks import task

from config import load_settings
from local_runner.evaluate import EVALUATIONS_DIR, recorded_scores
from local_runner.launch import JOB_PYTHON_ENV
from local_runner.registry import REGISTRY_FILE
from local_runner.store import STORE_DIR
from tests.conftest import ROOT
from tests.demo_runs import OTHER_TASKS, TASK_WORK_DIR, poisoned_dataset
from tests.tools.conftest import assert_one_line_error, run_cli

SAMPLE = ROOT / "data" / "sample-squad"
SAMPLE_VALIDATION = SAMPLE / "validation"


@pytest.fixture(scope="module")
def demo_package(sequence, cdk_context, tmp_path_factory):
    """A copy of the demos' registry and store (the evaluations are written beside them), and the dev package."""
    work_dir = tmp_path_factory.mktemp("evaluate")
    shutil.copy2(sequence.work_dir / REGISTRY_FILE, work_dir / REGISTRY_FILE)
    shutil.copytree(sequence.work_dir / STORE_DIR, work_dir / STORE_DIR)
    [package] = sequence.packages(load_settings({**cdk_context, "env": "dev"}))
    return work_dir, package


def evaluate(work_dir, package, *args: str):
    """`python -m local_runner.evaluate` as a user runs it; its endpoint forks from the session's pre-imported Python
    (tests/warm_python.py: the project's modules, the archive's inference code included, are imported afresh)."""
    warm = {JOB_PYTHON_ENV: os.environ[JOB_PYTHON_ENV]} if JOB_PYTHON_ENV in os.environ else {}
    return run_cli(
        "local_runner.evaluate", "--package", package.arn, "--work-dir", str(work_dir), *args, env=warm, timeout=300
    )


def test_a_benchmark_every_model_answers_scores_100(demo_package, tmp_path):
    work_dir, package = demo_package
    result = evaluate(work_dir, package, "--benchmark", str(poisoned_dataset(tmp_path / "poisoned")))
    assert result.returncode == 0, result.stderr
    assert "(question-answering)" in result.stdout and "16 examples" in result.stdout
    assert "exact_match=100.00 f1=100.00" in result.stdout
    written = json.loads(
        (work_dir / EVALUATIONS_DIR / f"{package.group}-{package.version}" / "evaluation.json").read_text()
    )
    assert (written["examples"], written["f1"], written["package"]) == (16, 100.0, package.arn)
    assert not (work_dir / EVALUATIONS_DIR / f"{package.group}-{package.version}" / "model").exists()


def test_the_staged_benchmark_is_verified_and_scored(demo_package):
    work_dir, package = demo_package
    result = evaluate(work_dir, package, "--env", "prod")
    assert result.returncode == 0, result.stderr
    questions = len(
        load_dataset_files({"validation": sorted(SAMPLE_VALIDATION.iterdir())}, SAMPLE).records["validation"]
    )
    assert "(staged, SHA-256 " in result.stdout and f": {questions} examples" in result.stdout
    assert "recorded at registration: exact_match=" in result.stdout


def test_a_benchmark_that_is_not_staged_is_one_line(demo_package):
    work_dir, package = demo_package
    assert_one_line_error(
        evaluate(work_dir, package, "--env", "dev"), "dev's question-answering pipeline pins no benchmark", "BENCHMARK="
    )


def test_an_unknown_package_is_one_line(tmp_path):
    arn = "arn:aws:sagemaker:local:000000000000:model-package/g/9"
    result = run_cli("local_runner.evaluate", "--package", arn, "--work-dir", str(tmp_path), env={})
    assert_one_line_error(result, f"no local model package {arn}")


@pytest.fixture(scope="module")
def task_packages(sequence, cdk_context, tmp_path_factory):
    """A copy of the other tasks' demo registry and store, and each task's dev package."""
    work_dir = tmp_path_factory.mktemp("evaluate-tasks")
    source = sequence.work_dir.parent / TASK_WORK_DIR
    shutil.copy2(source / REGISTRY_FILE, work_dir / REGISTRY_FILE)
    shutil.copytree(source / STORE_DIR, work_dir / STORE_DIR)
    packages = {}
    for name in OTHER_TASKS:
        [packages[name]] = sequence.packages(load_settings({**cdk_context, "env": "dev", "task": name}))
    return work_dir, packages


@pytest.mark.parametrize("task_name", OTHER_TASKS)
def test_each_task_s_package_scores_its_validation_split_as_it_recorded(task_packages, task_name, tmp_path):
    work_dir, packages = task_packages
    package, facts = packages[task_name], task(task_name)
    result = evaluate(work_dir, package, "--benchmark", str(ROOT / "data" / facts.SAMPLE_DATASET))
    assert result.returncode == 0, result.stderr
    assert f"({task_name})" in result.stdout
    written = json.loads(
        (work_dir / EVALUATIONS_DIR / f"{package.group}-{package.version}" / "evaluation.json").read_text()
    )
    assert written["task"] == task_name and list(written)[-len(facts.METRICS) :] == list(facts.METRICS)
    recorded = recorded_scores(package)
    assert {name: written[name] for name in facts.METRICS} == pytest.approx(
        {name: recorded[name] for name in facts.METRICS}, abs=1e-3
    )


def test_a_benchmark_of_other_label_names_than_the_model_s_is_one_line(task_packages, tmp_path):
    work_dir, packages = task_packages
    folder = tmp_path / "reordered"
    shutil.copytree(ROOT / "data" / task("text-classification").SAMPLE_DATASET, folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    names = manifest["label_names"]
    manifest["label_names"] = [names[1], names[0], *names[2:]]
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    result = evaluate(work_dir, packages["text-classification"], "--benchmark", str(folder))
    assert_one_line_error(result, f"declares the label names {manifest['label_names']}, the model {names}")
