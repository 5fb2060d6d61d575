"""Record a pipeline execution in MLflow: parameters, lineage, training curves, metrics, the model package.

Where: the local runner calls `track` at the end of every local run, and `make report` for an AWS execution,
both where the network is allowed; the jobs run network-isolated and log nothing themselves (their curves
come from the log history in the model archive). To where (settings `tracking`): a local SQLite store
`.local-runs/mlflow.db` by default (`mlflow ui --backend-store-uri sqlite:///.local-runs/mlflow.db` shows it,
with the full `mlflow` package installed; a new one starts as a copy of store_template()), a SageMaker managed
tracking server (tracking.managed_server, its ARN as the tracking URI through the sagemaker-mlflow plugin) for AWS
executions, or any tracking URI.
One MLflow run per execution (tag `execution_arn`): recording it again only refreshes its tags. The run starts
and ends when the execution did (its first step's start, its last step's end), each curve point is stamped with
the wall time the training job logged it (qa/outputs.py LOG_TIME), and the dataset (the manifest the execution
claimed, its SHA-256 as the digest) is the run's input.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from qa.outputs import EVAL_LOG_PREFIX, LOG_STEP, LOG_TIME, TRAIN_LOG_KEYS, eval_log_keys
from tasks import task as task_module

from config.paths import CACHE, private_dir
from config.settings import Settings
from pipeline_steps import names
from reporting.record import RECORD_FILE, RunRecord

LOCAL_STORE = "mlflow.db"  # in the local runs' folder (.local-runs)
SQLITE_PREFIX = "sqlite:///"  # a SQLite store's tracking URI: the prefix, then the file's path
STORE_TEMPLATES = CACHE / "mlflow-stores"  # an empty SQLite store per MLflow version, copied to start a new one
LOCAL_ARTIFACTS = "mlflow-artifacts"
TERMINAL_STATUSES = {"Succeeded", "Failed", "Stopped"}

EXECUTION_TAG = "execution_arn"
SAGEMAKER_PLUGIN = "sagemaker_mlflow"  # the module of the sagemaker-mlflow package (ARN tracking URIs)
DATASET_CONTEXT = "training"  # the dataset input's mlflow.data.context tag
# MLflow's stores keep a dataset digest of at most 36 characters (its `datasets` table: String(36)).
DIGEST_LENGTH = 36


def managed_server_arn(settings: Settings, account: str, region: str) -> str:
    """The ARN of the managed tracking server the stacks create (tracking.managed_server), which
    sagemaker-mlflow accepts as a tracking URI."""
    return f"arn:aws:sagemaker:{region}:{account}:mlflow-tracking-server/{settings.mlflow_server_name}"


def local_store_uri(work_dir: Path) -> str:
    """The default tracking URI: a SQLite store in the local runs' folder."""
    return f"{SQLITE_PREFIX}{(work_dir / LOCAL_STORE).resolve()}"


def sqlite_store_path(uri: str) -> Path | None:
    """The file of a SQLite store's tracking URI; None for any other store."""
    return Path(uri.removeprefix(SQLITE_PREFIX)) if uri.startswith(SQLITE_PREFIX) else None


def tracking_uri(settings: Settings, work_dir: Path, server_arn: str | None = None) -> str:
    """Where `make report` records an AWS execution: the configured URI, the managed server, else the local
    store in `work_dir`."""
    if settings.tracking.mlflow_tracking_uri:
        return settings.tracking.mlflow_tracking_uri
    if settings.tracking.managed_server and server_arn:
        return server_arn
    return local_store_uri(work_dir)


def curve_keys(task: str) -> tuple[str, ...]:
    """The log history's curves of a run of `task`: the training keys, then each of the task's metrics
    (eval_<name>) and the evaluation loss."""
    return (*TRAIN_LOG_KEYS, *eval_log_keys(task_module(task).METRICS))


def _tags(record: RunRecord) -> dict[str, str]:
    tags = {
        EXECUTION_TAG: record.execution_arn,
        "execution_id": record.execution_id,
        "pipeline": record.pipeline_name,
        "source": record.source,
        "status": record.status,
        "task": record.task,
        "gate_metric": record.gate_metric,
        "dataset_manifest": record.parameters.get(names.MANIFEST_KEY, ""),
        "dataset_manifest_sha256": record.dataset_sha256 or "",
        "manifest_version": record.parameters.get(names.MANIFEST_VERSION_ID, ""),
        "base_model": record.parameters.get(names.BASE_MODEL_URI, ""),
        "model_package_arn": record.model_package_arn or "",
        "approval_status": record.approval_status or "",
        "model_data": record.model_data or "",
    }
    return {k: v for k, v in tags.items() if v}


def _millis(moment: datetime | str | None) -> int | None:
    """MLflow's timestamps: milliseconds since the Unix epoch."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return None if moment is None else int(moment.timestamp() * 1000)


def _metrics(record: RunRecord) -> list[Any]:
    """The curves at the wall time each point was logged (a history without LOG_TIME, from before it was
    recorded: at FineTune's end, when the history was saved), the end results at the run's end, each step's
    seconds at that step's end."""
    from mlflow.entities import Metric

    ended = _millis(record.ended_at) or _millis(record.started_at) or 0
    training = next((step for step in record.steps if step.name == names.TRAIN_STEP), None)
    saved = (_millis(training.ended_at) if training else None) or ended

    def logged(entry: dict[str, Any]) -> int:
        return int(float(entry[LOG_TIME]) * 1000) if entry.get(LOG_TIME) is not None else saved

    metrics = [
        Metric(f"curve/{key}", float(entry[key]), logged(entry), int(entry[LOG_STEP]))
        for entry in record.log_history
        for key in curve_keys(record.task)
        if entry.get(key) is not None and LOG_STEP in entry
    ]
    gate_key = EVAL_LOG_PREFIX + record.gate_metric
    evaluations = [entry for entry in record.log_history if entry.get(gate_key) is not None]
    evaluated = logged(evaluations[-1]) if evaluations else ended
    metrics += [Metric(name, value, evaluated, 0) for name, value in sorted(record.metrics.items())]
    if record.list_price_usd is not None:
        metrics.append(Metric("list_price_usd", record.list_price_usd, ended, 0))
    metrics += [
        Metric(f"step_seconds/{s.name}", s.seconds, _millis(s.ended_at) or ended, 0)
        for s in record.steps
        if s.seconds is not None
    ]
    return metrics


def _dataset_input(record: RunRecord) -> Any | None:
    """The claimed manifest as an MLflow dataset input (mlflow.entities.DatasetInput, what mlflow.log_input
    logs): named by its folder, the S3 key and version as its source, the manifest's SHA-256 (which pins every
    file it lists) as its digest, else its S3 version id. None without a manifest."""
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    key = record.parameters.get(names.MANIFEST_KEY)
    version = record.parameters.get(names.MANIFEST_VERSION_ID, "")
    digest = record.dataset_sha256 or version
    if not key or not digest:
        return None
    dataset = Dataset(
        name=str(PurePosixPath(key).parent),
        digest=digest[:DIGEST_LENGTH],
        source_type="s3",
        source=json.dumps({"key": key, "version_id": version}),
        profile=json.dumps({"manifest_sha256": record.dataset_sha256}) if record.dataset_sha256 else None,
    )
    return DatasetInput(dataset, [InputTag(MLFLOW_DATASET_CONTEXT, DATASET_CONTEXT)])


def store_template() -> Path | None:
    """An empty SQLite store at this MLflow's schema (its tables, every migration applied, no experiment yet),
    built once per MLflow version under STORE_TEMPLATES; None where this MLflow has no table-building function
    (a new store is then built by MLflow itself). MLflow builds a new store by running each of its migrations,
    ~2.5 s for every new local-runs folder; a copy of the template is a file copy."""
    import mlflow
    import sqlalchemy
    from mlflow.store.db import utils

    initialize_tables = getattr(utils, "_initialize_tables", None)
    if initialize_tables is None:
        return None
    template = private_dir(STORE_TEMPLATES) / f"mlflow-{mlflow.__version__}.db"
    if not template.exists():
        handle, building = tempfile.mkstemp(dir=template.parent, suffix=".db")
        os.close(handle)
        engine = sqlalchemy.create_engine(f"{SQLITE_PREFIX}{building}")
        try:
            initialize_tables(engine)
            os.replace(building, template)  # whole or not at all, also where two runs build it at once
        finally:
            engine.dispose()
            Path(building).unlink(missing_ok=True)
    return template


def _start_sqlite_store(uri: str) -> None:
    """A SQLite store that does not exist yet begins as a copy of store_template(); MLflow then finds its schema
    current and adds its Default experiment, as for a store it built itself."""
    store = sqlite_store_path(uri)
    if store is not None and not store.exists() and (template := store_template()) is not None:
        store.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, store)


class TrackingUnavailable(RuntimeError):
    """The tracking URI cannot be reached from this machine; the message names the fix."""


def track(record: RunRecord, uri: str, experiment_name: str, artifacts: tuple[Path, ...] = ()) -> str:
    """Record `record` at tracking URI `uri` (one MLflow run per execution); a one-line account of it."""
    if record.status not in TERMINAL_STATUSES:
        return f"mlflow: {record.execution_id} is {record.status}: recorded once it has ended"
    if uri.startswith("arn:") and importlib.util.find_spec(SAGEMAKER_PLUGIN) is None:
        raise TrackingUnavailable(
            f"tracking URI {uri} is a SageMaker tracking server: MLflow reaches it through the sagemaker-mlflow "
            "plugin, which is not installed (pip install sagemaker-mlflow)"
        )
    from mlflow.entities import Param, RunTag
    from mlflow.tracking import MlflowClient

    # MLflow logs its store's table creation and migrations at INFO to the console: quiet by default.
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    _start_sqlite_store(uri)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is None:
        # A SQLite store keeps its artifacts beside it (MLflow's default is ./mlruns of the current folder).
        location = None
        if (store := sqlite_store_path(uri)) is not None:
            location = (store.parent / LOCAL_ARTIFACTS).as_uri()
        experiment_id = client.create_experiment(experiment_name, artifact_location=location)
    else:
        experiment_id = experiment.experiment_id
    tags = [RunTag(k, v) for k, v in _tags(record).items()]
    existing = client.search_runs([experiment_id], f"tags.{EXECUTION_TAG} = '{record.execution_arn}'")
    if existing:
        run_id = existing[0].info.run_id
        client.log_batch(run_id, tags=tags)
        return f"mlflow: {record.execution_id} already recorded as run {run_id} ({uri}); tags refreshed"
    run = client.create_run(
        experiment_id,
        start_time=_millis(record.started_at),
        run_name=record.execution_id,
        tags={t.key: t.value for t in tags},
    )
    run_id = run.info.run_id
    params = [Param(k, v[:6000]) for k, v in sorted(record.parameters.items())]
    metrics = _metrics(record)
    for start in range(0, max(len(metrics), 1), 1000):  # log_batch takes at most 1000 metrics per call
        client.log_batch(run_id, metrics=metrics[start : start + 1000], params=params if start == 0 else [])
    if (dataset := _dataset_input(record)) is not None:
        client.log_inputs(run_id, datasets=[dataset])
    client.log_text(run_id, record.to_json(), RECORD_FILE)
    for path in artifacts:
        client.log_artifact(run_id, str(path))
    client.set_terminated(
        run_id, "FINISHED" if record.status == "Succeeded" else "FAILED", end_time=_millis(record.ended_at)
    )
    return f"mlflow: recorded {record.execution_id} as run {run_id} in experiment {experiment_name} ({uri})"
