"""MLflow tracking: one run per execution in a local SQLite store, with lineage, curves, metrics, package."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from reporting.report import write_report
from reporting.tracking import TrackingUnavailable, local_store_uri, managed_server_arn, track, tracking_uri
from tests.reporting.run_records import run_record
from tools.deployment import settings_for

EXPERIMENT = "hfqa-dev-qa-fine-tuning"


@pytest.fixture
def store(tmp_path):
    return local_store_uri(tmp_path)


def only_run(uri: str):
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment is not None
    [run] = client.search_runs([experiment.experiment_id])
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
