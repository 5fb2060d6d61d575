"""make clean-runs: the newest runs stay; an older run's folder, the objects only it wrote, its packages in the local
registry with their registry copies, and the blobs nothing links to any more go."""

from __future__ import annotations

import dataclasses
import os
from datetime import timedelta

from local_runner.blobs import MIN_BLOB_BYTES, BlobStore
from local_runner.clean import disk_usage
from local_runner.registry import REGISTRY_FILE, LocalModelRegistry
from local_runner.store import STORE_DIR, LocalObjectStore
from reporting.record import save
from tests.reporting.run_records import START, run_record
from tests.tools.conftest import run_cli

ARTIFACTS = "s3://hfqa-dev-artifacts"


def make_runs(work_dir, count: int) -> list[str]:
    """`count` finished runs, oldest first, each with its own model archive, registered (the registry copy of the
    archive in the store, a package in the local registry) by the first and the last, and a copy of one base model."""
    store = LocalObjectStore(work_dir / STORE_DIR)
    base_model = os.urandom(MIN_BLOB_BYTES)
    ids = []
    for index in range(count):
        execution_id = f"local-00000000000{index}"
        record = dataclasses.replace(
            run_record(), execution_id=execution_id, started_at=(START + timedelta(hours=index)).isoformat()
        )
        folder = work_dir / "executions" / execution_id
        save(record, folder)
        archive = os.urandom(MIN_BLOB_BYTES)
        store.put_bytes(archive, f"{ARTIFACTS}/models/{execution_id}-FineTune/output/model.tar.gz")
        (folder / "FineTune").mkdir()
        (folder / "FineTune" / "model.tar.gz").write_bytes(archive)
        (folder / "FineTune" / "base-model.safetensors").write_bytes(base_model)
        if index in (0, count - 1):
            copy = f"{ARTIFACTS}/registry/digest{index}/model.tar.gz"
            store.put_bytes(archive, copy)
            LocalModelRegistry(work_dir / REGISTRY_FILE).register(
                "group", "PendingManualApproval", copy, {}, execution_id
            )
        ids.append(execution_id)
    BlobStore(work_dir).adopt_trees([work_dir / STORE_DIR, work_dir / "executions"])
    return ids


def test_clean_runs_keeps_the_newest_and_frees_what_only_the_others_held(tmp_path):
    oldest, middle, newest = make_runs(tmp_path, 3)
    before = disk_usage(tmp_path)

    result = run_cli("local_runner.clean", "--work-dir", str(tmp_path), "--keep", "1", env={})

    assert result.returncode == 0, result.stderr
    assert f"removed 2 local run(s): {middle}, {oldest}" in result.stdout
    assert f"kept 1: {newest} (Succeeded)" in result.stdout
    assert sorted(p.name for p in (tmp_path / "executions").iterdir()) == [newest]
    store = LocalObjectStore(tmp_path / STORE_DIR)
    models = store.path(f"{ARTIFACTS}/models")
    assert sorted(p.name for p in models.iterdir()) == [f"{newest}-FineTune"]
    assert not list((tmp_path / STORE_DIR).rglob(f"{middle}*"))  # its kept versions too
    [kept] = LocalModelRegistry(tmp_path / REGISTRY_FILE).packages("group")
    assert kept.execution_id == newest and "removed 1 local model package(s)" in result.stdout
    assert sorted(p.name for p in store.path(f"{ARTIFACTS}/registry").iterdir()) == ["digest2"]
    assert not (tmp_path / STORE_DIR / ".versions" / "hfqa-dev-artifacts" / "registry" / "digest0").exists()
    # Freed: the oldest and the middle runs' archives; the base model stays (the newest run holds a copy).
    freed = before - disk_usage(tmp_path)
    assert 2 * MIN_BLOB_BYTES <= freed < 2.1 * MIN_BLOB_BYTES
    assert f"freed {freed / 2**20:,.1f} MiB" in result.stdout
    assert BlobStore(tmp_path).unreferenced() == [] and len(BlobStore(tmp_path).blobs()) == 2


def test_clean_runs_without_runs_says_so(tmp_path):
    result = run_cli("local_runner.clean", "--work-dir", str(tmp_path), env={})
    assert result.returncode == 0 and "nothing to remove" in result.stdout
