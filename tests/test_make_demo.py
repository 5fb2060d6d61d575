"""`make synth` and `make demo` keep each environment in its own assembly, so any order of them works; the tiny
demo runs the synthesized pipeline end to end.

One checkout, the Makefile's own commands: `make synth ENV=prod`, then `make demo TINY=1` (dev), then
`make demo TINY=1 ENV=prod`. To keep this to two real synths and two tiny runs on CI's two cores, the CDK
CLI is wrapped so that a repeated synth with the same arguments replays the first one's output (synth is
deterministic); only CDK_OUT (where the per-environment folders go) and the demo's work dir point into a
temporary folder. The dev demo is also the suite's one tiny local run that passes every step: it delivers
the upload's event twice (`--deliver-event-twice`), and the tests below check its steps, the duplicate
delivery, the registered package and what that package serves. The prod demo uploads a poisoned dataset
(tests/demo_runs.py, where the session fixture lives) and ends at the benchmark's F1 gate.
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
from pathlib import Path

import pytest
from tasks import task as task_module

from config import load_settings
from local_runner.errors import InvocationFailed
from local_runner.serving import LocalEndpoint
from pipeline_steps.walk import all_steps
from stacks.assembly import synthesized_definition, synthesized_templates
from tests.demo_runs import OTHER_TASKS
from tests.local_runner.summary import table

pytestmark = pytest.mark.slow


def stacks_in(assembly: Path) -> list[str]:
    manifest = json.loads((assembly / "manifest.json").read_text())
    return sorted(name for name, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack")


def test_synth_prod_then_demo_dev_then_demo_prod_each_runs_its_own_pipeline(sequence, cdk_context):
    for env_name, run in (("dev", sequence.runs["demo"]), ("prod", sequence.runs["demo prod"])):
        settings = load_settings({**cdk_context, "env": env_name})
        prefix = settings.name_prefix
        assert stacks_in(sequence.cdk_out / env_name) == [f"{prefix}-data", f"{prefix}-network", f"{prefix}-pipeline"]
        assert f"Synthesized {sequence.cdk_out / env_name}/" in run.stdout
        assert f" of {settings.pipeline_name}\n" in run.stdout
    assert ": Succeeded\n" in sequence.runs["demo"].stdout


def test_prod_demo_ends_in_the_fail_step_reported_once_as_sagemaker_would(sequence, cdk_context):
    """The tiny model's F1 is below prod's threshold: CheckF1 takes the F1BelowThreshold branch, nothing is
    registered, and the interruption that the run was too short for is reported with a failing exit code."""
    prod = load_settings({**cdk_context, "env": "prod"})
    run = sequence.runs["demo prod"]
    rows = table(run.stdout)
    assert ("CheckF1", "Succeeded") in rows and ("F1BelowThreshold", "Failed") in rows
    assert ("CheckTrainingCost", "Succeeded") in rows and ("FirstDelivery", "Succeeded") in rows
    assert len(rows) == len(set(name for name, _ in rows))  # nothing listed twice
    assert ": Failed\n" in run.stdout and "registered: nothing" in run.stdout
    assert run.stdout.count(f"is below the threshold {prod.evaluation.f1_threshold} - model not registered.") == 1
    assert re.search(r"^F1BelowThreshold +Fail +Failed", run.stdout, re.M)
    assert sequence.packages(prod) == []
    assert "the requested spot interruption (SIGKILL after step 100000) never happened" in run.stderr


def test_demo_says_the_head_is_new_once_and_keeps_load_reports_in_the_job_log(sequence):
    for run in (sequence.runs["demo"], sequence.runs["demo prod"]):
        console = run.stdout + run.stderr
        assert "UNEXPECTED" not in console
        assert "MISSING" not in console
        assert console.count("the question-answering head is new") == 1
    job_logs = sorted(sequence.work_dir.glob("executions/*/FineTune/job.log"))
    assert len(job_logs) == 2
    for job_log in job_logs:
        text = job_log.read_text()
        assert "LOAD REPORT" in text and "qa_outputs.weight" in text and "MISSING" in text


def test_tiny_demo_passes_every_step_registers_with_metrics_and_ignores_a_duplicate_event(sequence, cdk_context):
    out = sequence.runs["demo"].stdout
    assert "trigger rule matched the Object Created event" in out
    first, duplicate = out.split("the same Object Created event is delivered again")
    for name in (
        "ClaimManifest",
        "ParametersValid",
        "FirstDelivery",
        "DatasetValid",  # ClaimManifest validated the records (processing.tokenize_in "fine_tune")
        "EstimateTrainingCost",
        "CheckTrainingCost",
        "FineTune",
        "RecordModel",
        "CheckF1",
        "RegisterModel",
    ):
        assert f"> {name}" in first
    assert "> Evaluate " not in first  # evaluation runs inside FineTune: no second GPU cold start
    assert "> ValidateAndTokenize" not in first  # FineTune tokenizes: one instance cold start
    # The cost guard let it through: the estimate (mostly dev's g5.2xlarge job's billed start-up, for the tiny
    # dataset) is within the default MaxTrainingCostUSD (3x the configured choice's estimate on SQuAD v1.1), and
    # below the SQuAD estimate itself.
    dev = load_settings({**cdk_context, "env": "dev"})
    ceiling = dev.default_max_cost_usd
    [guard] = re.findall(rf"    ([0-9.e+-]+) LessThanOrEqualTo {ceiling}: True", first)
    assert 0 < float(guard) < dev.reference_training_usd < ceiling
    # The second delivery claims nothing: no preprocessing, no training, no second model, no failure.
    assert "> ClaimManifest" in duplicate and "ok FirstDelivery: false -> ElseSteps" in duplicate
    # The duplicate's record names the execution that owns the dataset version.
    [owner] = re.findall(r"^execution (local-\w+) of ", first, re.M)
    assert re.search(rf"ClaimManifest +Lambda +Succeeded .*Duplicate=true, ClaimedBy=\S+/execution/{owner}", duplicate)
    assert "> FineTune" not in duplicate and "> ValidateAndTokenize" not in duplicate
    assert ": Succeeded" in duplicate
    assert "running 1 CPU process(es) with torchrun" in out  # dev: 1 x ml.g5.2xlarge, one GPU
    [package] = sequence.packages(load_settings({**cdk_context, "env": "dev"}))
    assert package.approval_status == "PendingManualApproval"
    assert set(package.metrics["metrics"]) == {"f1", "exact_match"}
    # The report RecordModel wrote from FineTune's FinalMetricDataList, with the archive's identity.
    archive = (sequence.work_dir / "s3" / package.model_data.removeprefix("s3://")).read_bytes()
    assert package.metrics["model"]["sha256"] == hashlib.sha256(archive).hexdigest()
    # The package names RecordModel's content-addressed copy of that archive, not FineTune's models/ key.
    assert package.model_data.endswith(f"/registry/{package.metrics['model']['sha256']}/model.tar.gz")
    assert "execution local-" in out and ": Succeeded" in out
    # The demo ends by asking the registered model the first validation question.
    question, answer = out.rstrip().splitlines()[-2:]
    assert question.startswith("question (val-000-0, validation set): What ")
    assert answer.startswith('answer of the registered model: "') and "(score " in answer


def test_the_registered_package_serves_under_the_inference_toolkit_contract(sequence, cdk_context, tmp_path):
    """model.tar.gz answers under the inference toolkit's contract for the registered container."""
    settings = load_settings({**cdk_context, "env": "dev"})
    [package] = sequence.packages(settings)
    template = synthesized_templates(sequence.cdk_out / "dev")[f"{settings.name_prefix}-pipeline"]
    definition = json.loads(synthesized_definition(template)[0])
    [register] = [s for s in all_steps(definition["Steps"]) if s["Type"] == "RegisterModel"]
    [container] = register["Arguments"]["InferenceSpecification"]["Containers"]
    container = {**container, "ModelDataUrl": package.model_data}
    archive = sequence.work_dir / "s3" / package.model_data.removeprefix("s3://")
    with tarfile.open(archive) as tar:
        assert {"config.json", "model.safetensors", "code/inference.py", "code/qa/answering.py"} <= set(tar.getnames())
    context = "The lighthouse of Port Avel was built in 1887 by Ines Marrow. It is painted red and white."
    questions = [
        {"question": "Who built the lighthouse?", "context": context},
        {"question": "When?", "context": context},
    ]
    # One container process: the model loads once and answers each request; a bad request gets an error and
    # the container goes on serving.
    with LocalEndpoint(container, archive, tmp_path / "endpoint") as endpoint:
        single = endpoint.invoke({"inputs": questions[0]})
        assert set(single) == {"answer", "score", "start", "end"}
        assert single["answer"] and context[single["start"] : single["end"]] == single["answer"]
        assert 0.0 <= single["score"] <= 1.0
        with pytest.raises(InvocationFailed, match="expected"):
            endpoint.invoke({"inputs": "no context"})
        batch = endpoint.invoke({"inputs": questions, "parameters": {"doc_stride": 16}})
        assert len(batch) == 2 and batch[0]["answer"] == single["answer"]
    with pytest.raises(InvocationFailed, match="sets no SAGEMAKER_PROGRAM"):
        LocalEndpoint({**container, "Environment": {"HF_TASK": "question-answering"}}, archive, tmp_path / "none")


# The last line of each task's demo: what the registered model answered for the first validation record.
ANSWER_LINES = {
    "text-classification": r'label of the registered model: "\w+" \(score [0-9.]+; reference: "\w+"\)',
    "token-classification": r"entities of the registered model: .+ \(reference: .+\)",
}


@pytest.mark.parametrize("name", OTHER_TASKS)
def test_each_tasks_tiny_demo_trains_registers_and_ends_with_the_registered_models_answer(sequence, cdk_context, name):
    """`make demo TASK=<task> TINY=1`: the task's sample, the bundled encoder with a fresh head of its labels, every
    step passed, a package with the task's metrics in the task's own group, and the answer line."""
    run = sequence.runs[f"demo {name}"]
    task = task_module(name)
    console = run.stdout + run.stderr
    assert console.count(f"the {name} head is new") == 1
    assert ": Succeeded\n" in run.stdout and "> FineTune" in run.stdout and "> RegisterModel" in run.stdout
    [package] = sequence.packages(load_settings({**cdk_context, "env": "dev", "task": name}))
    assert package.approval_status == "PendingManualApproval"
    assert list(package.metrics["metrics"]) == [task.GATE_METRIC, *(m for m in task.METRICS if m != task.GATE_METRIC)]
    assert re.fullmatch(ANSWER_LINES[name], run.stdout.rstrip().splitlines()[-1]), run.stdout[-2000:]
