"""One pipeline execution as the run report and the experiment tracker see it, from either source.

- a local run: the local runner writes `execution.json` (RECORD_FILE) into `.local-runs/executions/<id>/` at
  the end of the run (`record_from_local_result`), and `make report EXECUTION=local-...` reads it back;
- an AWS execution: `record_from_aws` reads ListPipelineExecutionSteps, the parameters, the training job
  (DescribeTrainingJob: instances, billable time, FinalMetricDataList), the registered package and the
  log history (qa/outputs.py LOG_HISTORY_FILE) inside the model archive.
Read-only calls, run where the network is allowed (a person's machine), never from inside an isolated job.
"""

from __future__ import annotations

import json
import tarfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from qa.outputs import CLAIM_MANIFEST_SHA256, LOG_HISTORY_FILE
from tasks import DEFAULT_TASK
from tasks import task as task_module

from config.costs import list_price_usd
from pipeline_steps import names

RECORD_FILE = "execution.json"  # the run record, beside the local run's job folders
REPORT_FILE = "report.html"
REPORT_IMAGE = "report.png"

# A task's metric <name> (its METRICS) as the training job reports it: `eval:<name>` in FinalMetricDataList (the
# metric definitions, qa.outputs' METRIC_EVAL_*), `eval_<name>` in the log history; an evaluation property file
# names it as it is.
METRIC_KEY_PREFIXES = ("", "eval:", "eval_")
TASK_HYPERPARAMETER = "task"  # the jobs' --task (training: this hyperparameter)
GATE_MARK = " (gate)"


def task_metrics(values: dict[str, Any], task: str) -> dict[str, float]:
    """The task's METRICS found in `values` (keyed by name, `eval:<name>` or `eval_<name>`), in METRICS order."""
    found = {}
    for name in task_module(task).METRICS:
        key = next((prefix + name for prefix in METRIC_KEY_PREFIXES if prefix + name in values), None)
        if key is not None:
            found[name] = float(values[key])
    return found


def metrics_text(metrics: dict[str, float], task: str) -> str:
    """`exact_match 84.50, f1 91.25 (gate)`: the metrics by their names in the task's order, the one the gate
    compares with F1Threshold marked; "-" without any."""
    gate = task_module(task).GATE_METRIC
    return ", ".join(f"{name} {value:.2f}{GATE_MARK if name == gate else ''}" for name, value in metrics.items()) or "-"


def hyperparameter_task(hyperparameters: dict[str, Any]) -> str:
    """The task a training job was given: its `task` hyperparameter, JSON-encoded text as SageMaker passes it or
    bare; a job without one predates tasks and trained tasks.DEFAULT_TASK, the jobs' own default."""
    value = hyperparameters.get(TASK_HYPERPARAMETER)
    if not isinstance(value, str):
        return DEFAULT_TASK
    try:
        decoded = json.loads(value)
    except json.JSONDecodeError:
        return value
    return decoded if isinstance(decoded, str) else value


@dataclass
class StepRecord:
    name: str
    type: str
    status: str
    started_at: str | None  # ISO 8601, UTC
    seconds: float | None
    attempts: int = 1
    detail: str = ""

    @property
    def ended_at(self) -> datetime | None:
        """When the step ended (None: not started or not ended)."""
        if not self.started_at or self.seconds is None:
            return None
        return datetime.fromisoformat(self.started_at) + timedelta(seconds=self.seconds)


@dataclass
class JobCost:
    """One job's instances and billed time, priced at the on-demand list price (config/costs.py)."""

    step: str
    kind: str  # "training" | "processing"
    instance_type: str
    instance_count: int
    billable_seconds: float
    spot: bool = False

    @property
    def list_price_usd(self) -> float | None:
        return list_price_usd(self.kind, self.instance_type, self.instance_count, self.billable_seconds)


@dataclass
class RunRecord:
    execution_id: str
    execution_arn: str
    pipeline_name: str
    source: str  # "local" | "aws"
    status: str
    started_at: str | None
    parameters: dict[str, str] = field(default_factory=dict)
    steps: list[StepRecord] = field(default_factory=list)
    jobs: list[JobCost] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)  # the task's METRICS by name (0-100), in its order
    log_history: list[dict[str, Any]] = field(default_factory=list)
    model_package_arn: str | None = None
    approval_status: str | None = None
    model_data: str | None = None
    failure: str | None = None
    dataset_sha256: str | None = None  # ClaimManifest's ManifestSha256: the claimed manifest version's bytes
    task: str = DEFAULT_TASK  # the task the pipeline trained (a record written before tasks: question answering)

    @property
    def gate_metric(self) -> str:
        """The metric the pipeline's gate compares with F1Threshold."""
        return str(task_module(self.task).GATE_METRIC)

    @property
    def ended_at(self) -> datetime | None:
        """When the last step ended (None: no step has)."""
        ends = [end for end in (step.ended_at for step in self.steps) if end is not None]
        return max(ends) if ends else None

    @property
    def f1_threshold(self) -> float | None:
        value = self.parameters.get(names.F1_THRESHOLD)
        return None if value in (None, "") else float(value)

    @property
    def list_price_usd(self) -> float | None:
        """The jobs' cost at list price; None when no job has a price in config/costs.py."""
        prices = [p for p in (job.list_price_usd for job in self.jobs) if p is not None]
        return sum(prices) if prices else None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        data = json.loads(text)
        data["steps"] = [StepRecord(**s) for s in data.get("steps", [])]
        data["jobs"] = [JobCost(**j) for j in data.get("jobs", [])]
        return cls(**data)


def read_log_history(archive: IO[bytes]) -> list[dict[str, Any]]:
    """LOG_HISTORY_FILE from a model.tar.gz stream (read in order, stopping at that member); [] without it."""
    with tarfile.open(fileobj=archive, mode="r|gz") as tar:
        for member in tar:
            if member.isfile() and member.name.removeprefix("./") == LOG_HISTORY_FILE:
                handle = tar.extractfile(member)
                return list(json.load(handle)) if handle else []
    return []


def save(record: RunRecord, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RECORD_FILE
    path.write_text(record.to_json(), encoding="utf-8")
    return path


def load_local(folder: Path) -> RunRecord:
    """The record a local run left in `folder` (.local-runs/executions/<id>)."""
    path = folder / RECORD_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run the pipeline locally first (make demo)")
    return RunRecord.from_json(path.read_text(encoding="utf-8"))


def _iso(value: datetime | None) -> str | None:
    # To the millisecond, as SageMaker reports them (whole seconds drew steps overlapping their predecessors).
    return None if value is None else value.astimezone(UTC).isoformat(timespec="milliseconds")


def _job_name(arn: str) -> str:
    return arn.rsplit("/", 1)[-1]


def _training(sagemaker: Any, s3: Any, step: str, arn: str, record: RunRecord) -> None:
    job = sagemaker.describe_training_job(TrainingJobName=_job_name(arn))
    resources = job["ResourceConfig"]
    record.jobs.append(
        JobCost(
            step,
            "training",
            resources["InstanceType"],
            resources["InstanceCount"],
            job.get("BillableTimeInSeconds", 0),
            bool(job.get("EnableManagedSpotTraining")),
        )
    )
    record.task = hyperparameter_task(job.get("HyperParameters", {}))
    final = {metric["MetricName"]: metric["Value"] for metric in job.get("FinalMetricDataList", [])}
    record.metrics.update(task_metrics(final, record.task))
    artifact = job.get("ModelArtifacts", {}).get("S3ModelArtifacts")
    if artifact:
        record.model_data = artifact
        bucket, _, key = artifact.removeprefix("s3://").partition("/")
        record.log_history = read_log_history(s3.get_object(Bucket=bucket, Key=key)["Body"])


def _processing(sagemaker: Any, step: str, arn: str, record: RunRecord) -> None:
    job = sagemaker.describe_processing_job(ProcessingJobName=_job_name(arn))
    cluster = job["ProcessingResources"]["ClusterConfig"]
    start, end = job.get("ProcessingStartTime"), job.get("ProcessingEndTime")
    seconds = (end - start).total_seconds() if start and end else 0.0
    record.jobs.append(JobCost(step, "processing", cluster["InstanceType"], cluster["InstanceCount"], seconds))


def execution_parameters(sagemaker: Any, execution_arn: str) -> dict[str, str]:
    """Name -> value of the parameters an execution ran with, every page of them. ListPipelineParametersForExecution
    may leave out PipelineParameters (not a required member of its response in the SageMaker API model) and returns
    at most 100 per page (MaxResults)."""
    paginator = sagemaker.get_paginator("list_pipeline_parameters_for_execution")
    pages = paginator.paginate(PipelineExecutionArn=execution_arn)
    return {p["Name"]: str(p["Value"]) for page in pages for p in page.get("PipelineParameters", [])}


def record_from_aws(sagemaker: Any, s3: Any, execution_arn: str) -> RunRecord:
    """The record of one AWS pipeline execution (read-only SageMaker and S3 calls)."""
    execution = sagemaker.describe_pipeline_execution(PipelineExecutionArn=execution_arn)
    parameters = execution_parameters(sagemaker, execution_arn)
    record = RunRecord(
        execution_id=_job_name(execution_arn),
        execution_arn=execution_arn,
        pipeline_name=execution_arn.split(":pipeline/", 1)[-1].split("/", 1)[0],
        source="aws",
        status=execution["PipelineExecutionStatus"],
        started_at=_iso(execution.get("CreationTime")),
        parameters=parameters,
        failure=execution.get("FailureReason"),
    )
    pages = sagemaker.get_paginator("list_pipeline_execution_steps").paginate(
        PipelineExecutionArn=execution_arn, SortOrder="Ascending"
    )
    for step in (s for page in pages for s in page["PipelineExecutionSteps"]):
        name, metadata = step["StepName"], step.get("Metadata", {})
        start, end = step.get("StartTime"), step.get("EndTime")
        kind = next(iter(metadata), "-")
        detail = step.get("FailureReason", "")
        if "TrainingJob" in metadata:
            _training(sagemaker, s3, name, metadata["TrainingJob"]["Arn"], record)
        elif "ProcessingJob" in metadata:
            _processing(sagemaker, name, metadata["ProcessingJob"]["Arn"], record)
        elif "RegisterModel" in metadata:
            record.model_package_arn = metadata["RegisterModel"]["Arn"]
            package = sagemaker.describe_model_package(ModelPackageName=record.model_package_arn)
            record.approval_status = package["ModelApprovalStatus"]
            detail = f"{record.model_package_arn} ({record.approval_status})"
        elif "Condition" in metadata:
            detail = f"-> {metadata['Condition'].get('Outcome')}"
        elif "Fail" in metadata:
            detail = metadata["Fail"].get("ErrorMessage", detail)
        elif "Lambda" in metadata:  # OutputParameters: [{Name, Value}], API_LambdaStepMetadata
            # https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_LambdaStepMetadata.html
            outputs = {p["Name"]: p.get("Value") for p in metadata["Lambda"].get("OutputParameters", [])}
            record.dataset_sha256 = outputs.get(CLAIM_MANIFEST_SHA256) or record.dataset_sha256
        record.steps.append(
            StepRecord(
                name,
                kind,
                step["StepStatus"],
                _iso(start),
                (end - start).total_seconds() if start and end else None,
                step.get("AttemptCount", 1),
                detail,
            )
        )
    return record
