"""Each content once: the files a run wrote become links to one blob per content, and nothing the store writes
later changes a blob (it replaces files, never writes into them)."""

from __future__ import annotations

import os

from local_runner.blobs import MIN_BLOB_BYTES, BlobStore, file_digest
from local_runner.store import LocalObjectStore

WEIGHTS = os.urandom(MIN_BLOB_BYTES + 1)


def test_copies_of_one_content_become_links_to_one_blob(tmp_path):
    store = LocalObjectStore(tmp_path / "s3")
    store.put_bytes(WEIGHTS, "s3://artifacts/models/a/model.tar.gz")  # the object and its kept version
    (tmp_path / "executions" / "local-1").mkdir(parents=True)
    job_copy = tmp_path / "executions" / "local-1" / "model.tar.gz"
    job_copy.write_bytes(WEIGHTS)
    other = tmp_path / "executions" / "local-1" / "other.bin"
    other.write_bytes(WEIGHTS[::-1])
    small = tmp_path / "executions" / "local-1" / "config.json"
    small.write_text("{}")
    blobs = BlobStore(tmp_path)

    saved = blobs.adopt_trees([tmp_path / "s3", tmp_path / "executions"])

    assert saved == 2 * len(WEIGHTS)  # three copies, one kept
    assert sorted(b.name for b in blobs.blobs()) == sorted({file_digest(job_copy), file_digest(other)})
    stored = store.path("s3://artifacts/models/a/model.tar.gz")
    assert os.path.samefile(stored, job_copy) and stored.stat().st_nlink == 4  # blob, object, version, job copy
    assert other.stat().st_nlink == 2 and small.stat().st_nlink == 1  # small files are left alone
    assert blobs.adopt_trees([tmp_path / "s3", tmp_path / "executions"]) == 0  # adopted files are not hashed again


def test_a_write_over_a_stored_object_leaves_its_blob_and_the_other_links_intact(tmp_path):
    store = LocalObjectStore(tmp_path / "s3")
    for key in ("a", "b"):
        store.put_bytes(WEIGHTS, f"s3://artifacts/{key}")
    source = tmp_path / "upload"
    source.mkdir()
    (source / "a").write_bytes(b"new a")
    blobs = BlobStore(tmp_path)
    blobs.adopt_trees([tmp_path / "s3"])

    store.put_bytes(b"new b", "s3://artifacts/b")
    store.upload_dir(source, "s3://artifacts")

    assert store.path("s3://artifacts/a").read_bytes() == b"new a"
    assert store.path("s3://artifacts/b").read_bytes() == b"new b"
    [blob] = blobs.blobs()
    assert file_digest(blob) == blob.name  # the old content, kept by the old versions' links
    assert blob.stat().st_nlink == 3  # itself and the two kept versions
    assert blobs.unreferenced() == []


def test_a_blob_nothing_links_to_is_unreferenced(tmp_path):
    job_copy = tmp_path / "executions" / "local-1" / "model.tar.gz"
    job_copy.parent.mkdir(parents=True)
    job_copy.write_bytes(WEIGHTS)
    blobs = BlobStore(tmp_path)
    blobs.adopt_trees([tmp_path / "executions"])
    job_copy.unlink()
    assert [b.name for b in blobs.unreferenced()] == [file_digest(blobs.blobs()[0])]
