"""The run report of one pipeline execution: `make report EXECUTION=<local id | AWS execution ARN or id>`.

Writes the report of reporting/report.py (HTML with its figure inline, and the figure as a PNG beside it) and
records the execution in MLflow. A local run is read from its execution.json; an AWS execution with read-only
SageMaker and S3 calls with your credentials.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from config.paths import LOCAL_EXECUTION_PREFIX, LOCAL_EXECUTIONS, LOCAL_RUNS, PROJECT_ROOT
from reporting.local_runs import LocalRun, find_run, local_execution_arn
from reporting.record import REPORT_IMAGE, RunRecord
from reporting.report import report_line, write_report
from reporting.tracking import TrackingUnavailable, managed_server_arn, track, tracking_uri

LOCAL_EXECUTIONS_DIR = LOCAL_RUNS / LOCAL_EXECUTIONS


def execution_arn(sagemaker: Any, pipeline_name: str, execution: str) -> str:
    """`execution` as an ARN: given, or the id of an execution of `pipeline_name`."""
    if execution.startswith("arn:"):
        return execution
    summaries = sagemaker.get_paginator("list_pipeline_executions").paginate(PipelineName=pipeline_name)
    for summary in (s for page in summaries for s in page["PipelineExecutionSummaries"]):
        if summary["PipelineExecutionArn"].rsplit("/", 1)[-1] == execution:
            return str(summary["PipelineExecutionArn"])
    from tools.deployment import fail

    fail(f"no execution {execution!r} of pipeline {pipeline_name}: pass an id or ARN from `make runs`")


def local_record(run: LocalRun, pipeline_name: str) -> RunRecord:
    """What a local run folder says of its run: its record, with the status as it stands (a run whose runner was
    killed stays Executing in its record); for a folder without a record, only its id, status and start."""
    if run.record is None:
        return RunRecord(
            execution_id=run.execution_id,
            execution_arn=local_execution_arn(pipeline_name, run.execution_id),
            pipeline_name=pipeline_name,
            source="local",
            status=run.status,
            started_at=run.started_at,
            failure="the run folder holds no execution.json: its runner ended before it wrote one",
        )
    return dataclasses.replace(run.record, status=run.status)


def main(argv: list[str] | None = None) -> int:
    from tools.deployment import add_pipeline_arguments, fail, settings_for

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--execution",
        help="local-<id> (a local run, stopped or killed too), an AWS execution ARN or id; default: newest local run",
    )
    add_pipeline_arguments(parser)
    parser.add_argument(
        "--work-dir", type=Path, default=LOCAL_EXECUTIONS_DIR, help="local runs (default .local-runs/executions)"
    )
    parser.add_argument("--output", type=Path, help="folder for the report (default: the local run's, or reports/<id>)")
    parser.add_argument("--no-tracking", action="store_true", help="do not record the execution in MLflow")
    args = parser.parse_args(argv)

    execution = args.execution
    if execution is None or execution.startswith(LOCAL_EXECUTION_PREFIX):
        run = find_run(args.work_dir, execution)
        if run is None:
            fail(
                f"no local run {execution or ''} under {args.work_dir}: run `make demo` first, or pass an AWS execution"
            )
        settings = settings_for(args.env, args.task)
        folder, record = run.folder, local_record(run, settings.pipeline_name)
        server_arn = None
    else:
        from reporting.record import record_from_aws
        from tools.deployment import load_deployment

        deployment = load_deployment(args.env, args.task)
        settings = deployment.settings
        sagemaker = deployment.client("sagemaker")
        arn = execution_arn(sagemaker, settings.pipeline_name, execution)
        record = record_from_aws(sagemaker, deployment.client("s3"), arn)
        folder = PROJECT_ROOT / "reports" / record.execution_id
        server_arn = managed_server_arn(settings, deployment.account, deployment.region)
    path = write_report(record, args.output or folder)
    print(report_line(path))
    if not args.no_tracking:
        uri = tracking_uri(settings, args.work_dir.parent, server_arn)
        try:
            print(track(record, uri, settings.experiment_name, (path, path.with_name(REPORT_IMAGE))))
        except TrackingUnavailable as err:
            fail(str(err))
    return 0


if __name__ == "__main__":
    from tools.deployment import run_tool

    sys.exit(run_tool(main))
