"""Start, retry and follow pipeline executions from the command line.

    python -m tools.executions start --name sample-squad --version v1 [--params "Epochs=3 LearningRate=3e-5"]
    python -m tools.executions retry --execution <execution arn or id>
    python -m tools.executions logs --execution <execution arn or id> [--step FineTune]
    python -m tools.executions stop --execution <execution arn or id | local-<id>>

(make start / make retry / make logs / make stop.) `start` resolves the manifest's S3 version id with HeadObject (the
trigger passes it from the S3 event) and checks every PARAMS value against the deployed pipeline's parameter
types and allowed values, then the whole execution's values against the rules its first step, ClaimManifest,
applies (qa/parameter_rules.py: Epochs within (0, limits.max_epochs], F1Threshold within its range, BaseModelUri
under base-models/, ...), and the limits on executions per day and at once (ListPipelineExecutions), before
StartPipelineExecution, so a typo, an out-of-range value or one execution too many fails here and starts nothing.
`retry` applies the parameter rules to the execution's own values: a retry of an execution they stopped would stop
the same way (the claim counts a retried execution where it started, so the limits are the claim's to apply).
"""

from __future__ import annotations

import difflib
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa.outputs import INPUT_BOUNDS
from qa.parameter_rules import execution_limit_error, parameter_error, recent_executions

from config import Settings
from config.aws_locations import JOB_LOG_GROUPS, execution_console_url
from config.paths import LOCAL_EXECUTION_PREFIX, LOCAL_RUNS
from pipeline_steps import names
from reporting.local_runs import EXECUTING, executions_dir, find_run
from reporting.record import execution_parameters
from tools.deployment import (
    Deployment,
    ToolParser,
    add_pipeline_arguments,
    check_name,
    fail,
    is_sagemaker_not_found,
    load_deployment,
    not_found_in_region,
    pipeline_definition,
    run_tool,
    short,
)

# Execution parameters the upload determines: the trigger copies them from the S3 event (bucket name, object key,
# version id); `make start` and an upload with PARAMS set them from the manifest they start.
MATCHED_PARAMETERS = (names.DATASET_BUCKET, names.MANIFEST_KEY, names.MANIFEST_VERSION_ID)
# How each pipeline parameter type's value is checked (the definition's "Type"; SageMaker passes values as
# strings): https://docs.aws.amazon.com/sagemaker/latest/dg/build-and-manage-parameters.html
BOOLEANS = ("true", "false")
# Executions in these states have nothing left to retry.
NOT_RETRYABLE = ("Executing", "Stopping", "Succeeded")
LOG_EVENTS_PAGE = 10_000  # GetLogEvents returns at most 10,000 events per call
# A pipeline parameter's value in StartPipelineExecution: at most 1,024 characters (Parameter, Value:
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_Parameter.html).
PARAMETER_VALUE_MAX_LENGTH = 1024
# A local run's job gets its SIGTERM and a grace period (local_runner/jobs.py STOP_GRACE_SECONDS) before SIGKILL.
LOCAL_STOP_WAIT_SECONDS = 60


@dataclass(frozen=True)
class PipelineParameter:
    name: str
    type: str  # String | Integer | Float | Boolean
    default: Any
    allowed: tuple[str, ...] = ()  # EnumValues of a String parameter


def deployed_definition(sagemaker: Any, pipeline_name: str, region: str) -> dict[str, Any]:
    """The deployed pipeline's definition; fails when the pipeline is not deployed in `region`."""
    definition = pipeline_definition(sagemaker, pipeline_name)
    if definition is None:
        fail(f"pipeline {pipeline_name} not found in {region}: check AWS_REGION or make deploy")
    return definition


def declared_parameters(definition: dict[str, Any]) -> dict[str, PipelineParameter]:
    """A definition's parameters by name."""
    return {
        p["Name"]: PipelineParameter(p["Name"], p["Type"], p.get("DefaultValue"), tuple(p.get("EnumValues", ())))
        for p in definition.get("Parameters", [])
    }


def claim_event(definition: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The event ClaimManifest receives in an execution of `definition` with parameter `values` (defaults for the
    rest): its step arguments, each parameter reference replaced by the execution's value; references known only
    at run time (the execution's ARN) are left out."""
    claim = next((step for step in definition.get("Steps", []) if step.get("Name") == names.CLAIM_STEP), None)
    if claim is None:
        fail(f"the deployed pipeline has no {names.CLAIM_STEP} step: deploy this checkout (make deploy)")
    given = {name: parameter.default for name, parameter in declared_parameters(definition).items()} | values
    event = {}
    for name, argument in claim["Arguments"].items():
        reference = argument.get("Get", "") if isinstance(argument, dict) else None
        if reference is None:
            event[name] = argument
        elif reference.startswith("Parameters.") and reference.removeprefix("Parameters.") in given:
            event[name] = given[reference.removeprefix("Parameters.")]
    return event


def refuse_what_the_claim_refuses(definition: dict[str, Any], values: dict[str, Any], then: str) -> None:
    """Fail with the claim step's one line (qa.parameter_rules) when it would stop an execution with `values`."""
    try:
        problem = parameter_error(claim_event(definition, values))
    except KeyError as err:
        fail(f"the deployed {names.CLAIM_STEP} step has no {err.args[0]} input: deploy this checkout (make deploy)")
    if problem:
        fail(f"{problem} {then}")


def refuse_past_the_execution_limits(sagemaker: Any, pipeline_name: str, event: dict[str, Any]) -> None:
    """Fail with the claim step's one line (qa.parameter_rules) when an execution started now would be past the
    deployed limits on executions per day and at once (counted as the claim counts them)."""
    now = time.time()
    earlier = [(started, status) for started, status, _ in recent_executions(sagemaker, pipeline_name, now)]
    try:
        problem = execution_limit_error(event[INPUT_BOUNDS], now, earlier)
    except KeyError as err:  # a definition deployed before the limits
        fail(f"the deployed {names.CLAIM_STEP} step has no {err.args[0]} input: deploy this checkout (make deploy)")
    if problem:
        fail(f"{problem} Nothing started ({names.CLAIM_STEP} would stop it).")


def parse_params(text: str, defined: dict[str, PipelineParameter]) -> dict[str, str]:
    """`Name=value Name=value` checked against the parameters' types and allowed values; one line per problem."""
    values: dict[str, str] = {}
    for item in text.split():
        name, sep, value = item.partition("=")
        if not sep or not name:
            fail(f'PARAMS item {short(item)} is not Name=value (e.g. PARAMS="Epochs=3 LearningRate=3e-5")')
        if name in values:
            fail(f"PARAMS {short(name)} is given twice: give each parameter once")
        if name in MATCHED_PARAMETERS:
            fail(f"PARAMS {name}: set by make start from NAME and VERSION; leave it out")
        parameter = defined.get(name)
        if parameter is None:
            close = difflib.get_close_matches(name, [n for n in defined if n not in MATCHED_PARAMETERS], n=1)
            hint = f"did you mean {close[0]}?" if close else f"the pipeline's parameters: {', '.join(sorted(defined))}"
            fail(f"PARAMS {short(name)}: the pipeline has no such parameter ({hint})")
        values[name] = checked_value(parameter, value)
    return values


def checked_value(parameter: PipelineParameter, value: str) -> str:
    if len(value) > PARAMETER_VALUE_MAX_LENGTH:
        fail(
            f"PARAMS {parameter.name}={short(value)} has {len(value)} characters: at most {PARAMETER_VALUE_MAX_LENGTH}"
        )
    rule = {"Integer": "a whole number", "Float": "a number", "Boolean": "true or false"}.get(parameter.type)
    try:
        if parameter.type == "Integer":
            int(value)
        elif parameter.type == "Float":
            float(value)
        elif parameter.type == "Boolean" and value.lower() not in BOOLEANS:
            raise ValueError(value)
    except ValueError:
        fail(f"PARAMS {parameter.name}={short(value)}: {parameter.name} is {parameter.type}, give {rule}")
    if parameter.allowed and value not in parameter.allowed:
        fail(f"PARAMS {parameter.name}={short(value)}: allowed values are {', '.join(parameter.allowed)}")
    return value.lower() if parameter.type == "Boolean" else value


def current_version_id(s3: Any, bucket: str, key: str) -> str | None:
    """The current S3 version id of the manifest at `key` (what the trigger would pass as ManifestVersionId); None
    when there is no such object."""
    from botocore.exceptions import ClientError

    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except ClientError as err:
        if err.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            return None
        raise
    if "VersionId" not in head:
        fail(f"s3://{bucket} gives no object version ids: the datasets bucket must be versioned (make deploy)")
    return str(head["VersionId"])


def execution_values(
    deployment: Deployment, definition: dict[str, Any], params: str, key: str, version_id: str, then: str
) -> dict[str, str]:
    """The values of an execution of the manifest at `key` (version `version_id`) with `params`, after every check
    of parse_params, ClaimManifest's parameter rules and the execution limits; a refusal ends with `then`."""
    defined = declared_parameters(definition)
    values = parse_params(params, defined)
    dataset = {
        names.DATASET_BUCKET: deployment.bucket("datasets"),
        names.MANIFEST_KEY: key,
        names.MANIFEST_VERSION_ID: version_id,
    }
    values.update({k: v for k, v in dataset.items() if k in defined})
    refuse_what_the_claim_refuses(definition, values, then)
    refuse_past_the_execution_limits(
        deployment.client("sagemaker"), deployment.settings.pipeline_name, claim_event(definition, values)
    )
    return values


def start_manifest(
    deployment: Deployment, key: str, version_id: str, params: str, definition: dict[str, Any] | None = None
) -> str:
    """Start one execution of the manifest at `key`, version `version_id`, with `params` (checked against
    `definition`, default: the deployed one); its ARN. ClaimManifest claims each manifest version once: a second
    start of the same one ends there as a duplicate."""
    pipeline_name = deployment.settings.pipeline_name
    sagemaker = deployment.client("sagemaker")
    definition = definition or deployed_definition(sagemaker, pipeline_name, deployment.region)
    then = f"Nothing started ({names.CLAIM_STEP} would stop it)."
    values = execution_values(deployment, definition, params, key, version_id, then)
    # ClientRequestToken: 32 to 128 characters, "to ensure the idempotency of the operation" (a uuid4 hex has 32):
    # https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StartPipelineExecution.html
    response = sagemaker.start_pipeline_execution(
        PipelineName=pipeline_name,
        PipelineParameters=[{"Name": k, "Value": v} for k, v in values.items()],
        ClientRequestToken=uuid.uuid4().hex,
    )
    return str(response["PipelineExecutionArn"])


def start(deployment: Deployment, name: str, version: str, params: str, env_name: str) -> str:
    """Start an execution for dataset NAME/VERSION with `params`: of its held manifest (an upload with NO_RUN=1 or
    PARAMS) when it has one, else of the manifest the trigger started; its ARN."""
    check_name("--name", name)
    check_name("--version", version)
    sagemaker = deployment.client("sagemaker")
    definition = deployed_definition(sagemaker, deployment.settings.pipeline_name, deployment.region)
    parse_params(params, declared_parameters(definition))  # a typo fails before any S3 call
    bucket, s3 = deployment.bucket("datasets"), deployment.client("s3")
    datasets = deployment.settings.datasets
    for key in (datasets.manifest_key(name, version, held=True), datasets.manifest_key(name, version)):
        version_id = current_version_id(s3, bucket, key)
        if version_id is not None:
            return start_manifest(deployment, key, version_id, params, definition)
    fail(f"no manifest at s3://{bucket}/{key}: upload the dataset first (make upload-dataset ENV={env_name})")


def execution_arn(deployment: Deployment, execution: str) -> str:
    """An execution ARN from an ARN or the id at its end (the pipeline's ARN + /execution/<id>)."""
    if execution.startswith("arn:"):
        return execution
    if not execution.isalnum():
        fail(f"--execution {short(execution)}: pass an execution ARN or the id at its end (see make runs)")
    from botocore.exceptions import ClientError

    pipeline_name = deployment.settings.pipeline_name
    try:
        pipeline = deployment.client("sagemaker").describe_pipeline(PipelineName=pipeline_name)
    except ClientError as err:
        if not is_sagemaker_not_found(err):
            raise
        not_found_in_region(f"pipeline {pipeline_name}", deployment.region, "make deploy")
    return f"{pipeline['PipelineArn']}/execution/{execution}"


def retry(deployment: Deployment, arn: str) -> str:
    """RetryPipelineExecution of a failed or stopped execution (it resumes from the failed steps):
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_RetryPipelineExecution.html"""
    from botocore.exceptions import ClientError

    sagemaker = deployment.client("sagemaker")
    try:
        status = sagemaker.describe_pipeline_execution(PipelineExecutionArn=arn)["PipelineExecutionStatus"]
    except ClientError as err:
        if not is_sagemaker_not_found(err):
            raise
        # arn:<partition>:sagemaker:<region>:<account>:pipeline/<name>/execution/<id>
        arn_region = arn.split(":")[3] if arn.count(":") >= 5 else ""
        named = f" (its ARN names {arn_region})" if arn_region not in ("", deployment.region) else ""
        what = f"execution {arn.rsplit('/', 1)[-1]}{named}"
        not_found_in_region(what, deployment.region, "pass an execution from make runs")
    execution = arn.rsplit("/", 1)[-1]
    if status in NOT_RETRYABLE:
        fail(f"execution {execution} is {status}: only a failed or stopped execution can be retried")
    definition = sagemaker.describe_pipeline_definition_for_execution(PipelineExecutionArn=arn)["PipelineDefinition"]
    refuse_what_the_claim_refuses(
        json.loads(definition),
        execution_parameters(sagemaker, arn),
        f"Execution {execution} ran with it, and a retry would stop the same way: start a new one (make start).",
    )
    response = sagemaker.retry_pipeline_execution(PipelineExecutionArn=arn, ClientRequestToken=uuid.uuid4().hex)
    return str(response["PipelineExecutionArn"])


def stop(deployment: Deployment, arn: str) -> str:
    """StopPipelineExecution of an executing execution; it ends Stopped once its running step stops (a Lambda
    step runs to its end first): https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StopPipelineExecution.html"""
    sagemaker = deployment.client("sagemaker")
    status = sagemaker.describe_pipeline_execution(PipelineExecutionArn=arn)["PipelineExecutionStatus"]
    if status != EXECUTING:
        fail(f"execution {arn.rsplit('/', 1)[-1]} is {status}: only an executing execution can be stopped")
    # ClientRequestToken: 32-128 characters, idempotent (the API page above).
    response = sagemaker.stop_pipeline_execution(PipelineExecutionArn=arn, ClientRequestToken=uuid.uuid4().hex)
    return str(response["PipelineExecutionArn"])


def stop_local(executions: Path, execution_id: str, wait_seconds: float = LOCAL_STOP_WAIT_SECONDS) -> str:
    """SIGTERM to the runner of a local run: it stops its job's processes and records the run Stopped (as
    StopPipelineExecution ends an execution); the status it recorded."""
    run = find_run(executions, execution_id)
    if run is None:
        fail(f"no local run {short(execution_id)} under {executions}: pass one from make runs")
    if run.runner_pid is None:
        fail(f"local run {execution_id} is {run.status}: only a running local run can be stopped")
    os.kill(run.runner_pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_seconds
    while (run := find_run(executions, execution_id)) is not None and run.runner_pid is not None:
        if time.monotonic() > deadline:
            fail(f"local run {execution_id}: its runner (process {run.runner_pid}) still runs {wait_seconds:.0f} s on")
        time.sleep(0.5)
    return run.status if run is not None else "Unrecorded"


@dataclass(frozen=True)
class StepLogs:
    step: str
    log_group: str
    stream_prefix: str | None  # a job's streams start with "<job name>/"; None: a Lambda step (by time)
    start_ms: int | None = None
    end_ms: int | None = None


def step_logs(sagemaker: Any, arn: str, step: str | None, settings: Settings) -> list[StepLogs]:
    """Where each job step's logs are (CloudWatch log group and stream prefix), in step order: a job's in SageMaker's
    group, a Lambda step's in its function's own group (Settings.function_log_group)."""
    found = []
    for page in sagemaker.get_paginator("list_pipeline_execution_steps").paginate(
        PipelineExecutionArn=arn, SortOrder="Ascending"
    ):
        for item in page["PipelineExecutionSteps"]:
            metadata = item.get("Metadata", {})
            if step is not None and item["StepName"] != step:
                continue
            kind = next((k for k in JOB_LOG_GROUPS if k in metadata), None)
            if kind is not None:
                job = metadata[kind]["Arn"].rsplit("/", 1)[-1]
                found.append(StepLogs(item["StepName"], JOB_LOG_GROUPS[kind], f"{job}/"))
            elif "Lambda" in metadata:
                times = [int(item[k].timestamp() * 1000) if k in item else None for k in ("StartTime", "EndTime")]
                found.append(StepLogs(item["StepName"], settings.function_log_group(item["StepName"]), None, *times))
    return found


def log_lines(logs: Any, where: StepLogs) -> Iterator[str]:
    """Every event of the step's log streams, oldest first, as `<stream>  <message>`."""
    if where.stream_prefix is None:
        kwargs = {k: v for k, v in (("startTime", where.start_ms), ("endTime", where.end_ms)) if v is not None}
        for page in logs.get_paginator("filter_log_events").paginate(logGroupName=where.log_group, **kwargs):
            for event in page["events"]:
                yield f"{event['logStreamName']}  {event['message'].rstrip()}"
        return
    streams = logs.get_paginator("describe_log_streams").paginate(
        logGroupName=where.log_group, logStreamNamePrefix=where.stream_prefix
    )
    for stream in (s["logStreamName"] for page in streams for s in page["logStreams"]):
        token = None
        while True:
            page = logs.get_log_events(
                logGroupName=where.log_group,
                logStreamName=stream,
                startFromHead=True,
                limit=LOG_EVENTS_PAGE,
                **({"nextToken": token} if token else {}),
            )
            for event in page["events"]:
                yield f"{stream}  {event['message'].rstrip()}"
            if page.get("nextForwardToken") in (None, token):  # the same token again: the end of the stream
                break
            token = page["nextForwardToken"]


def print_logs(deployment: Deployment, arn: str, step: str | None) -> None:
    from botocore.exceptions import ClientError

    places = step_logs(deployment.client("sagemaker"), arn, step, deployment.settings)
    if not places:
        which = f"step named {short(step)}" if step else "job or Lambda steps"
        fail(f"execution {arn.rsplit('/', 1)[-1]} has no {which} (yet): make runs lists its steps")
    logs = deployment.client("logs")
    for where in places:
        streams = where.stream_prefix or "(the events between the step's start and end)"
        print(f"== {where.step}: {where.log_group} {streams}")
        try:
            for line in log_lines(logs, where):
                print(line)
        except ClientError as err:
            if err.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
            print("   (no logs yet: the log group does not exist)")


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    start_parser = commands.add_parser("start", help="start an execution for a dataset version")
    start_parser.add_argument("--name", required=True)
    start_parser.add_argument("--version", required=True)
    start_parser.add_argument("--params", default="", help='pipeline parameters: "Epochs=3 LearningRate=3e-5"')
    for name, text in (
        ("retry", "retry a failed execution"),
        ("logs", "print an execution's job logs"),
        ("stop", "stop an executing execution (AWS, or a local run: local-<id>)"),
    ):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--execution", required=True, help="execution ARN or id")
        if name == "logs":
            sub.add_argument("--step", help="only this step's logs")
        if name == "stop":
            sub.add_argument(
                "--work-dir", type=Path, default=LOCAL_RUNS, help="the local runs' folder (default: .local-runs)"
            )
    for sub in commands.choices.values():
        add_pipeline_arguments(sub)
    args = parser.parse_args(argv)

    if args.command == "stop" and args.execution.startswith(LOCAL_EXECUTION_PREFIX):
        status = stop_local(executions_dir(args.work_dir), args.execution)
        print(f"local run {args.execution}: {status}; its report: make report EXECUTION={args.execution}")
        return 0
    deployment = load_deployment(args.env, args.task)
    pipeline_name = deployment.settings.pipeline_name
    if args.command == "start":
        arn = start(deployment, args.name, args.version, args.params, args.env)
        print(f"started {arn}")
    elif args.command == "retry":
        arn = retry(deployment, execution_arn(deployment, args.execution))
        print(f"retrying {arn}")
    elif args.command == "stop":
        arn = stop(deployment, execution_arn(deployment, args.execution))
        print(f"stopping {arn}")
    else:
        print_logs(deployment, execution_arn(deployment, args.execution), args.step)
        return 0
    print(f"  console: {execution_console_url(deployment.region, pipeline_name, arn)}")
    where = deployment.make_values
    print(f"  follow it: make runs {where}; make logs EXECUTION={arn.rsplit('/', 1)[-1]} {where}")
    return 0


def cli() -> None:
    sys.exit(run_tool(main))


if __name__ == "__main__":
    cli()
