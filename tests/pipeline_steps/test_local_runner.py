"""The local runner executes the synthesized pipeline (the template's definition) end to end on CPU."""

from __future__ import annotations

import copy
import json
import re
import shutil

import pytest

from pipeline_steps.local.__main__ import main as run_local
from pipeline_steps.local.errors import UnsupportedDefinition
from pipeline_steps.local.registry import LocalModelRegistry
from pipeline_steps.local.runner import LocalPipelineRunner, execution_order
from pipeline_steps.local.store import LocalObjectStore
from pipeline_steps.walk import find_step
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
SAMPLE = ROOT / "data" / "sample-squad"


def local_run(dev, tmp_path, *extra: str, dataset=SAMPLE) -> int:
    return run_local(
        [
            "--assembly",
            str(dev.assembly),
            "--stack",
            dev.stacks.pipeline.stack_name,
            "--work-dir",
            str(tmp_path),
            "--dataset",
            str(dataset),
            "--tiny",
            "--param",
            "Epochs=1",
            *extra,
        ]
    )


def packages(tmp_path, dev):
    return LocalModelRegistry(tmp_path / "model-registry.sqlite").packages(dev.settings.model_package_group_name)


def test_tiny_run_passes_every_step_and_registers_with_metrics(dev, tmp_path, capsys):
    assert local_run(dev, tmp_path, "--param", "F1Threshold=0") == 0
    out = capsys.readouterr().out
    assert "trigger rule matched the Object Created event" in out
    for name in ("ValidateAndTokenize", "CheckTrainingCost", "FineTune", "Evaluate", "CheckF1", "RegisterModel"):
        assert f"> {name}" in out
    # The cost guard let it through: the estimate (a few cents) is within the default MaxTrainingCostUSD.
    [guard] = re.findall(r"    ([0-9.e+-]+) LessThanOrEqualTo 1000.0: True", out)
    assert 0 < float(guard) < 1
    assert "running 2 CPU process(es) with torchrun" in out
    [package] = packages(tmp_path, dev)
    assert package.approval_status == "PendingManualApproval"
    assert set(package.metrics["metrics"]) == {"f1", "exact_match"}
    assert package.model_data.endswith("/output/model.tar.gz")
    assert (tmp_path / "s3" / package.model_data.removeprefix("s3://")).is_file()
    assert "execution local-" in out and ": Succeeded" in out


def test_threshold_above_achievable_f1_ends_in_the_fail_step(dev, tmp_path, capsys):
    assert local_run(dev, tmp_path, "--param", "F1Threshold=99.5") == 1
    out = capsys.readouterr().out
    assert "-> ElseSteps" in out
    assert "is below the threshold 99.5 - model not registered." in out
    assert "registered: nothing" in out
    assert packages(tmp_path, dev) == []


def test_estimate_above_max_training_cost_stops_before_training(dev, tmp_path, capsys):
    assert local_run(dev, tmp_path, "--param", "MaxTrainingCostUSD=0") == 1
    out = capsys.readouterr().out
    assert "-> ElseSteps" in out
    assert "> FineTune" not in out
    assert re.search(
        r"Estimated training cost USD [0-9.e+-]+ \(on-demand list price\) exceeds MaxTrainingCostUSD 0.0", out
    )
    assert packages(tmp_path, dev) == []


def test_invalid_dataset_fails_validation_and_never_trains(dev, tmp_path, capfd):
    dataset = tmp_path / "dataset"
    shutil.copytree(SAMPLE, dataset)
    train = dataset / "train" / "train.jsonl"
    records = [json.loads(line) for line in train.read_text().splitlines()]
    records[5]["answers"]["answer_start"] = [999]
    train.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert local_run(dev, tmp_path / "run", dataset=dataset) == 1
    out, err = capfd.readouterr()
    assert "train/train.jsonl:line 6 id=train-000-5 field=answers.answer_start[0]" in err
    assert "ValidateAndTokenize failed" in out
    assert "> FineTune" not in out


def test_interrupted_training_resumes_from_its_checkpoint(dev, tmp_path, capsys):
    assert local_run(dev, tmp_path, "--param", "F1Threshold=0", "--interrupt-training-after-steps", "10") == 0
    out = capsys.readouterr().out
    assert "simulating a spot interruption: SIGTERM at step 10" in out
    assert "spot interruption (SIGTERM after step 10)" in out
    assert "restored" in out and "checkpoint file(s)" in out
    # The stop flag is checked after every step: the checkpoint is the step SIGTERM arrived in, >= 10.
    resumed = re.search(r"resumed from step-(\d{8}): step (\d+)", out)
    assert resumed and int(resumed.group(1)) == int(resumed.group(2)) >= 10
    assert "resumed after a spot interruption, attempt 2" in out
    assert len(packages(tmp_path, dev)) == 1


def runner_for(definition, tmp_path):
    store = LocalObjectStore(tmp_path / "s3")
    registry = LocalModelRegistry(tmp_path / "registry.sqlite")
    return LocalPipelineRunner(definition, "p", store, registry, tmp_path)


def test_unknown_step_type_field_and_expression_are_rejected_by_name(dev, tmp_path):
    definition = json.loads(
        dev.templates["pipeline"]["Resources"]["Pipeline"]["Properties"]["PipelineDefinition"][
            "PipelineDefinitionBody"
        ]["Fn::Sub"][0]
    )
    bad = copy.deepcopy(definition)
    bad["Steps"].append({"Name": "Transform", "Type": "Transform", "Arguments": {}})
    bad["Steps"][0]["Arguments"]["Environment"]["X"] = {"Std:Concat": ["a", "b"]}
    find_step(bad, "FineTune")["Tags"] = []
    with pytest.raises(UnsupportedDefinition) as excinfo:
        runner_for(bad, tmp_path)
    message = str(excinfo.value)
    assert "step 'Transform': type 'Transform' is not supported" in message
    assert "expression 'Std:Concat' is not supported" in message
    assert "step 'FineTune': fields ['Tags'] are not supported" in message
    runner_for(definition, tmp_path)  # the real definition is accepted


def test_steps_run_in_dependency_order(dev):
    body = dev.templates["pipeline"]["Resources"]["Pipeline"]["Properties"]["PipelineDefinition"]
    definition = json.loads(body["PipelineDefinitionBody"]["Fn::Sub"][0])
    assert [s["Name"] for s in execution_order(list(reversed(definition["Steps"])))] == [
        "ValidateAndTokenize",
        "CheckTrainingCost",
    ]
    branch = find_step(definition, "CheckTrainingCost")["Arguments"]["IfSteps"]
    assert [s["Name"] for s in execution_order(list(reversed(branch)))] == ["FineTune", "Evaluate", "CheckF1"]
