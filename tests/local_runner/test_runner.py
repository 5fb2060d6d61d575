"""The local runner executes the synthesized pipeline (the template's definition) end to end on CPU."""

from __future__ import annotations

import copy
import json
import re
import shutil
import tarfile

import pytest

from local_runner.__main__ import main as run_local
from local_runner.assembly import synthesized_definition
from local_runner.errors import InvocationFailed, UnsupportedDefinition
from local_runner.registry import LocalModelRegistry
from local_runner.runner import LocalPipelineRunner, execution_order
from local_runner.serving import invoke
from local_runner.store import LocalObjectStore
from pipeline_steps.walk import all_steps, find_step
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


def test_tiny_run_passes_every_step_registers_with_metrics_and_ignores_a_duplicate_event(dev, tmp_path, capsys):
    assert local_run(dev, tmp_path, "--param", "F1Threshold=0", "--deliver-event-twice") == 0
    out = capsys.readouterr().out
    assert "trigger rule matched the Object Created event" in out
    first, duplicate = out.split("the same Object Created event is delivered again")
    for name in (
        "ClaimManifest",
        "ValidateAndTokenize",
        "CheckTrainingCost",
        "FineTune",
        "Evaluate",
        "CheckF1",
        "RegisterModel",
    ):
        assert f"> {name}" in first
    # The cost guard let it through: the estimate (a few cents) is within the default MaxTrainingCostUSD.
    [guard] = re.findall(r"    ([0-9.e+-]+) LessThanOrEqualTo 1000.0: True", first)
    assert 0 < float(guard) < 1
    # The second delivery claims nothing: no preprocessing, no training, no second model, no failure.
    assert "> ClaimManifest" in duplicate and "ok FirstDelivery: false -> ElseSteps" in duplicate
    assert "> FineTune" not in duplicate and "> ValidateAndTokenize" not in duplicate
    assert ": Succeeded" in duplicate
    assert "running 2 CPU process(es) with torchrun" in out
    [package] = packages(tmp_path, dev)
    assert package.approval_status == "PendingManualApproval"
    assert set(package.metrics["metrics"]) == {"f1", "exact_match"}
    assert package.model_data.endswith("/output/model.tar.gz")
    assert (tmp_path / "s3" / package.model_data.removeprefix("s3://")).is_file()
    assert "execution local-" in out and ": Succeeded" in out
    # The demo ends by asking the registered model the first validation question.
    question, answer = out.rstrip().splitlines()[-2:]
    assert question.startswith("question (val-000-0, validation set): What ")
    assert answer.startswith('answer of the registered model: "') and "(score " in answer
    assert_the_package_serves(dev, tmp_path, package)


def assert_the_package_serves(dev, tmp_path, package):
    """model.tar.gz answers under the inference toolkit's contract for the registered container."""
    definition = json.loads(synthesized_definition(dev.templates["pipeline"])[0])
    [register] = [s for s in all_steps(definition["Steps"]) if s["Type"] == "RegisterModel"]
    [container] = register["Arguments"]["InferenceSpecification"]["Containers"]
    container = {**container, "ModelDataUrl": package.model_data}
    archive = tmp_path / "s3" / package.model_data.removeprefix("s3://")
    with tarfile.open(archive) as tar:
        assert {"config.json", "model.safetensors", "code/inference.py", "code/qa/answering.py"} <= set(tar.getnames())
    context = "The lighthouse of Port Avel was built in 1887 by Ines Marrow. It is painted red and white."
    questions = [
        {"question": "Who built the lighthouse?", "context": context},
        {"question": "When?", "context": context},
    ]
    single = invoke(container, archive, tmp_path / "endpoint", {"inputs": questions[0]})
    assert set(single) == {"answer", "score", "start", "end"}
    assert single["answer"] and context[single["start"] : single["end"]] == single["answer"]
    assert 0.0 <= single["score"] <= 1.0
    batch = invoke(container, archive, tmp_path / "endpoint", {"inputs": questions, "parameters": {"doc_stride": 16}})
    assert len(batch) == 2 and batch[0]["answer"] == single["answer"]
    with pytest.raises(InvocationFailed, match="expected"):
        invoke(container, archive, tmp_path / "endpoint", {"inputs": "no context"})
    with pytest.raises(InvocationFailed, match="sets no SAGEMAKER_PROGRAM"):
        invoke({**container, "Environment": {"HF_TASK": "question-answering"}}, archive, tmp_path / "endpoint", {})


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


def test_a_spot_reclaim_kills_training_and_the_retry_resumes_from_the_newest_complete_checkpoint(dev, tmp_path, capsys):
    hps = ("--hyperparameter", "checkpoint_steps=4")
    assert local_run(dev, tmp_path, "--param", "F1Threshold=0", *hps, "--interrupt-training-after-steps", "10") == 0
    out = capsys.readouterr().out
    assert re.search(r">> spot reclaim: SIGKILL to all [3-9] processes of the job, just after: step=10 ", out)
    assert "stop requested" not in out  # no SIGTERM handler ran: the job was killed
    assert "restored" in out and "checkpoint file(s)" in out
    # Killed at an arbitrary moment after step 10: the retry resumes from the newest complete checkpoint.
    resumed = re.search(r"resumed from step-(\d{8}): step (\d+)", out)
    assert resumed and int(resumed.group(1)) == int(resumed.group(2)) in (8, 12)
    assert "resumed after a spot interruption, attempt 2" in out
    assert len(packages(tmp_path, dev)) == 1


def runner_for(definition, tmp_path):
    store = LocalObjectStore(tmp_path / "s3")
    registry = LocalModelRegistry(tmp_path / "registry.sqlite")
    return LocalPipelineRunner(definition, "p", store, registry, tmp_path)


def test_unknown_step_type_field_and_expression_are_rejected_by_name(dev, tmp_path):
    definition = json.loads(synthesized_definition(dev.templates["pipeline"])[0])
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
    definition = json.loads(synthesized_definition(dev.templates["pipeline"])[0])
    assert [s["Name"] for s in execution_order(list(reversed(definition["Steps"])))] == [
        "ClaimManifest",
        "FirstDelivery",
    ]
    branch = find_step(definition, "FirstDelivery")["Arguments"]["IfSteps"]
    assert [s["Name"] for s in execution_order(list(reversed(branch)))] == ["ValidateAndTokenize", "CheckTrainingCost"]
    guarded = find_step(definition, "CheckTrainingCost")["Arguments"]["IfSteps"]
    assert [s["Name"] for s in execution_order(list(reversed(guarded)))] == ["FineTune", "Evaluate", "CheckF1"]
