"""The end of every local run: its record, report and MLflow run, from what the runner returns."""

from __future__ import annotations

import json
from datetime import datetime

from local_runner.record import record_from_local_result, report_local_run
from local_runner.registry import ModelPackage
from local_runner.runner import ExecutionResult, JobResources, StepResult
from local_runner.store import LocalObjectStore
from reporting.record import RECORD_FILE, REPORT_FILE, REPORT_IMAGE, load_local
from tests.reporting.run_records import START, log_history, model_archive

PIPELINE = "hfqa-dev-qa-fine-tuning"
MODEL = "s3://artifacts/models/local-abc-FineTune/output/model.tar.gz"


def local_result(store: LocalObjectStore) -> ExecutionResult:
    store.put_bytes(model_archive(log_history()), MODEL)
    t0 = START.timestamp()
    return ExecutionResult(
        execution_id="local-abc",
        status="Succeeded",
        steps=[
            StepResult("ValidateAndTokenize", "Processing", "Succeeded", 8.0, "train, validation", t0),
            StepResult("CheckTrainingCost", "Condition", "Succeeded", 0.0, "-> IfSteps", t0 + 8),
            StepResult("FineTune", "Training", "Succeeded", 100.0, f"model {MODEL}", t0 + 8, attempts=2),
        ],
        model_package=ModelPackage("hfqa-dev-qa-models", 4, "PendingManualApproval", MODEL, {}, "local-abc"),
        parameters={"ManifestKey": "datasets/sample-squad/v1/manifest.json", "F1Threshold": 40.0, "Epochs": 3},
        resources={
            "ValidateAndTokenize": JobResources("processing", "ml.m5.4xlarge", 1),
            "FineTune": JobResources("training", "ml.p4d.24xlarge", 2, spot=True),
        },
        model_data=MODEL,
    )


def test_the_record_holds_steps_jobs_curves_and_the_package(tmp_path):
    store = LocalObjectStore(tmp_path / "s3")
    record = record_from_local_result(local_result(store), PIPELINE, store)
    assert [(s.name, s.seconds, s.attempts) for s in record.steps] == [
        ("ValidateAndTokenize", 8.0, 1),
        ("CheckTrainingCost", 0.0, 1),
        ("FineTune", 100.0, 2),
    ]
    assert record.started_at is not None and datetime.fromisoformat(record.started_at) == START
    assert [(j.step, j.instance_count, j.billable_seconds, j.spot) for j in record.jobs] == [
        ("ValidateAndTokenize", 1, 8.0, False),
        ("FineTune", 2, 100.0, True),
    ]
    assert record.log_history == log_history()
    # No Evaluate property file in the target graph: the metrics come from the log history's evaluation.
    evaluation = log_history()[-1]
    assert record.metrics == {"exact_match": evaluation["eval_exact_match"], "f1": evaluation["eval_f1"]}
    assert record.f1_threshold == 40.0
    assert str(record.model_package_arn).endswith("model-package/hfqa-dev-qa-models/4")
    assert record.execution_arn.endswith(f"pipeline/{PIPELINE}/execution/local-abc")


def test_the_training_jobs_final_metrics_are_the_evaluation(tmp_path):
    store = LocalObjectStore(tmp_path / "s3")
    result = local_result(store)
    result.metrics = {"eval:f1": 77.5, "eval:exact_match": 70.25}
    record = record_from_local_result(result, PIPELINE, store)
    assert record.metrics == {"f1": 77.5, "exact_match": 70.25}


def test_the_end_of_a_local_run_writes_record_report_and_mlflow_run(tmp_path):
    store = LocalObjectStore(tmp_path / "s3")
    lines: list[str] = []
    path = report_local_run(local_result(store), PIPELINE, store, tmp_path, lines.append)
    folder = tmp_path / "executions" / "local-abc"
    assert path == folder / REPORT_FILE and (folder / REPORT_IMAGE).is_file()
    assert json.loads((folder / RECORD_FILE).read_text())["execution_id"] == "local-abc"
    assert load_local(folder).metrics["f1"] == log_history()[-1]["eval_f1"]
    assert (tmp_path / "mlflow.db").is_file()
    assert lines[0].startswith("run report: ") and lines[1].startswith("mlflow: recorded local-abc as run")


def test_a_step_starts_where_its_predecessor_ended_to_the_millisecond(tmp_path):
    """Starts cut to the second drew FineTune starting 0.8 s inside ValidateAndTokenize (the F1-gate run)."""
    store = LocalObjectStore(tmp_path / "s3")
    result = local_result(store)
    t0 = START.timestamp() + 0.1
    result.steps = [
        StepResult("ValidateAndTokenize", "Processing", "Succeeded", 11.8, "", t0),
        StepResult("FineTune", "Training", "Failed", 3.0, "", t0 + 11.85),
    ]
    prepare, fine_tune = record_from_local_result(result, PIPELINE, store).steps
    assert prepare.ended_at is not None and fine_tune.started_at is not None
    assert datetime.fromisoformat(fine_tune.started_at) >= prepare.ended_at
