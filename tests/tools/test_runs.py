"""make runs: the command against moto server, and the reports of a succeeded, a failed (F1 gate) and a
spot-interrupted execution against botocore's Stubber.

moto has no `list_pipeline_execution_steps` and its executions succeed at once, so it cannot show per-step
metadata, retries or billable time: the three executions are stubbed (Stubber validates every request and
response against botocore's SageMaker model). The command itself (credentials, region, the deployed
pipeline's name, error lines) runs against moto server. The local runs are listed from their records.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.stub import Stubber
from qa.outputs import EVALUATION_PREFIX, metric_name
from tasks import task

from reporting.local_runs import RUNNER_PID_FILE
from reporting.record import save
from tests.reporting.run_records import run_record
from tests.tools.conftest import EMPTY_REGION, REGION, assert_one_line_error, run_cli
from tools.deployment import settings_for
from tools.runs import ExecutionReport, format_report, recent_executions, training_run

PIPELINE = "hfqa-dev-qa-fine-tuning"
ACCOUNT_ARN = "arn:aws:sagemaker:us-east-1:111122223333"
T0 = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)

DEV = settings_for("dev")

TASK = task("text-classification")  # a task other than QA: its metrics are not QA's


def execution_arn(name: str) -> str:
    return f"{ACCOUNT_ARN}:pipeline/{PIPELINE}/execution/{name}"


def step(name: str, status: str, start_min: float, end_min: float, metadata: dict, attempts: int = 1) -> dict:
    return {
        "StepName": name,
        "StepStatus": status,
        "StartTime": T0 + timedelta(minutes=start_min),
        "EndTime": T0 + timedelta(minutes=end_min),
        "Metadata": metadata,
        "AttemptCount": attempts,
    }


def training_job(training: int, billable: int, interrupted: bool, f1: float) -> dict:
    transitions = [{"Status": "Starting", "StartTime": T0}, {"Status": "Training", "StartTime": T0}]
    if interrupted:
        transitions += [{"Status": "Interrupted", "StartTime": T0}, {"Status": "Restarting", "StartTime": T0}]
    return {
        "TrainingJobName": "pipelines-train",
        "TrainingJobArn": f"{ACCOUNT_ARN}:training-job/pipelines-train",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://artifacts/models/model.tar.gz"},
        "TrainingJobStatus": "Completed",
        "SecondaryStatus": "Completed",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "image"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 200},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "CreationTime": T0,
        "EnableManagedSpotTraining": True,
        "TrainingTimeInSeconds": training,
        "BillableTimeInSeconds": billable,
        "SecondaryStatusTransitions": transitions,
        # FineTune evaluates after training: its metric definitions carry eval:f1 (qa/outputs.py).
        "FinalMetricDataList": [{"MetricName": metric_name(EVALUATION_PREFIX, "f1"), "Value": f1, "Timestamp": T0}],
    }


def stub_execution(sm: Stubber, name: str, kind: str) -> None:
    arn = execution_arn(name)
    sm.add_response(
        "list_pipeline_parameters_for_execution",
        {"PipelineParameters": [{"Name": "ManifestKey", "Value": f"datasets/squad/{name}/manifest.json"}]},
        {"PipelineExecutionArn": arn},
    )
    train = {"TrainingJob": {"Arn": f"{ACCOUNT_ARN}:training-job/pipelines-train"}}
    claim = {"Lambda": {"Arn": "arn:aws:lambda:us-east-1:111122223333:function:hfqa-dev-claim"}}
    estimate = {"Lambda": {"Arn": "arn:aws:lambda:us-east-1:111122223333:function:hfqa-dev-estimate"}}
    record = {"Lambda": {"Arn": "arn:aws:lambda:us-east-1:111122223333:function:hfqa-dev-record"}}
    steps = [
        step("ClaimManifest", "Succeeded", 0, 0, claim),
        step("ValidateAndTokenize", "Succeeded", 0, 4, {"ProcessingJob": {"Arn": f"{ACCOUNT_ARN}:processing-job/p"}}),
        step("EstimateTrainingCost", "Succeeded", 4, 4, estimate),
        step("CheckTrainingCost", "Succeeded", 4, 4, {"Condition": {"Outcome": "True"}}),
        step("FineTune", "Succeeded", 4, 40 if kind == "spot" else 30, train, attempts=2 if kind == "spot" else 1),
        step("RecordModel", "Succeeded", 40, 45, record),
        step("CheckF1", "Succeeded", 45, 45, {"Condition": {"Outcome": "False" if kind == "f1" else "True"}}),
    ]
    if kind == "f1":
        message = "Validation F1 71.5 is below the threshold 88.0 - model not registered."
        steps.append(step("F1BelowThreshold", "Failed", 45, 45, {"Fail": {"ErrorMessage": message}}))
    else:
        package = f"{ACCOUNT_ARN}:model-package/hfqa-dev-qa-models/{name}"
        steps.append(step("RegisterModel-RegisterModel", "Succeeded", 45, 46, {"RegisterModel": {"Arn": package}}))
    sm.add_response(
        "list_pipeline_execution_steps",
        {"PipelineExecutionSteps": steps},
        {"PipelineExecutionArn": arn, "SortOrder": "Ascending"},
    )
    billable = {"ok": 1500, "f1": 1500, "spot": 600}[kind]
    billable = {"ok": 1500, "f1": 1500, "spot": 600}[kind]
    f1 = {"ok": 91.25, "f1": 71.5, "spot": 90.5}[kind]
    sm.add_response(
        "describe_training_job",
        training_job(1500 if kind != "spot" else 2000, billable, kind == "spot", f1),
        {"TrainingJobName": "pipelines-train"},
    )
    if kind != "f1":
        sm.add_response(
            "describe_model_package",
            {
                "ModelPackageName": "hfqa-dev-qa-models",
                "ModelPackageArn": f"{ACCOUNT_ARN}:model-package/hfqa-dev-qa-models/{name}",
                "CreationTime": T0,
                "ModelPackageStatus": "Completed",
                "ModelPackageStatusDetails": {"ValidationStatuses": []},
                "ModelApprovalStatus": "Approved" if kind == "ok" else "PendingManualApproval",
            },
            {"ModelPackageName": f"{ACCOUNT_ARN}:model-package/hfqa-dev-qa-models/{name}"},
        )


@pytest.fixture
def reports():
    sagemaker = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    names = ["spot-3", "f1-2", "ok-1"]  # newest first, as the API returns them with SortOrder=Descending
    with Stubber(sagemaker) as sm:
        sm.add_response(
            "list_pipeline_executions",
            {
                "PipelineExecutionSummaries": [
                    {
                        "PipelineExecutionArn": execution_arn(name),
                        "StartTime": T0 - timedelta(hours=i),
                        "PipelineExecutionStatus": "Failed" if name.startswith("f1") else "Succeeded",
                    }
                    for i, name in enumerate(names)
                ]
            },
            {"PipelineName": PIPELINE, "SortBy": "CreationTime", "SortOrder": "Descending", "MaxResults": 10},
        )
        for name in names:
            stub_execution(sm, name, name.split("-")[0])
        result = recent_executions(sagemaker, PIPELINE, 10)
        sm.assert_no_pending_responses()
    return {report.arn.rsplit("/", 1)[-1]: report for report in result}


def test_newest_first_with_trigger_and_step_durations(reports):
    assert list(reports) == ["spot-3", "f1-2", "ok-1"]
    ok = reports["ok-1"]
    assert ok.manifest_key == "datasets/squad/ok-1/manifest.json"
    assert [(s.name, s.seconds) for s in ok.steps][:5] == [
        ("ClaimManifest", 0.0),
        ("ValidateAndTokenize", 240.0),
        ("EstimateTrainingCost", 0.0),
        ("CheckTrainingCost", 0.0),
        ("FineTune", 1560.0),
    ]


def test_succeeded_execution_shows_cost_f1_and_approved_package(reports):
    ok = reports["ok-1"]
    assert ok.metrics == {"f1": 91.25} and ok.approval_status == "Approved"
    assert ok.training.list_price_usd == pytest.approx(37.688 * 2 * 1500 / 3600)
    text = format_report(ok, REGION, DEV)
    assert "Succeeded" in text and "question-answering: f1 91.25 (gate); registered" in text and "(Approved)" in text
    assert "$31.41 at on-demand list price" in text


def test_failed_f1_gate_shows_the_fail_message_and_no_package(reports):
    failed = reports["f1-2"]
    assert failed.status == "Failed" and failed.metrics == {"f1": 71.5} and failed.model_package is None
    assert "F1BelowThreshold: Validation F1 71.5 is below the threshold 88.0" in format_report(failed, REGION, DEV)


def test_spot_interrupted_execution_shows_retries_and_savings(reports):
    spot = reports["spot-3"]
    assert spot.training.interruptions == 1
    assert spot.training.spot_savings == pytest.approx(0.7)
    text = format_report(spot, REGION, DEV)
    assert "FineTune Succeeded 36m00s (2 attempts)" in text
    assert "trained 2,000 s, billed 600 s (70% spot savings), 1 spot interruption(s)" in text
    assert "(PendingManualApproval)" in text


def test_command_against_moto_before_any_execution(deployed, deployed_env):
    deployed.replace_pipeline(deployed.pipeline_definition)  # the session's earlier executions go with it
    result = run_cli("tools.runs", "--env", "dev", env=deployed_env)
    assert result.returncode == 0, result.stderr
    assert f"no executions of {deployed.pipeline_name} yet" in result.stdout
    assert "on-demand LIST prices" in result.stdout


def test_command_without_credentials_is_one_line(aws):
    environment = {k: v for k, v in aws.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    assert_one_line_error(run_cli("tools.runs", "--env", "dev", env=environment), "no AWS credentials found")


def test_report_names_each_job_with_its_log_group_and_console_links(reports):
    text = format_report(reports["ok-1"], REGION, DEV)
    console = f"https://{REGION}.console.aws.amazon.com/sagemaker/home?region={REGION}#/"
    assert f"  console: {console}pipelines/{PIPELINE}/executions/ok-1" in text
    logs = "logs /aws/sagemaker/TrainingJobs"
    training = f"  FineTune: TrainingJob pipelines-train, {logs} {console}jobs/pipelines-train"
    assert training in text
    processing = (
        f"  ValidateAndTokenize: ProcessingJob p, logs /aws/sagemaker/ProcessingJobs {console}processing-jobs/p"
    )
    assert processing in text
    # The function's own log group, as the stacks name it (tests/stacks/test_functions.py), not /aws/lambda/<name>.
    assert "  ClaimManifest: Lambda hfqa-dev-claim, logs /hfqa-dev/functions/ClaimManifest\n" in text


@pytest.mark.parametrize("limit", ["0", "-3", "101", "ten"])
def test_a_limit_out_of_range_is_one_line(aws, limit):
    assert_one_line_error(run_cli("tools.runs", "--limit", limit, env=aws), "--limit", "from 1 to 100")


def test_a_region_without_the_pipeline_is_one_line(aws):
    """moto answers DescribePipeline for an unknown pipeline with ValidationException, AWS with ResourceNotFound."""
    assert_one_line_error(
        run_cli("tools.runs", env=aws), f"pipeline hfqa-dev-qa-fine-tuning not found in {EMPTY_REGION}", "AWS_REGION"
    )


def test_aws_region_alone_selects_the_region(deployed, deployed_env):
    """boto3 reads only AWS_DEFAULT_REGION; the tools map AWS_REGION onto their sessions."""
    environment = {k: v for k, v in deployed_env.items() if k != "AWS_DEFAULT_REGION"}
    assert environment["AWS_REGION"] == REGION
    deployed.replace_pipeline(deployed.pipeline_definition)  # the session's earlier executions go with it
    result = run_cli("tools.runs", env=environment)
    assert result.returncode == 0, result.stderr
    assert f"no executions of {deployed.pipeline_name} yet" in result.stdout


def test_the_training_jobs_evaluation_metric_is_the_f1():
    """The step graph where FineTune evaluates: F1 is FinalMetricDataList['eval:f1'] of the training job."""
    sagemaker = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(sagemaker) as stub:
        stub.add_response(
            "describe_training_job", training_job(1500, 1500, False, 88.5), {"TrainingJobName": "pipelines-train"}
        )
        run = training_run(sagemaker, f"{ACCOUNT_ARN}:training-job/pipelines-train")
    assert (run.task, run.metrics) == ("question-answering", {"f1": 88.5})  # no task hyperparameter: QA


def test_each_task_s_metrics_are_shown_by_their_names_with_the_gate_marked():
    """A training job given --task reports that task's METRICS (eval:<name>), in its order, its gate marked."""
    job = training_job(1500, 1500, False, 0.0)
    job["HyperParameters"] = {"task": json.dumps(TASK.NAME)}
    job["FinalMetricDataList"] = [
        {"MetricName": f"eval:{name}", "Value": 50.0 + index, "Timestamp": T0}
        for index, name in enumerate(TASK.METRICS)
    ]
    sagemaker = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_training_job", job, {"TrainingJobName": "pipelines-train"})
        run = training_run(sagemaker, f"{ACCOUNT_ARN}:training-job/pipelines-train")
    assert run.task == TASK.NAME and list(run.metrics) == list(TASK.METRICS)
    shown = format_report(
        ExecutionReport("arn", T0, "Succeeded", None, task=run.task, metrics=run.metrics), REGION, DEV
    )
    expected = ", ".join(
        f"{name} {50.0 + index:.2f}" + (" (gate)" if name == TASK.GATE_METRIC else "")
        for index, name in enumerate(TASK.METRICS)
    )
    assert f"  {TASK.NAME}: {expected}" in shown


def test_make_runs_lists_the_local_runs_newest_first_with_no_aws_call(tmp_path):
    """--local (LOCAL=1): no credentials needed; a run whose runner is gone while its record says Executing
    was killed, and says so."""
    executions = tmp_path / "executions"
    finished = run_record()
    save(finished, executions / finished.execution_id)
    killed = dataclasses.replace(
        run_record(status="Executing"), execution_id="local-00000000000b", started_at="2099-01-01T00:00:00+00:00"
    )
    save(killed, executions / killed.execution_id)
    (executions / killed.execution_id / RUNNER_PID_FILE).write_text("999999999")  # no such process

    result = run_cli("tools.runs", "--local", "--work-dir", str(tmp_path), env={})

    assert result.returncode == 0, result.stderr
    listed = [line.split()[1:3] for line in result.stdout.splitlines() if line.startswith(("2099", "20"))]
    assert listed == [["Killed", "local-00000000000b"], ["Succeeded", finished.execution_id]]
    shown = "question-answering: exact_match 83.25, f1 90.50 (gate)"
    assert f"{shown}; registered {finished.model_package_arn} (PendingManualApproval)" in result.stdout
