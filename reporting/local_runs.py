"""The local runs of a work dir (.local-runs/executions/<id>/): what `make runs`, `make report`, `make stop`,
`make register` and `make clean-runs` read (here, below both the tools and the local runner, which write them).
Each run writes its record (execution.json) as it starts and after every step (local_runner/record.py), and its
runner's process id while it runs (RUNNER_PID_FILE)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from config.paths import LOCAL_EXECUTION_PREFIX, LOCAL_EXECUTIONS
from reporting.record import RECORD_FILE, RunRecord, load_local, metrics_text

EXECUTING = "Executing"
RUNNER_PID_FILE = "runner.pid"  # in the execution's folder while it runs: whom `make stop` signals
LOCAL_ARN_PREFIX = "arn:aws:sagemaker:local:000000000000:pipeline"  # + /<pipeline>/execution/<id>


def local_execution_arn(pipeline_name: str, execution_id: str) -> str:
    """The ARN a local run goes by (the local runner's PipelineExecutionArn, its record, `make report`)."""
    return f"{LOCAL_ARN_PREFIX}/{pipeline_name}/execution/{execution_id}"


@dataclass(frozen=True)
class LocalRun:
    folder: Path
    record: RunRecord | None  # None: a folder without execution.json (a run killed before it wrote one)
    runner_pid: int | None  # the process still running it

    @property
    def execution_id(self) -> str:
        return self.folder.name

    @property
    def status(self) -> str:
        """The recorded status; an Executing run whose runner is gone was killed (SIGKILL) where it stands."""
        if self.record is None:
            return EXECUTING if self.runner_pid else "Unrecorded"
        if self.record.status == EXECUTING and self.runner_pid is None:
            return "Killed"
        return self.record.status

    @property
    def started_at(self) -> str:
        """The first step's start (UTC, ISO 8601); the folder's creation before any step started."""
        if self.record is not None and self.record.started_at:
            return self.record.started_at
        return datetime.fromtimestamp(self.folder.stat().st_ctime, UTC).isoformat(timespec="seconds")


def executions_dir(work_dir: Path) -> Path:
    """The runs' folder under the runner's --work-dir (.local-runs/executions)."""
    return work_dir / LOCAL_EXECUTIONS


def _runner_pid(folder: Path) -> int | None:
    """The runner's process id when that process still exists."""
    path = folder / RUNNER_PID_FILE
    if not path.is_file():
        return None
    pid = int(path.read_text().strip() or 0)
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError, ValueError, OverflowError):
        return None
    return pid


def read_run(folder: Path) -> LocalRun:
    record = load_local(folder) if (folder / RECORD_FILE).is_file() else None
    return LocalRun(folder, record, _runner_pid(folder))


def local_runs(executions: Path) -> list[LocalRun]:
    """Every local run in the executions folder, newest first."""
    base = executions
    folders = sorted(base.glob(f"{LOCAL_EXECUTION_PREFIX}*")) if base.is_dir() else []
    runs = [read_run(folder) for folder in folders if folder.is_dir()]
    return sorted(runs, key=lambda run: run.started_at, reverse=True)


def find_run(executions: Path, execution_id: str | None) -> LocalRun | None:
    """The run `execution_id` (local-<12 hex digits>), or the newest when None; None when there is none."""
    if execution_id is None:
        runs = local_runs(executions)
        return runs[0] if runs else None
    folder = executions / execution_id
    if not execution_id.startswith(LOCAL_EXECUTION_PREFIX) or "/" in execution_id or not folder.is_dir():
        return None
    return read_run(folder)


def format_run(run: LocalRun) -> str:
    """One local run as `make runs` lists it."""
    record = run.record
    lines = [f"{run.started_at} {run.status:10} {run.execution_id} (local, {run.folder})"]
    if record is not None:
        if record.steps:
            lines.append("  steps: " + ", ".join(f"{s.name} {s.status} {s.seconds:.0f}s" for s in record.steps))
        line = f"  {record.task}: {metrics_text(record.metrics, record.task)}"
        if record.model_package_arn:
            line += f"; registered {record.model_package_arn} ({record.approval_status})"
        lines.append(line)
        if record.failure:
            lines.append(f"  {record.failure}")
    if run.runner_pid:
        lines.append(f"  running: process {run.runner_pid} (make stop EXECUTION={run.execution_id})")
    return "\n".join(lines)
