"""MLflow tracking: one run per execution in a local SQLite store, with lineage, curves, metrics, package."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

import pytest
from mlflow.tracking import MlflowClient
from qa.outputs import LOG_TIME

from reporting.report import write_report
from reporting.tracking import (
    DIGEST_LENGTH,
    TrackingUnavailable,
    local_store_uri,
    managed_server_arn,
    track,
    tracking_uri,
)
from tests.reporting.run_records import START, run_record
from tools.deployment import settings_for

EXPERIMENT = "hfqa-dev-qa-fine-tuning"


@pytest.fixture
def store(tmp_path):
    return local_store_uri(tmp_path)


def only_run(uri: str, experiment_name: str = EXPERIMENT):
    """The client and the one run of the experiment."""
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(experiment_name)
    assert experiment is not None
    [run] = client.search_runs([experiment.experiment_id])
    assert run.inputs is not None
    return client, run


def test_a_run_holds_parameters_lineage_metrics_curves_and_the_package(store, tmp_path):
    record = run_record()
    report = write_report(record, tmp_path / "report")
    message = track(record, store, EXPERIMENT, (report, report.with_name("report.png")))
    assert message.startswith(f"mlflow: recorded {record.execution_id} as run")
    client, run = only_run(store)
    assert run.data.params == record.parameters
    tags = run.data.tags
    assert tags["dataset_manifest"] == record.parameters["ManifestKey"]
    assert tags["manifest_version"] == record.parameters["ManifestVersionId"]
    assert tags["base_model"] == record.parameters["BaseModelUri"]
    assert (tags["model_package_arn"], tags["approval_status"]) == (record.model_package_arn, "PendingManualApproval")
    assert run.data.metrics["f1"] == record.metrics["f1"]
    assert run.data.metrics["list_price_usd"] == pytest.approx(record.list_price_usd)
    loss = client.get_metric_history(run.info.run_id, "curve/loss")
    expected = [(e["step"], e["loss"]) for e in record.log_history if "loss" in e]
    assert sorted((m.step, m.value) for m in loss) == expected
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"execution.json", "report.html", "report.png"} <= artifacts
    assert run.info.status == "FINISHED"
    assert (tmp_path / "mlflow-artifacts").is_dir(), "artifacts stay beside the store, not in ./mlruns"


def test_recording_again_refreshes_tags_without_a_second_run(store):
    record = run_record()
    track(record, store, EXPERIMENT)
    record.approval_status = "Approved"
    assert "already recorded" in track(record, store, EXPERIMENT)
    _, run = only_run(store)
    assert run.data.tags["approval_status"] == "Approved"


def test_a_running_execution_is_not_recorded(store, tmp_path):
    record = run_record(status="Executing")
    assert "recorded once it has ended" in track(record, store, EXPERIMENT)
    assert not (tmp_path / "mlflow.db").exists()


def test_a_failed_execution_is_recorded_as_failed(store):
    record = run_record(status="Failed", f1=50.0)
    track(record, store, EXPERIMENT)
    _, run = only_run(store)
    assert run.info.status == "FAILED"


def test_the_tracking_uri_follows_the_settings(tmp_path):
    settings = settings_for("dev")
    assert tracking_uri(settings, tmp_path) == local_store_uri(tmp_path)
    managed = settings.model_copy(update={"tracking": settings.tracking.model_copy(update={"managed_server": True})})
    arn = managed_server_arn(managed, "111122223333", "us-east-1")
    assert arn == f"arn:aws:sagemaker:us-east-1:111122223333:mlflow-tracking-server/{settings.name_prefix}-mlflow"
    assert tracking_uri(managed, tmp_path, arn) == arn
    explicit = settings.model_copy(
        update={"tracking": settings.tracking.model_copy(update={"mlflow_tracking_uri": "http://mlflow:5000"})}
    )
    assert tracking_uri(explicit, tmp_path, arn) == "http://mlflow:5000"


def test_a_managed_server_without_its_plugin_is_one_line(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "sagemaker_mlflow" else real(name))
    arn = "arn:aws:sagemaker:us-east-1:111122223333:mlflow-tracking-server/hfqa-dev-mlflow"
    with pytest.raises(TrackingUnavailable, match="pip install sagemaker-mlflow"):
        track(run_record(), arn, EXPERIMENT)


def millis(moment) -> int:
    return int(moment.timestamp() * 1000)


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    """One store for the tests below, an experiment each (creating a SQLite store costs seconds)."""
    return local_store_uri(tmp_path_factory.mktemp("mlflow"))


def test_the_run_spans_the_execution_with_each_points_logged_time_and_the_dataset_as_input(shared_store):
    record = run_record()
    record.dataset_sha256 = "0123456789abcdef" * 4
    fine_tune = next(step for step in record.steps if step.name == "FineTune")
    assert fine_tune.started_at is not None and fine_tune.ended_at is not None
    began = datetime.fromisoformat(fine_tune.started_at).timestamp()
    for i, entry in enumerate(record.log_history):  # the training job's LOG_TIME, one per logged entry
        entry[LOG_TIME] = began + 60 + 7.5 * i
    track(record, shared_store, "timed")
    client, run = only_run(shared_store, "timed")
    assert run.info.start_time == millis(START), "the execution's first step's start, not the moment of recording"
    assert record.ended_at is not None and record.ended_at > fine_tune.ended_at
    assert run.info.end_time == millis(record.ended_at)
    loss = client.get_metric_history(run.info.run_id, "curve/loss")
    expected = [(int(e["step"]), int(e[LOG_TIME] * 1000)) for e in record.log_history if "loss" in e]
    assert sorted((m.step, m.timestamp) for m in loss) == expected
    [f1] = client.get_metric_history(run.info.run_id, "f1")
    assert f1.timestamp == int(record.log_history[-1][LOG_TIME] * 1000), "when the evaluation was logged"
    [seconds] = client.get_metric_history(run.info.run_id, "step_seconds/FineTune")
    assert seconds.timestamp == millis(fine_tune.ended_at)

    [logged] = run.inputs.dataset_inputs
    assert logged.dataset.name == "datasets/sample-squad/v1"
    assert logged.dataset.digest == record.dataset_sha256[:DIGEST_LENGTH]
    assert json.loads(logged.dataset.source) == {
        "key": record.parameters["ManifestKey"],
        "version_id": record.parameters["ManifestVersionId"],
    }
    assert json.loads(logged.dataset.profile)["manifest_sha256"] == record.dataset_sha256
    assert {(t.key, t.value) for t in logged.tags} == {("mlflow.data.context", "training")}
    assert run.data.tags["dataset_manifest_sha256"] == record.dataset_sha256


def test_a_history_without_times_is_stamped_when_fine_tune_ended(shared_store):
    """A model archive from before LOG_TIME; no digest from the claim: the manifest's version id is the digest."""
    record = run_record()
    assert all(LOG_TIME not in entry for entry in record.log_history)
    track(record, shared_store, "untimed")
    client, run = only_run(shared_store, "untimed")
    fine_tune = next(step for step in record.steps if step.name == "FineTune")
    assert fine_tune.ended_at is not None
    loss = client.get_metric_history(run.info.run_id, "curve/loss")
    assert {m.timestamp for m in loss} == {millis(fine_tune.ended_at)}
    [logged] = run.inputs.dataset_inputs
    assert logged.dataset.digest == record.parameters["ManifestVersionId"][:DIGEST_LENGTH]


def store_contents(path) -> tuple[list[tuple[str, list[str]]], list[tuple[str, ...]]]:
    """A SQLite store's schema (every table, index and trigger as its lines of SQL, sorted: two stores MLflow
    builds itself can list a table's constraints in different orders) and its migration revision."""
    with sqlite3.connect(path) as connection:
        schema = connection.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
        revision = connection.execute("SELECT * FROM alembic_version").fetchall()
    return [(name, sorted((sql or "").splitlines())) for name, sql in schema], revision


def test_a_new_store_begins_as_the_template_and_equals_one_mlflow_built(tmp_path, monkeypatch):
    import reporting.tracking as tracking

    monkeypatch.setattr(tracking, "STORE_TEMPLATES", tmp_path / "templates")
    monkeypatch.chdir(tmp_path)  # MLflow's Default experiment keeps its artifacts in ./mlruns of the current folder
    built = tmp_path / "built.db"
    MlflowClient(tracking_uri=f"sqlite:///{built}").search_experiments()  # every migration, as MLflow builds one
    template = tracking.store_template()
    assert template is not None and template.parent == tmp_path / "templates"
    with sqlite3.connect(template) as connection:
        assert connection.execute("SELECT COUNT(*) FROM experiments").fetchone() == (0,)  # MLflow adds Default
    built_at = template.stat().st_mtime_ns
    copied = local_store_uri(tmp_path / "runs")
    track(run_record(), copied, EXPERIMENT)
    assert (tmp_path / "runs" / "mlflow.db").is_file()
    assert template.stat().st_mtime_ns == built_at  # built once, then copied
    assert store_contents(tmp_path / "runs" / "mlflow.db") == store_contents(built)
    [default] = [e for e in MlflowClient(tracking_uri=copied).search_experiments() if e.name == "Default"]
    [default_built] = MlflowClient(tracking_uri=f"sqlite:///{built}").search_experiments()
    assert default.artifact_location == default_built.artifact_location == str(tmp_path / "mlruns" / "0")
    only_run(copied)
