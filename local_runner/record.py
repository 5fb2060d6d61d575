"""The run record (reporting/record.py) of a local execution, written at the end of every local run."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from qa.outputs import CLAIM_MANIFEST_SHA256
from tasks import DEFAULT_TASK

from config.paths import LOCAL_EXECUTIONS
from local_runner.runner import ExecutionResult
from local_runner.store import LocalObjectStore
from reporting.local_runs import local_execution_arn
from reporting.record import REPORT_IMAGE, JobCost, RunRecord, StepRecord, read_log_history, save, task_metrics
from reporting.report import report_line, write_report
from reporting.tracking import local_store_uri, track


def _iso(epoch: float) -> str | None:
    """To the millisecond: a start cut to the second moved a step up to 1 s earlier than its exact duration's
    predecessor ended (the timeline drew FineTune starting inside ValidateAndTokenize)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds") if epoch else None


def record_from_local_result(
    result: ExecutionResult, pipeline_name: str, store: LocalObjectStore, task: str = DEFAULT_TASK
) -> RunRecord:
    """What the report and the tracker need of a local execution of a pipeline of `task`. A local job's billable
    time is its wall time here: its cost is that time priced as the instances the definition asks for."""
    steps = [
        StepRecord(s.name, s.type, s.status, _iso(s.started_at), s.seconds, s.attempts, s.detail) for s in result.steps
    ]
    seconds = {s.name: s.seconds for s in result.steps}
    jobs = [
        JobCost(name, r.kind, r.instance_type, r.instance_count, seconds.get(name, 0.0), r.spot)
        for name, r in result.resources.items()
    ]
    log_history = []
    if result.model_data and store.path(result.model_data).is_file():
        with store.path(result.model_data).open("rb") as archive:
            log_history = read_log_history(archive)
    # FineTune's FinalMetricDataList (eval:f1, ...) or an evaluation property file (f1, ...); else the log
    # history's last evaluation (eval_f1, ...).
    metrics = task_metrics(result.metrics, task)
    evaluations = (found for found in (task_metrics(entry, task) for entry in reversed(log_history)) if found)
    metrics = metrics or next(evaluations, {})
    package = result.model_package
    return RunRecord(
        execution_id=result.execution_id,
        execution_arn=local_execution_arn(pipeline_name, result.execution_id),
        pipeline_name=pipeline_name,
        source="local",
        status=result.status,
        started_at=steps[0].started_at if steps else None,
        parameters={k: str(v) for k, v in result.parameters.items()},
        steps=steps,
        jobs=jobs,
        metrics=metrics,
        log_history=log_history,
        model_package_arn=package.arn if package else None,
        approval_status=package.approval_status if package else None,
        model_data=result.model_data,
        failure=result.failure,
        dataset_sha256=result.outputs.get(CLAIM_MANIFEST_SHA256) or None,
        task=task,
    )


def save_local_record(
    result: ExecutionResult, pipeline_name: str, store: LocalObjectStore, work_dir: Path, task: str = DEFAULT_TASK
) -> tuple[RunRecord, Path]:
    """The execution's record (execution.json) as it stands, in its folder: written as the run starts and after
    each step too, so that every run folder has one (a killed run's says where it was); the record and folder."""
    record = record_from_local_result(result, pipeline_name, store, task)
    folder = work_dir / LOCAL_EXECUTIONS / result.execution_id
    save(record, folder)
    return record, folder


def report_local_run(
    result: ExecutionResult,
    pipeline_name: str,
    store: LocalObjectStore,
    work_dir: Path,
    out: Callable[[str], None],
    task: str = DEFAULT_TASK,
) -> Path:
    """The end of every local run: its record (execution.json), its report (HTML + PNG) in its folder, and
    its MLflow run in the local store (experiment: the pipeline's name). The report's path."""
    record, folder = save_local_record(result, pipeline_name, store, work_dir, task)
    path = write_report(record, folder)
    out(report_line(path))
    out(track(record, local_store_uri(work_dir), pipeline_name, (path, path.with_name(REPORT_IMAGE))))
    return path
