"""The Makefile's tool targets as a user types them: values reach the tools through the environment and are
never evaluated by the shell (the venv and node_modules stamps are taken as up to date: no install runs)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import ROOT

NOT_REMADE = ("-o", ".venv/.installed", "-o", "node_modules/.installed")


def make(*args: str) -> subprocess.CompletedProcess[str]:
    # tests/conftest.py sets CDK_VALIDATION=false for the suite's own synths; a user's shell has none.
    dropped = ("NAME", "VERSION", "DATASET", "MODEL", "ENV", "TASK", "PARAMS", "NO_RUN", "CDK_VALIDATION")
    environment = {k: v for k, v in os.environ.items() if k not in dropped}
    return subprocess.run(
        ["make", "--no-print-directory", *NOT_REMADE, *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("variable", ["NAME", "VERSION", "DATASET", "ENV"])
def test_a_value_with_shell_syntax_is_passed_as_text(tmp_path, variable):
    planted = tmp_path / "pwned"
    values = {"DATASET": "data/sample-squad", "NAME": "sample-squad", "VERSION": "v1", "ENV": "dev"}
    values[variable] = f'x"; touch {planted}; echo "$(touch {planted})`touch {planted}`'
    result = make("upload-dataset", *(f"{k}={v}" for k, v in values.items()), "VALIDATE_ONLY=1")
    assert not planted.exists(), result.stdout + result.stderr
    assert result.returncode != 0
    assert "error: " in result.stderr


def test_make_train_passes_dataset_model_and_params_as_text(tmp_path):
    """DATASET, MODEL and PARAMS reach the local runner as one argument each, never evaluated (PY and CDK are
    stand-ins: echo prints the runner's command line, synth runs `true`)."""
    planted = tmp_path / "pwned"
    trap = f'"; touch {planted}; echo "$(touch {planted})`touch {planted}`'
    values = {"DATASET": f"my data{trap}", "MODEL": f"org/model{trap}", "PARAMS": f"Epochs=3 F1Threshold=60{trap}"}
    result = make("train", "PY=echo", "CDK=true", *(f"{k}={v}" for k, v in values.items()))
    assert not planted.exists(), result.stdout + result.stderr
    assert result.returncode == 0, result.stderr
    [command] = [line for line in result.stdout.splitlines() if line.startswith("-m local_runner ")]
    for option, variable in (("--dataset", "DATASET"), ("--model", "MODEL"), ("--params", "PARAMS")):
        assert f"{option} {values[variable]}" in command
    assert "--assembly cdk.out/dev" in command


def test_make_upload_dataset_passes_params_and_no_run_as_text(tmp_path):
    planted = tmp_path / "pwned"
    params = f'Epochs=3 F1Threshold=60"; touch {planted}; echo "$(touch {planted})'
    result = make("upload-dataset", "PY=echo", "DATASET=d", "NAME=n", f"PARAMS={params}", "NO_RUN=1")
    assert not planted.exists() and result.returncode == 0, result.stdout + result.stderr
    [command] = [line for line in result.stdout.splitlines() if line.startswith("-m tools.upload_dataset ")]
    assert command.endswith(f"--params {params} --no-run")
    without = make("upload-dataset", "PY=echo", "DATASET=d", "NAME=n")
    assert [line for line in without.stdout.splitlines() if line.startswith("-m tools.upload_dataset ")] == [
        "-m tools.upload_dataset --dataset d --name n --env dev --params "
    ]


@pytest.mark.parametrize("target", ["demo", "train"])
def test_a_task_synthesizes_into_its_own_assembly_which_the_runner_checks(target):
    """TASK=<task>: synth with -c task=<task> into cdk.out/<env>-<task> (the QA assembly in cdk.out/<env> stays),
    and the local runner reads that assembly, given TASK only to check it; TASK unset: cdk.out/<env>, no --task."""
    task = "text-classification"
    data = ("DATASET=d", "MODEL=m") if target == "train" else ()
    result = make(target, "ENV=dev", f"TASK={task}", "PY=echo", "CDK=echo", *data)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"synth --quiet -c env=dev -c task={task} --output cdk.out/dev-{task}" in lines
    [runner] = [line for line in lines if line.startswith("-m local_runner ")]
    assert runner.startswith(f"-m local_runner --assembly cdk.out/dev-{task} --task {task} ")
    plain = make(target, "ENV=dev", "PY=echo", "CDK=echo", *data).stdout.splitlines()
    assert "synth --quiet -c env=dev --output cdk.out/dev" in plain
    [plain_runner] = [line for line in plain if line.startswith("-m local_runner ")]
    assert plain_runner.startswith("-m local_runner --assembly cdk.out/dev ") and "--task" not in plain_runner


@pytest.mark.parametrize(
    ("target", "values"),
    [
        ("stage-benchmark", ("BENCHMARK=b", "NAME=n")),
        ("preflight", ()),
        ("runs", ()),
        ("start", ("NAME=n", "VERSION=v1")),
        ("retry", ("EXECUTION=e",)),
        ("stop", ("EXECUTION=e",)),
        ("logs", ("EXECUTION=e",)),
        ("register", ("PACKAGE=arn:aws:sagemaker:us-east-1:1:model-package/g/1", "REASON=r")),
        ("report", ()),
    ],
)
def test_the_aws_tools_act_on_the_pipeline_of_task(target, values):
    """TASK=<task> names which of the environment's pipelines (settings `pipelines`) a tool acts on; unset, the
    environment's own (no --task)."""
    with_task = make(target, "PY=echo", "ENV=dev", "TASK=text-classification", *values)
    assert with_task.returncode == 0, with_task.stderr
    [command] = [line for line in with_task.stdout.splitlines() if line.startswith("-m tools.")]
    assert " --env dev --task text-classification" in command
    plain = make(target, "PY=echo", "ENV=dev", *values).stdout.splitlines()
    assert [line for line in plain if line.startswith("-m tools.") and "--env dev" in line and "--task" not in line]


def test_make_train_without_a_dataset_or_model_prints_its_usage():
    result = make("train", "PY=echo", "CDK=true", "MODEL=m")
    assert result.returncode == 2
    assert "usage: make train DATASET=<dir> MODEL=<model folder or hub id>" in result.stdout


def test_validate_only_through_make(tmp_path):
    result = make("upload-dataset", "DATASET=data/sample-squad", "NAME=sample-squad", "VERSION=v1", "VALIDATE_ONLY=1")
    assert result.returncode == 0, result.stderr
    assert "dataset is valid (--validate-only: nothing uploaded)" in result.stdout


@pytest.mark.parametrize("target", ["synth", "demo"])
def test_every_synth_keeps_cdks_template_validator(target):
    """CDK's built-in CloudFormation validator stays on for every synth a user runs, the demo's too (the
    developer guide asks for it; it costs ~11 s of the demo). CDK and PY are stand-ins that print what they
    would run with."""
    environment = {"CDK": "echo CDK_VALIDATION=$${CDK_VALIDATION:-on} #", "PY": "true"}
    result = make(target, "ENV=dev", *(f"{k}={v}" for k, v in environment.items()))
    assert result.returncode == 0, result.stderr
    assert "CDK_VALIDATION=on" in result.stdout.splitlines()


def test_make_test_runs_two_pytest_workers_unless_told_otherwise():
    """TEST_WORKERS reaches the recipe through the environment with its default (CI runs plain `make test`)."""
    environment = {k: v for k, v in os.environ.items() if k != "TEST_WORKERS"}
    for extra, workers in (((), "2"), (("TEST_WORKERS=0",), "0")):
        result = subprocess.run(
            ["make", "--no-print-directory", *NOT_REMADE, "test", "PY=echo", *extra],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert f"-m pytest -n {workers}" in result.stdout.splitlines()
