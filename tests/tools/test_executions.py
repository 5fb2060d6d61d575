"""make start / retry / logs / stop: `start` end to end against moto server; retry, stop and the step listing of
logs against botocore's Stubber, because moto 5.2.5 has neither RetryPipelineExecution, StopPipelineExecution nor
ListPipelineExecutionSteps (its executions also succeed at once, so none is ever retryable or stoppable). The log
events themselves come from moto's CloudWatch Logs. A local stop runs against a real local run (its one job
sleeps until stopped: tests/local_runner/stoppable_run.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber

from reporting.local_runs import find_run
from tests.conftest import ENTRY_POINT_PYTHONPATH, ROOT
from tests.local_runner.stoppable_run import JOB_PID_FILE, JOB_TMP_FILE, STEP
from tests.tools.conftest import EMPTY_REGION, REGION, assert_one_line_error, run_cli
from tools.deployment import ToolError, load_deployment, settings_for
from tools.executions import (
    declared_parameters,
    deployed_definition,
    log_lines,
    parse_params,
    retry,
    start,
    step_logs,
    stop,
)

START = ("tools.executions", "start", "--name", "squad", "--version", "v1")
MANIFEST_KEY = "datasets/squad/v1/manifest.json"


def execution_parameters(deployed, arn: str) -> dict[str, str]:
    listing = deployed.client("sagemaker").list_pipeline_parameters_for_execution(PipelineExecutionArn=arn)
    return {p["Name"]: p["Value"] for p in listing["PipelineParameters"]}


def test_start_pins_the_manifest_version_and_passes_the_params(deployed, deployed_env):
    s3 = deployed.client("s3")
    s3.put_object(Bucket=deployed.datasets_bucket, Key=MANIFEST_KEY, Body=b"{}")
    current = s3.put_object(Bucket=deployed.datasets_bucket, Key=MANIFEST_KEY, Body=b'{"v": 2}')["VersionId"]
    result = run_cli(*START, "--params", "Epochs=3 LearningRate=3e-5 SkipInvalidRecords=true", env=deployed_env)
    assert result.returncode == 0, result.stderr
    arn = result.stdout.splitlines()[0].removeprefix("started ")
    assert execution_parameters(deployed, arn) == {
        "Epochs": "3",
        "LearningRate": "3e-5",
        "SkipInvalidRecords": "true",
        "DatasetBucket": deployed.datasets_bucket,
        "ManifestKey": MANIFEST_KEY,
        "ManifestVersionId": current,
    }
    assert f"make logs EXECUTION={arn.rsplit('/', 1)[-1]}" in result.stdout


@pytest.fixture
def defined(deployed):
    return declared_parameters(deployed_definition(deployed.client("sagemaker"), deployed.pipeline_name, REGION))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ("Epochs=two", "PARAMS Epochs='two': Epochs is Float, give a number"),
        ("TrainingInstanceCount=1.5", "TrainingInstanceCount is Integer, give a whole number"),
        ("ModelApprovalStatus=Aproved", "allowed values are PendingManualApproval, Approved, Rejected"),
        ("Epoch=3", "the pipeline has no such parameter (did you mean Epochs?)"),
        ("Epochs", "is not Name=value"),
        ("ManifestKey=x", "set by make start from NAME and VERSION"),
        ("Epochs=3 LearningRate=1e-5 Epochs=4", "PARAMS 'Epochs' is given twice: give each parameter once"),
        (f"BaseModelUri=s3://b/{'x' * 1018}", "has 1025 characters: at most 1024"),
    ],
)
def test_params_are_checked_against_the_deployed_definition(defined, params, message):
    with pytest.raises(ToolError) as failure:
        parse_params(params, defined)
    assert message in str(failure.value)


def executions(deployed) -> list[str]:
    listing = deployed.client("sagemaker").list_pipeline_executions(PipelineName=deployed.pipeline_name)
    return [summary["PipelineExecutionArn"] for summary in listing["PipelineExecutionSummaries"]]


def test_start_without_the_manifest_is_one_line_and_starts_nothing(deployed, deployed_env):
    before = executions(deployed)
    assert_one_line_error(run_cli(*START, env=deployed_env), f"no manifest at s3://{deployed.datasets_bucket}/")
    assert executions(deployed) == before


def test_start_refuses_what_the_first_step_would_refuse_and_starts_nothing(deployed, deployed_env):
    """Issue 29: make start sent these, the execution started, and ClaimManifest then stopped it. The rules are the
    claim's own (qa/parameter_rules.py), applied to the event it would receive from the deployed definition."""
    deployed.client("s3").put_object(Bucket=deployed.datasets_bucket, Key=MANIFEST_KEY, Body=b"{}")
    before = executions(deployed)
    assert_one_line_error(
        run_cli(*START, "--params", "Epochs=0", env=deployed_env),
        "Parameter Epochs='0' must be > 0 and at most 10 (limits.max_epochs). "
        "Nothing started (ClaimManifest would stop it).",
    )
    deployment = load_deployment("dev")
    for params, says in (
        ("F1Threshold=150", "Parameter F1Threshold='150' must be between 0 and 100."),
        ("TrainingInstanceCount=100", "Parameter TrainingInstanceCount='100' must be between 1 and 8"),
        ("BaseModelUri=s3://nope/x/", "Parameter BaseModelUri='s3://nope/x/' must be a folder under s3://"),
        ("Epochs=1 Epochs=2", "PARAMS 'Epochs' is given twice"),
        # The per-run controls: an explicit batch against the GPU memory model of dev's instance type.
        ("PerDeviceTrainBatchSize=4096", "Parameter PerDeviceTrainBatchSize=4096 on ml.g5.2xlarge: 4096 sequences"),
        ("MaxSeqLength=1024", "must be between 32 and 512 (the base model's max_position_embeddings)."),
        ("WarmupRatio=0.9", "Parameter WarmupRatio='0.9' must be 'auto' or between 0 and 0.5."),
    ):
        with pytest.raises(ToolError, match=re.escape(says)):
            start(deployment, "squad", "v1", params, "dev")
    assert executions(deployed) == before


def test_start_in_a_region_without_the_pipeline_is_one_line(aws):
    assert_one_line_error(run_cli(*START, env=aws), f"not found in {EMPTY_REGION}")


def test_a_bad_name_is_one_line(aws):
    assert_one_line_error(run_cli(*START[:3], "../x", *START[4:], env=aws), "--name '../x' must start with")


ARN = f"arn:aws:sagemaker:{REGION}:123456789012:pipeline/hfqa-dev-qa-fine-tuning/execution/abc123"


class StubbedDeployment:
    """A Deployment whose SageMaker client is stubbed."""

    def __init__(self, sagemaker) -> None:
        self.sagemaker = sagemaker

    def client(self, service: str):
        assert service == "sagemaker"
        return self.sagemaker


def stubbed_sagemaker():
    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    return client, Stubber(client)


def stub_execution_values(stub, definition: dict, values: dict[str, str]) -> None:
    """The definition and parameter values an execution ran with (DescribePipelineDefinitionForExecution,
    ListPipelineParametersForExecution; moto 5.2.5 has the second only)."""
    stub.add_response(
        "describe_pipeline_definition_for_execution",
        {"PipelineDefinition": json.dumps(definition)},
        {"PipelineExecutionArn": ARN},
    )
    stub.add_response(
        "list_pipeline_parameters_for_execution",
        {"PipelineParameters": [{"Name": k, "Value": v} for k, v in values.items()]},
        {"PipelineExecutionArn": ARN},
    )


@pytest.mark.parametrize("status", ["Failed", "Stopped"])
def test_retry_a_failed_execution(status, deployed):
    client, stub = stubbed_sagemaker()
    stub.add_response("describe_pipeline_execution", {"PipelineExecutionStatus": status}, {"PipelineExecutionArn": ARN})
    stub_execution_values(stub, json.loads(deployed.pipeline_definition), {"Epochs": "3", "ManifestVersionId": "v-1"})
    stub.add_response(
        "retry_pipeline_execution",
        {"PipelineExecutionArn": ARN},
        {"PipelineExecutionArn": ARN, "ClientRequestToken": ANY},
    )
    with stub:
        assert retry(StubbedDeployment(client), ARN) == ARN  # type: ignore[arg-type]
        stub.assert_no_pending_responses()


def test_an_execution_the_first_step_stopped_is_not_retried(deployed):
    """Its parameters break ClaimManifest's rules: a retry would stop the same way, so none is requested."""
    client, stub = stubbed_sagemaker()
    stub.add_response(
        "describe_pipeline_execution", {"PipelineExecutionStatus": "Failed"}, {"PipelineExecutionArn": ARN}
    )
    stub_execution_values(stub, json.loads(deployed.pipeline_definition), {"Epochs": "0", "ManifestVersionId": "v-1"})
    with (
        stub,
        pytest.raises(
            ToolError,
            match=r"Epochs='0' must be > 0 and at most \d+ \(limits.max_epochs\)\. Execution abc123 ran with it, and",
        ),
    ):
        retry(StubbedDeployment(client), ARN)  # type: ignore[arg-type]
    stub.assert_no_pending_responses()


def test_a_running_execution_is_not_retried():
    client, stub = stubbed_sagemaker()
    stub.add_response(
        "describe_pipeline_execution", {"PipelineExecutionStatus": "Executing"}, {"PipelineExecutionArn": ARN}
    )
    with stub, pytest.raises(ToolError, match="execution abc123 is Executing: only a failed or stopped"):
        retry(StubbedDeployment(client), ARN)  # type: ignore[arg-type]


def test_logs_of_an_executions_jobs(deployed):
    """The steps from a stubbed ListPipelineExecutionSteps; the streams and events from moto's CloudWatch Logs,
    named as SageMaker names them (<job name>/algo-1-<epoch seconds>)."""
    logs = deployed.client("logs")
    group = "/aws/sagemaker/TrainingJobs"
    if not logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]:
        logs.create_log_group(logGroupName=group)
    now = int(datetime.now(UTC).timestamp() * 1000)
    for job in ("pipelines-ft-1", "pipelines-other"):
        stream = f"{job}/algo-1-1764570000"
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        logs.put_log_events(
            logGroupName=group,
            logStreamName=stream,
            logEvents=[{"timestamp": now + i, "message": f"{job} line {i}"} for i in range(3)],
        )
    client, stub = stubbed_sagemaker()
    steps = [
        {"StepName": "ClaimManifest", "StepStatus": "Succeeded", "Metadata": {}},
        {
            "StepName": "FineTune",
            "StepStatus": "Succeeded",
            "Metadata": {
                "TrainingJob": {"Arn": f"arn:aws:sagemaker:{REGION}:123456789012:training-job/pipelines-ft-1"}
            },
        },
    ]
    stub.add_response(
        "list_pipeline_execution_steps",
        {"PipelineExecutionSteps": steps},
        {"PipelineExecutionArn": ARN, "SortOrder": "Ascending"},
    )
    with stub:
        [where] = step_logs(client, ARN, None, settings_for("dev"))
    assert (where.step, where.log_group, where.stream_prefix) == ("FineTune", group, "pipelines-ft-1/")
    lines = list(log_lines(logs, where))
    assert lines == [f"pipelines-ft-1/algo-1-1764570000  pipelines-ft-1 line {i}" for i in range(3)]


def test_logs_of_an_unknown_step_is_one_line(monkeypatch, deployed):
    client, stub = stubbed_sagemaker()
    stub.add_response(
        "list_pipeline_execution_steps",
        {"PipelineExecutionSteps": []},
        {"PipelineExecutionArn": ARN, "SortOrder": "Ascending"},
    )
    from tools.executions import print_logs

    deployment = load_deployment("dev")
    monkeypatch.setattr(type(deployment), "client", lambda self, service: client)
    with stub, pytest.raises(ToolError, match="execution abc123 has no step named 'Fine'"):
        print_logs(deployment, ARN, "Fine")


def test_logs_of_a_lambda_step_are_the_events_within_the_step(deployed):
    """A function's log streams are not per execution: the step's events are those between its start and end."""
    logs = deployed.client("logs")
    # The function's own log group, as the stacks name it: the moto deployment created it.
    group = "/hfqa-dev/functions/ClaimManifest"
    assert logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
    logs.create_log_stream(logGroupName=group, logStreamName="2026/12/01/[$LATEST]abc")
    start = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    at = int(start.timestamp() * 1000)
    logs.put_log_events(
        logGroupName=group,
        logStreamName="2026/12/01/[$LATEST]abc",
        logEvents=[
            {"timestamp": at - 60_000, "message": "an earlier execution"},
            {"timestamp": at + 1_000, "message": "claimed"},
            {"timestamp": at + 120_000, "message": "a later execution"},
        ],
    )
    client, stub = stubbed_sagemaker()
    claim = {
        "StepName": "ClaimManifest",
        "StepStatus": "Succeeded",
        "StartTime": start,
        "EndTime": start.replace(second=5),
        "Metadata": {"Lambda": {"Arn": f"arn:aws:lambda:{REGION}:123456789012:function:hfqa-dev-claim"}},
    }
    stub.add_response(
        "list_pipeline_execution_steps",
        {"PipelineExecutionSteps": [claim]},
        {"PipelineExecutionArn": ARN, "SortOrder": "Ascending"},
    )
    with stub:
        [where] = step_logs(client, ARN, "ClaimManifest", settings_for("dev"))
    assert (where.log_group, where.stream_prefix) == (group, None)
    assert list(log_lines(logs, where)) == ["2026/12/01/[$LATEST]abc  claimed"]


def test_stop_an_executing_execution():
    client, stub = stubbed_sagemaker()
    stub.add_response(
        "describe_pipeline_execution", {"PipelineExecutionStatus": "Executing"}, {"PipelineExecutionArn": ARN}
    )
    stub.add_response(
        "stop_pipeline_execution",
        {"PipelineExecutionArn": ARN},
        {"PipelineExecutionArn": ARN, "ClientRequestToken": ANY},
    )
    with stub:
        assert stop(StubbedDeployment(client), ARN) == ARN  # type: ignore[arg-type]
        stub.assert_no_pending_responses()


def test_a_finished_execution_is_not_stopped():
    client, stub = stubbed_sagemaker()
    stub.add_response(
        "describe_pipeline_execution", {"PipelineExecutionStatus": "Succeeded"}, {"PipelineExecutionArn": ARN}
    )
    with stub, pytest.raises(ToolError, match="execution abc123 is Succeeded: only an executing execution"):
        stop(StubbedDeployment(client), ARN)  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_make_stop_of_a_local_run_stops_its_job_and_records_it_stopped(tmp_path):
    runner = subprocess.Popen(
        [sys.executable, "-m", "tests.local_runner.stoppable_run", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ENTRY_POINT_PYTHONPATH},
        stdout=subprocess.DEVNULL,
    )
    executions = tmp_path / "executions"
    deadline = time.monotonic() + 60
    while not list(executions.glob(f"local-*/{STEP}/{JOB_PID_FILE}")) and time.monotonic() < deadline:
        time.sleep(0.2)
    [job_pid_file] = executions.glob(f"local-*/{STEP}/{JOB_PID_FILE}")
    job_pid, execution_id = int(job_pid_file.read_text()), job_pid_file.parents[1].name
    assert find_run(executions, execution_id).status == "Executing"  # type: ignore[union-attr]

    result = run_cli(
        "tools.executions", "stop", "--execution", execution_id, "--work-dir", str(tmp_path), env={}, timeout=90
    )

    assert result.returncode == 0, result.stderr
    assert f"local run {execution_id}: Stopped" in result.stdout
    assert runner.wait(timeout=30) == 1
    assert not _alive(job_pid)
    run = find_run(executions, execution_id)
    assert run is not None and run.record is not None and run.runner_pid is None
    assert (run.record.status, [(s.name, s.status) for s in run.record.steps]) == ("Stopped", [(STEP, "Stopped")])
    job_temp_dir = Path((job_pid_file.parent / JOB_TMP_FILE).read_text())
    assert job_temp_dir.parent == job_pid_file.parent and not job_temp_dir.exists()  # its own TMPDIR, removed
    again = run_cli("tools.executions", "stop", "--execution", execution_id, "--work-dir", str(tmp_path), env={})
    assert_one_line_error(again, f"local run {execution_id} is Stopped: only a running local run")


def test_make_stop_of_an_unknown_local_run_is_one_line(tmp_path):
    result = run_cli(
        "tools.executions", "stop", "--execution", "local-000000000000", "--work-dir", str(tmp_path), env={}
    )
    assert_one_line_error(result, "no local run 'local-000000000000'", "make runs")
