"""make register of a local run or package: a model that missed the gate registered as a person's decision,
PendingManualApproval, with who, when and why in its metadata, in the local registry."""

from __future__ import annotations

import dataclasses
import getpass
import os

import pytest

from local_runner.blobs import file_digest
from local_runner.registry import REGISTRY_FILE, LocalModelRegistry
from local_runner.store import STORE_DIR, LocalObjectStore
from pipeline_steps.package_metadata import REASON, REGISTERED_AT, REGISTERED_BY, SOURCE, metadata_value_problem
from reporting.record import save
from tests.reporting.run_records import run_record
from tests.tools.conftest import assert_one_line_error, run_cli
from tools.deployment import settings_for

DEV = settings_for("dev")
BUCKET = "hfqa-dev-artifacts-000000000000-local"
WHY = "F1 82.1 on the pilot data is enough for the pilot: approved by the QA lead"


@pytest.fixture
def gated_run(tmp_path):
    """A local run that trained a model, which RecordModel copied, and then stopped at the F1 gate."""
    store = LocalObjectStore(tmp_path / STORE_DIR)
    model_data = f"s3://{BUCKET}/models/local-0123456789ab-FineTune/output/model.tar.gz"
    store.put_bytes(os.urandom(1000), model_data)
    copy = f"s3://{BUCKET}/registry/{file_digest(store.path(model_data))}/model.tar.gz"
    store.put_bytes(store.path(model_data).read_bytes(), copy)
    record = dataclasses.replace(
        run_record(status="Failed", f1=82.1), model_package_arn=None, approval_status=None, model_data=model_data
    )
    save(record, tmp_path / "executions" / record.execution_id)
    return tmp_path, record, copy


def test_a_local_run_that_missed_the_gate_is_registered_with_the_decision(gated_run):
    work_dir, record, copy = gated_run
    args = ("--execution", record.execution_id, "--reason", WHY, "--work-dir", str(work_dir))

    result = run_cli("local_runner.register", *args, env={})

    assert result.returncode == 0, result.stderr
    [package] = LocalModelRegistry(work_dir / REGISTRY_FILE).packages(DEV.model_package_group_name)
    assert (package.approval_status, package.model_data, package.metrics) == (
        "PendingManualApproval",
        copy,
        record.metrics,
    )
    assert package.metadata[REASON] == WHY and package.metadata[REGISTERED_BY] == getpass.getuser()
    assert package.metadata[SOURCE] == record.execution_arn and package.metadata[REGISTERED_AT].startswith("20")
    assert f"registered {package.arn} (PendingManualApproval)" in result.stdout
    again = run_cli("local_runner.register", *args, env={})  # the run's record still names no package: a second one
    assert again.returncode == 0
    source = LocalModelRegistry(work_dir / REGISTRY_FILE).packages(DEV.model_package_group_name)[0]
    third = run_cli(
        "local_runner.register", "--package", source.arn, "--reason", "again", "--work-dir", str(work_dir), env={}
    )
    assert third.returncode == 0, third.stderr
    newest = LocalModelRegistry(work_dir / REGISTRY_FILE).packages(DEV.model_package_group_name)[-1]
    assert (newest.version, newest.model_data, newest.metadata[SOURCE]) == (3, copy, source.arn)


def test_a_run_of_another_task_is_registered_in_its_task_s_group(gated_run):
    """The group is that of the run's own task (its record), as `make demo TASK=<task>` synthesized its pipeline, and
    the registered model its pipeline's registry copy (registry-text-classification/: ArtifactLayout.of_pipeline)."""
    work_dir, record, shared_copy = gated_run
    store = LocalObjectStore(work_dir / STORE_DIR)
    text_classification = settings_for("dev", "text-classification")
    copy = shared_copy.replace("/registry/", f"/{text_classification.layout.registry}/")
    assert copy != shared_copy
    store.put_bytes(store.path(shared_copy).read_bytes(), copy)
    save(dataclasses.replace(record, task="text-classification"), work_dir / "executions" / record.execution_id)
    args = ("--execution", record.execution_id, "--reason", WHY, "--work-dir", str(work_dir))
    result = run_cli("local_runner.register", *args, env={})
    assert result.returncode == 0, result.stderr
    registry = LocalModelRegistry(work_dir / REGISTRY_FILE)
    assert registry.packages(DEV.model_package_group_name) == []
    [package] = registry.packages(text_classification.model_package_group_name)
    assert package.group == "hfqa-dev-text-classification-models" and package.model_data == copy


@pytest.mark.parametrize(
    "reason, says",
    [("", "has 0 characters"), ("x" * 257, "has 257 characters"), ("it's fine", 'has "\'": only letters')],
)
def test_a_reason_that_metadata_cannot_hold_is_refused_before_anything_is_registered(gated_run, reason, says):
    work_dir, record, _ = gated_run
    args = ("--execution", record.execution_id, "--reason", reason, "--work-dir", str(work_dir))
    assert_one_line_error(run_cli("local_runner.register", *args, env={}), "REASON", says)
    assert not (work_dir / REGISTRY_FILE).exists() or not LocalModelRegistry(work_dir / REGISTRY_FILE).packages(
        DEV.model_package_group_name
    )


def test_the_metadata_pattern_takes_letters_numbers_spaces_and_its_punctuation():
    assert metadata_value_problem("Zoë 82.1 = ok: a/b+c-d_e@f") is None
    assert metadata_value_problem("a\nb") is not None


def test_register_is_refused_in_production(gated_run):
    work_dir, record, _ = gated_run
    args = ("--execution", record.execution_id, "--reason", WHY, "--work-dir", str(work_dir), "--env", "prod")
    assert_one_line_error(run_cli("local_runner.register", *args, env={}), "not for production", "no approval role")
