"""What recent pipeline executions did and cost: `make runs ENV=dev [LIMIT=10] [LOCAL=1]`.

First the local runs (.local-runs/executions: status, steps, the task's metrics, model package, the process of a
running one), then, unless --local, the AWS executions, newest first: status, trigger (the manifest key), per-step
durations, the training job's trained vs billed seconds (managed spot savings), its cost at list price
(config/costs.py), the validation metrics of its task by name (the gate's marked) and the registered model package
with its approval status. Read-only SageMaker calls with your credentials.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tasks import DEFAULT_TASK
from tasks import task as task_module

from config import Settings
from config.aws_locations import JOB_LOG_GROUPS, execution_console_url, job_console_url
from config.costs import PRICE_REGION, PRICES_AS_OF, list_price_usd
from config.paths import LOCAL_RUNS
from pipeline_steps import names
from reporting.local_runs import executions_dir, format_run, local_runs
from reporting.record import execution_parameters, hyperparameter_task, metrics_text, task_metrics
from tools.deployment import (
    ToolParser,
    add_pipeline_arguments,
    fail,
    load_deployment,
    pipeline_parameter_defaults,
    run_tool,
)

F1_IN_FAIL_MESSAGE = re.compile(r"Validation F1 ([0-9.]+) is below")
MAX_LIMIT = 100  # MaxResults of ListPipelineExecutions: 1-100
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ListPipelineExecutions.html


@dataclass
class StepRun:
    name: str
    status: str
    seconds: float | None
    attempts: int = 1
    detail: str = ""
    job: tuple[str, str] | None = None  # (TrainingJob | ProcessingJob | Lambda, job or function name)


@dataclass
class TrainingRun:
    instance_type: str
    instance_count: int
    spot: bool
    training_seconds: int
    billable_seconds: int
    interruptions: int
    task: str = DEFAULT_TASK  # its `task` hyperparameter
    metrics: dict[str, float] = field(default_factory=dict)  # the task's, when the job evaluates (FinalMetricDataList)

    @property
    def spot_savings(self) -> float | None:
        """AWS's definition: 1 - billable / training time (managed spot only)."""
        if not self.spot or not self.training_seconds:
            return None
        return 1 - self.billable_seconds / self.training_seconds

    @property
    def list_price_usd(self) -> float | None:
        return list_price_usd("training", self.instance_type, self.instance_count, self.billable_seconds)


@dataclass
class ExecutionReport:
    arn: str
    started: datetime
    status: str
    manifest_key: str | None
    steps: list[StepRun] = field(default_factory=list)
    training: TrainingRun | None = None
    task: str = DEFAULT_TASK
    metrics: dict[str, float] = field(default_factory=dict)  # the task's METRICS by name, its gate's from a Fail step
    model_package: str | None = None
    approval_status: str | None = None
    failure: str | None = None


def _job_name(arn: str) -> str:
    return arn.rsplit("/", 1)[-1]


def _seconds(step: dict[str, Any]) -> float | None:
    if "StartTime" in step and "EndTime" in step:
        return (step["EndTime"] - step["StartTime"]).total_seconds()
    return None


def training_run(sagemaker: Any, job_arn: str) -> TrainingRun:
    job = sagemaker.describe_training_job(TrainingJobName=_job_name(job_arn))
    resources = job["ResourceConfig"]
    transitions = job.get("SecondaryStatusTransitions", [])
    task = hyperparameter_task(job.get("HyperParameters", {}))
    final = {metric["MetricName"]: metric["Value"] for metric in job.get("FinalMetricDataList", [])}
    return TrainingRun(
        instance_type=resources["InstanceType"],
        instance_count=resources["InstanceCount"],
        spot=bool(job.get("EnableManagedSpotTraining")),
        training_seconds=job.get("TrainingTimeInSeconds", 0),
        billable_seconds=job.get("BillableTimeInSeconds", 0),
        interruptions=sum(1 for t in transitions if t["Status"] == "Interrupted"),
        task=task,
        metrics=task_metrics(final, task),
    )


def describe_execution(sagemaker: Any, summary: dict[str, Any]) -> ExecutionReport:
    arn = summary["PipelineExecutionArn"]
    parameters = execution_parameters(sagemaker, arn)
    report = ExecutionReport(
        arn=arn,
        started=summary["StartTime"],
        status=summary["PipelineExecutionStatus"],
        manifest_key=parameters.get(names.MANIFEST_KEY),
        failure=summary.get("PipelineExecutionFailureReason"),
    )
    steps = sagemaker.list_pipeline_execution_steps(PipelineExecutionArn=arn, SortOrder="Ascending")
    for step in steps["PipelineExecutionSteps"]:
        metadata = step.get("Metadata", {})
        run = StepRun(step["StepName"], step["StepStatus"], _seconds(step), step.get("AttemptCount", 1))
        kind = next((k for k in (*JOB_LOG_GROUPS, "Lambda") if k in metadata), None)
        if kind is not None:
            run.job = (kind, _job_name(metadata[kind]["Arn"]).rsplit(":", 1)[-1])
        if "TrainingJob" in metadata:
            report.training = training_run(sagemaker, metadata["TrainingJob"]["Arn"])
            # FineTune evaluates: eval:<name> of its FinalMetricDataList
            report.task, report.metrics = report.training.task, dict(report.training.metrics)
        elif "RegisterModel" in metadata:
            report.model_package = metadata["RegisterModel"]["Arn"]
            package = sagemaker.describe_model_package(ModelPackageName=report.model_package)
            report.approval_status = package["ModelApprovalStatus"]
        elif "Fail" in metadata:
            run.detail = metadata["Fail"].get("ErrorMessage", "")
            match = F1_IN_FAIL_MESSAGE.search(run.detail)
            if match:
                report.metrics.setdefault(str(task_module(report.task).GATE_METRIC), float(match.group(1)))
        elif "Condition" in metadata:
            run.detail = f"-> {metadata['Condition'].get('Outcome')}"
        run.detail = run.detail or step.get("FailureReason", "")
        report.steps.append(run)
    return report


def recent_executions(sagemaker: Any, pipeline_name: str, limit: int) -> list[ExecutionReport]:
    """The newest `limit` executions of `pipeline_name`, newest first."""
    response = sagemaker.list_pipeline_executions(
        PipelineName=pipeline_name, SortBy="CreationTime", SortOrder="Descending", MaxResults=limit
    )
    return [describe_execution(sagemaker, summary) for summary in response["PipelineExecutionSummaries"]]


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


def log_group(kind: str, step: str, settings: Settings) -> str:
    """The CloudWatch log group of a job (SageMaker's, shared by every job) or of the step's Lambda function (the
    project's own, named by the stacks: not /aws/lambda/<name>)."""
    return JOB_LOG_GROUPS.get(kind) or settings.function_log_group(step)


def format_jobs(report: ExecutionReport, region: str, settings: Settings) -> list[str]:
    lines = []
    for step in report.steps:
        if step.job is None:
            continue
        kind, name = step.job
        link = f" {job_console_url(region, kind, name)}" if kind in JOB_LOG_GROUPS else ""
        lines.append(f"  {step.name}: {kind} {name}, logs {log_group(kind, step.name, settings)}{link}")
    return lines


def format_report(report: ExecutionReport, region: str, settings: Settings) -> str:
    pipeline_name = report.arn.split(":pipeline/", 1)[-1].split("/", 1)[0]
    lines = [
        f"{report.started:%Y-%m-%d %H:%M} {report.status:10} {report.manifest_key or '(no ManifestKey)'}",
        f"  {report.arn}",
        f"  console: {execution_console_url(region, pipeline_name, report.arn)}",
        "  steps: "
        + ", ".join(
            f"{s.name} {s.status} {_duration(s.seconds)}" + (f" ({s.attempts} attempts)" if s.attempts > 1 else "")
            for s in report.steps
        ),
    ]
    training = report.training
    if training:
        savings = training.spot_savings
        cost = training.list_price_usd
        lines.append(
            f"  training: {training.instance_count} x {training.instance_type}, "
            f"{'spot' if training.spot else 'on-demand'}, trained {training.training_seconds:,} s, billed "
            f"{training.billable_seconds:,} s"
            + (f" ({savings:.0%} spot savings)" if savings is not None else "")
            + (f", {training.interruptions} spot interruption(s)" if training.interruptions else "")
            + (f"; ${cost:,.2f} at on-demand list price" if cost is not None else "; no list price recorded")
        )
    lines.append(f"  {report.task}: {metrics_text(report.metrics, report.task)}")
    if report.model_package:
        lines[-1] += f"; registered {report.model_package} ({report.approval_status})"
    lines.extend(format_jobs(report, region, settings))
    for step in (s for s in report.steps if s.status == "Failed"):
        lines.append(f"  {step.name}: {step.detail}")
    return "\n".join(lines)


def positive_limit(text: str) -> int:
    """--limit: 1 to MAX_LIMIT (ListPipelineExecutions' MaxResults range)."""
    value = int(text) if text.strip().isdigit() else 0
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"{text!r}: use a whole number from 1 to {MAX_LIMIT}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(__doc__)
    add_pipeline_arguments(parser)
    parser.add_argument("--limit", type=positive_limit, default=10, help=f"1 to {MAX_LIMIT} executions")
    parser.add_argument(
        "--work-dir", type=Path, default=LOCAL_RUNS, help="the local runs' folder (default: .local-runs)"
    )
    parser.add_argument("--local", action="store_true", help="only the local runs (no AWS call)")
    args = parser.parse_args(argv)

    runs = local_runs(executions_dir(args.work_dir))[: args.limit]
    if runs or args.local:
        print(f"local runs ({args.work_dir}):" if runs else f"no local runs under {args.work_dir}")
        for run in runs:
            print(format_run(run) + "\n")
    if args.local:
        return 0
    deployment = load_deployment(args.env, args.task)
    pipeline_name = deployment.settings.pipeline_name
    sagemaker = deployment.client("sagemaker")
    if pipeline_parameter_defaults(sagemaker, pipeline_name) is None:
        where = deployment.region
        fail(f"pipeline {pipeline_name} not found in {where}: check AWS_REGION or make deploy ENV={args.env}")
    reports = recent_executions(sagemaker, pipeline_name, args.limit)
    if not reports:
        print(f"no executions of {pipeline_name} yet")
    for report in reports:
        print(format_report(report, deployment.region, deployment.settings) + "\n")
    print(f"costs at on-demand LIST prices ({PRICE_REGION}, as of {PRICES_AS_OF}, config/costs.py)")
    return 0


def cli() -> None:
    sys.exit(run_tool(main))


if __name__ == "__main__":
    cli()
