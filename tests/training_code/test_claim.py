"""claim.py: one execution per uploaded manifest version, on the local runner's S3 folder and on moto server."""

from __future__ import annotations

import io
import json

import boto3
import claim
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from qa.cli import UNSET_VERSION

from tests.conftest import aws_environment, pointed_at


@pytest.fixture
def local_s3(tmp_path, monkeypatch):
    monkeypatch.setenv(claim.LOCAL_S3_ROOT, str(tmp_path / "s3"))
    return tmp_path / "s3"


def run_claim(tmp_path, execution_id: str, version: str = "v-1", key: str = "datasets/squad/v1/manifest.json"):
    out = tmp_path / f"out-{execution_id}-{version}"
    code = claim.main(
        [
            "--claims-uri",
            "s3://artifacts/claims",
            "--execution-id",
            execution_id,
            "--dataset-bucket",
            "datasets",
            "--manifest-key",
            key,
            "--manifest-version",
            version,
            "--output-dir",
            str(out),
        ]
    )
    return code, json.loads((out / "claim.json").read_text()) if code == 0 else None


def test_the_first_execution_owns_the_manifest_and_a_second_is_a_duplicate(tmp_path, local_s3):
    assert run_claim(tmp_path, "exec-a")[1]["duplicate"] == 0
    code, second = run_claim(tmp_path, "exec-b")
    assert code == 0 and second["duplicate"] == 1 and second["claimed_by"] == "exec-a"
    assert len(list((local_s3 / "artifacts" / "claims").iterdir())) == 1


def test_a_retry_of_the_same_execution_is_not_a_duplicate(tmp_path, local_s3):
    run_claim(tmp_path, "exec-a")
    assert run_claim(tmp_path, "exec-a")[1]["duplicate"] == 0


def test_a_new_upload_of_the_same_key_is_a_new_claim(tmp_path, local_s3):
    run_claim(tmp_path, "exec-a", version="v-1")
    assert run_claim(tmp_path, "exec-b", version="v-2")[1]["duplicate"] == 0


def test_a_run_started_without_the_manifest_version_stops_with_the_fix(tmp_path, local_s3, capsys):
    code, _ = run_claim(tmp_path, "exec-a", version=UNSET_VERSION)
    assert code == 1
    assert "ManifestVersionId is not set" in capsys.readouterr().err


def test_the_s3_conditional_write_against_the_emulator(tmp_path, moto_url, monkeypatch):
    """The real S3 path: put_object(IfNoneMatch="*") in moto server, which models the 412 of a second write.
    Not modelled by moto: the 409 ConditionalRequestConflict of two concurrent writes (handled the same way)."""
    monkeypatch.delenv(claim.LOCAL_S3_ROOT, raising=False)
    with pointed_at(aws_environment(moto_url)):
        boto3.client("s3").create_bucket(Bucket="artifacts")
        assert run_claim(tmp_path, "exec-a")[1]["duplicate"] == 0
        code, second = run_claim(tmp_path, "exec-b")
        assert code == 0 and second == {**second, "duplicate": 1, "claimed_by": "exec-a"}
        [stored] = boto3.client("s3").list_objects_v2(Bucket="artifacts", Prefix="claims/")["Contents"]
        assert json.loads(boto3.client("s3").get_object(Bucket="artifacts", Key=stored["Key"])["Body"].read()) == {
            "execution_id": "exec-a",
            "manifest": "s3://datasets/datasets/squad/v1/manifest.json (version v-1)",
        }


def test_a_concurrent_write_conflict_is_retried_before_reading_the_claim(monkeypatch):
    """409 ConditionalRequestConflict (not modelled by moto): the write is retried, as S3's PutObject page
    says; only a 412 means the claim exists and is read."""
    s3 = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(s3) as stub:
        stub.add_client_error("put_object", service_error_code="ConditionalRequestConflict", http_status_code=409)
        stub.add_client_error("put_object", service_error_code="PreconditionFailed", http_status_code=412)
        body = StreamingBody(io.BytesIO(b'{"execution_id": "exec-a"}'), 26)
        stub.add_response("get_object", {"Body": body}, {"Bucket": "artifacts", "Key": "claims/k.json"})
        monkeypatch.delenv(claim.LOCAL_S3_ROOT, raising=False)
        monkeypatch.setattr(boto3, "client", lambda *args, **kwargs: s3)
        monkeypatch.setattr(claim.time, "sleep", lambda seconds: None)
        assert claim.create_if_absent("artifacts", "claims/k.json", b"{}") == b'{"execution_id": "exec-a"}'
        stub.assert_no_pending_responses()
