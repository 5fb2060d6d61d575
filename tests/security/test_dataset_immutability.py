"""Issue 30, finding 5 and three of finding 9: a dataset version stays put in S3 itself, and its files are checked.

Before: the datasets bucket policy had only TLS denies, so any writer could overwrite a manifest or its files;
the manifest's SHA-256 values were written and never checked; a v2 entry without `version_id` silently used the
current version; dataset versions expired after 90 days while packages named them; checkpoint versions hidden
by a delete were kept for one day. moto 5.2.5 does not evaluate bucket policies (an overwrite without any
condition header succeeds there) and does not check the checksums a request sends (S3 answers BadDigest): the
policy is evaluated here, statement by statement, on the requests the upload tool makes against moto, and on
the requests of the attacks.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pipeline_functions
import pytest
from qa.outputs import LOCAL_VERSIONS_DIR, MANIFEST_V2_FORMAT, same_s3_checksum
from tasks import DEFAULT_TASK

from stacks.data import checkpoint_noncurrent_days
from tests.conftest import ROOT, as_list, aws_environment, pointed_at, resources_of_type
from tests.security.policy_evaluation import condition_holds
from tools.upload_dataset import UploadPlan, upload, validate_dataset

SAMPLE = ROOT / "data" / "sample-squad"
PROJECT_KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/project"
OTHER_KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/other"
DATA_FILE, MANIFEST = "datasets/sq/v1/train/train.jsonl", "datasets/sq/v1/manifest.json"


# ------------------------------------------------------------------------------ the bucket policy, evaluated


def resolved(value: Any, bucket: str) -> str:
    """A template value as a concrete string: pseudo parameters of a fixed account, the ARNs of the project key
    and of the bucket (named `bucket`)."""
    if isinstance(value, str | bool | int | float):
        return str(value).lower() if isinstance(value, bool) else str(value)
    if "Ref" in value:
        return {"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}[value["Ref"]]
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(resolved(part, bucket) for part in parts)
    if "Fn::GetAtt" in value and value["Fn::GetAtt"][0].startswith("ProjectKey"):
        return PROJECT_KEY_ARN
    if "Fn::GetAtt" in value and value["Fn::GetAtt"][0].startswith("DatasetsBucket"):
        return f"arn:aws:s3:::{bucket}"
    raise AssertionError(f"cannot resolve {value!r}")


def bucket_policy(template: dict[str, Any], purpose: str) -> list[dict[str, Any]]:
    buckets = resources_of_type(template, "AWS::S3::Bucket")
    [logical_id] = [k for k, v in buckets.items() if f"-{purpose}-" in json.dumps(v["Properties"]["BucketName"])]
    [policy] = [
        p
        for p in resources_of_type(template, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": logical_id}
    ]
    return policy["Properties"]["PolicyDocument"]["Statement"]


def denied(statements: list[dict[str, Any]], bucket: str, request: dict[str, Any]) -> list[str]:
    """The Sids of the Deny statements that refuse an s3:PutObject request on `request['key']`."""
    arn = f"arn:aws:s3:::{bucket}/{request['key']}"
    sids = []
    for statement in statements:
        actions = as_list(statement["Action"])
        if statement["Effect"] != "Deny" or not any(fnmatch.fnmatchcase("s3:PutObject", a) for a in actions):
            continue
        if not any(fnmatch.fnmatchcase(arn, resolved(r, bucket)) for r in as_list(statement["Resource"])):
            continue
        conditions = {
            operator: {key: [resolved(v, bucket) for v in as_list(expected)] for key, expected in block.items()}
            for operator, block in statement.get("Condition", {}).items()
        }
        if condition_holds(conditions, request["context"]):
            sids.append(statement.get("Sid", "?"))
    return sids


def put(key: str, creates: bool = True, **headers: str) -> dict[str, Any]:
    """An s3:PutObject-authorized request; `creates`: s3:ObjectCreationOperation (false for CreateMultipartUpload,
    UploadPart, UploadPartCopy, which take no conditional headers)."""
    names = {
        "if_none_match": "s3:if-none-match",
        "if_match": "s3:if-match",
        "sse": "s3:x-amz-server-side-encryption",
        "kms_key": "s3:x-amz-server-side-encryption-aws-kms-key-id",
        "sse_c": "s3:x-amz-server-side-encryption-customer-algorithm",
    }
    context = {
        "aws:SecureTransport": "true",  # the TLS denies of every project bucket hold for none of these
        "s3:TlsVersion": "1.3",
        "s3:ObjectCreationOperation": "true" if creates else "false",
    }
    context.update({names[name]: value for name, value in headers.items()})
    return {"key": key, "context": context}


@pytest.fixture(scope="module")
def datasets_policy(dev) -> tuple[list[dict[str, Any]], str]:
    statements = bucket_policy(dev.templates["data"], "datasets")
    return statements, f"{dev.settings.name_prefix}-datasets-123456789012-us-east-1"


REFUSED = {
    "a data file overwritten without a condition header": put(DATA_FILE),
    "a data file replaced by If-Match": put(DATA_FILE, if_match='"etag"'),
    "a manifest overwritten without a condition header": put(MANIFEST),
    "SSE-S3 instead of the project key": put(DATA_FILE, if_none_match="*", sse="AES256"),
    "aws:kms without a key id (S3 uses aws/s3)": put(DATA_FILE, if_none_match="*", sse="aws:kms"),
    "another KMS key": put(DATA_FILE, if_none_match="*", sse="aws:kms", kms_key=OTHER_KEY_ARN),
    "a customer-provided key (SSE-C)": put(DATA_FILE, if_none_match="*", sse_c="AES256"),
    "DSSE-KMS": put(DATA_FILE, if_none_match="*", sse="aws:kms:dsse", kms_key=PROJECT_KEY_ARN),
}
ALLOWED = {
    "a data file written once, the bucket default encrypting it": put(DATA_FILE, if_none_match="*"),
    "a manifest written once": put(MANIFEST, if_none_match="*"),
    "a manifest replaced over the ETag it read (REPLACE=1)": put(MANIFEST, if_match='"etag"'),
    "CreateMultipartUpload and UploadPart (no conditional headers)": put(DATA_FILE, creates=False),
    "the project key named explicitly": put(DATA_FILE, if_none_match="*", sse="aws:kms", kms_key=PROJECT_KEY_ARN),
}


@pytest.mark.parametrize("attack", REFUSED)
def test_the_datasets_bucket_policy_refuses(datasets_policy, attack):
    """Before: no statement denied any of these (only TLS)."""
    statements, bucket = datasets_policy
    assert denied(statements, bucket, REFUSED[attack]), attack


@pytest.mark.parametrize("request_name", ALLOWED)
def test_the_datasets_bucket_policy_allows(datasets_policy, request_name):
    statements, bucket = datasets_policy
    assert denied(statements, bucket, ALLOWED[request_name]) == [], request_name


# ------------------------------------------------------------------------- the upload tool against moto


@pytest.fixture
def s3(moto_url) -> Iterator[Any]:
    with pointed_at(aws_environment(moto_url)):
        client = boto3.client("s3")
        yield client


def versioned_bucket(s3: Any, name: str) -> str:
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


WRITES = {"PutObject": True, "CompleteMultipartUpload": True, "CreateMultipartUpload": False, "UploadPart": False}
HEADERS = {
    "IfNoneMatch": "if_none_match",
    "IfMatch": "if_match",
    "ServerSideEncryption": "sse",
    "SSEKMSKeyId": "kms_key",
    "SSECustomerAlgorithm": "sse_c",
}


def recorded_writes(s3: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every s3:PutObject-authorized request the client sends from now on, as (operation, policy request)."""
    writes: list[tuple[str, dict[str, Any]]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in WRITES:
            headers = {HEADERS[name]: str(value) for name, value in params.items() if name in HEADERS}
            writes.append((model.name, put(params["Key"], creates=WRITES[model.name], **headers)))

    s3.meta.events.register("provide-client-params.s3.*", record)
    return writes


def test_every_write_of_an_upload_and_a_replace_passes_the_policy(s3, datasets_policy, tmp_path):
    """The tool's requests, multipart included, each pass the policy; its data files go up with If-None-Match
    (moto refuses a second one with 412, as S3 does) and with SHA-256 checksums."""
    statements, policy_bucket = datasets_policy
    bucket = versioned_bucket(s3, "immutability-upload")  # not the deployed fixture's bucket, on the same server
    writes = recorded_writes(s3)
    big = tmp_path / "big" / "train" / "big.jsonl"
    big.parent.mkdir(parents=True)
    big.write_bytes(b"x" * (11 * 1024 * 1024))
    files = [*validate_dataset(SAMPLE, "sq", "v1"), (big, "train/big.jsonl")]
    first = upload(UploadPlan(bucket, "sq", "v1", files), s3, multipart_bytes=5 * 1024 * 1024)
    again = upload(UploadPlan(bucket, "sq", "v1", files), s3, replace=True, multipart_bytes=5 * 1024 * 1024)
    assert again["Manifest"]["files"] == first["Manifest"]["files"]
    operations = [operation for operation, _ in writes]
    assert operations.count("UploadPart") == 3 and operations.count("CompleteMultipartUpload") == 1
    assert operations.count("PutObject") == 4  # two small files, two manifests: the replace wrote no data again
    for operation, request in writes:
        assert denied(statements, policy_bucket, request) == [], (operation, request)
    data_writes = [r for o, r in writes if o in ("PutObject", "CompleteMultipartUpload") and "/train/" in r["key"]]
    assert data_writes and all(r["context"].get("s3:if-none-match") == "*" for r in data_writes)
    head = s3.head_object(Bucket=bucket, Key="datasets/sq/v1/train/big.jsonl", ChecksumMode="ENABLED")
    [big_entry] = [f for f in first["Manifest"]["files"] if f["key"] == "train/big.jsonl"]
    assert big_entry["composite_sha256"].endswith("-3")  # the composite SHA-256 of the three parts, as S3 keeps it
    assert same_s3_checksum(head["ChecksumSHA256"], big_entry["composite_sha256"])


def test_a_copy_that_keeps_a_multipart_sources_composite_checksum_passes_the_claim(tmp_path):
    """S3 may keep a multipart source's composite SHA-256 on a copy (the CopyObject page: a source's checksum "will
    be copied to the new object by default"); the manifest records that composite for files uploaded in parts."""
    store = pipeline_functions.LocalObjectStore(tmp_path / "s3")
    body = b'{"id": "1"}\n'
    version = store.put("datasets", DATA_FILE, body)
    composite = "A" * 43 + "=-2"
    store.copy = lambda *args: composite  # type: ignore[method-assign]
    entry = {"key": "train/train.jsonl", "version_id": version, "sha256": hashlib.sha256(body).hexdigest()}
    with pytest.raises(pipeline_functions.ClaimError, match="has SHA-256"):
        pin(store, "datasets", v2(entry))
    pin(store, "datasets", v2({**entry, "composite_sha256": composite}), claim="parts")


# -------------------------------------------------------------------------------------------- the claim


def pin(store: Any, bucket: str, manifest: dict[str, Any], claim: str = "claim") -> None:
    """ClaimManifest's pinning of `manifest` (written as the current manifest) under inputs/<claim>/."""
    version = store.put(bucket, MANIFEST, json.dumps(manifest).encode())
    event = {
        "DatasetBucket": bucket,
        "ManifestKey": MANIFEST,
        "ManifestVersionId": version,
        "InputsPrefix": "inputs",
        "Task": DEFAULT_TASK,
    }
    pipeline_functions.pin_inputs(store, event, f"s3://{bucket}/inputs/{claim}/")


def v2(*files: dict[str, Any]) -> dict[str, Any]:
    return {"format": MANIFEST_V2_FORMAT, "dataset": "sq", "version": "v1", "files": list(files)}


def test_a_file_changed_after_upload_is_refused_by_the_claim_local(tmp_path):
    """The local runner's store: a kept version's bytes edited after the manifest recorded their SHA-256."""
    store = pipeline_functions.LocalObjectStore(tmp_path / "s3")
    body = b'{"id": "1"}\n'
    version = store.put("datasets", DATA_FILE, body)
    entry = {"key": "train/train.jsonl", "version_id": version, "sha256": hashlib.sha256(body).hexdigest()}
    pin(store, "datasets", v2(entry))  # unchanged: pinned
    (tmp_path / "s3" / LOCAL_VERSIONS_DIR / "datasets" / DATA_FILE / version).write_bytes(b'{"id": "poisoned"}\n')
    with pytest.raises(pipeline_functions.ClaimError, match=r"has SHA-256 .* the file is not the one uploaded"):
        pin(store, "datasets", v2(entry), claim="again")


def test_a_file_changed_after_upload_is_refused_by_the_claim_on_s3(s3):
    """S3 (moto): the train file overwritten (moto does not evaluate the policy that refuses this), and the
    manifest pointed at the new version with the SHA-256 recorded at upload. The claim's CopyObject asks S3 for
    the copy's SHA-256 and compares it: the function reads no data."""
    bucket = versioned_bucket(s3, "immutability-claim")
    body = b'{"id": "1"}\n'
    s3.put_object(Bucket=bucket, Key=DATA_FILE, Body=body)
    poisoned = s3.put_object(Bucket=bucket, Key=DATA_FILE, Body=b'{"id": "poisoned"}\n')["VersionId"]
    entry = {"key": "train/train.jsonl", "version_id": poisoned, "sha256": hashlib.sha256(body).hexdigest()}
    store = pipeline_functions.S3ObjectStore()
    with pytest.raises(pipeline_functions.ClaimError, match=rf"{DATA_FILE} \(version {poisoned}\) has SHA-256"):
        pin(store, bucket, v2(entry))
    assert not store.exists(bucket, "inputs/claim/manifest.json")  # nothing pinned: no job reads it


def test_a_v2_entry_without_version_id_is_refused():
    """Before: it silently used the version current when the claim ran."""
    manifest = v2({"key": "train/train.jsonl", "sha256": "0" * 64})
    with pytest.raises(
        pipeline_functions.ClaimError,
        match=r"lists 'train/train.jsonl' without a version_id: .* upload the dataset again with make upload-dataset",
    ):
        pipeline_functions.manifest_files(manifest, "datasets", MANIFEST)


# ------------------------------------------------------------------------------------------ lifecycle


def test_no_dataset_version_expires(dev, prod):
    """Registered packages name the dataset version they were trained on. Before: noncurrent after 90 days."""
    for env in (dev, prod):
        buckets = resources_of_type(env.templates["data"], "AWS::S3::Bucket")
        [datasets] = [v for v in buckets.values() if "-datasets-" in json.dumps(v["Properties"]["BucketName"])]
        for rule in datasets["Properties"]["LifecycleConfiguration"]["Rules"]:
            assert set(rule) <= {"Id", "Status", "AbortIncompleteMultipartUpload"}, rule


def test_a_deleted_checkpoint_is_recoverable_while_its_training_step_can_run(dev, prod):
    """Before: one day, shorter than one spot attempt may wait (36 h by default)."""
    for env in (dev, prod):
        training = env.settings.training
        longest_step = (training.max_wait_seconds if training.use_spot else training.max_run_seconds) * (
            training.retry_attempts + 1
        )
        buckets = resources_of_type(env.templates["data"], "AWS::S3::Bucket")
        [artifacts] = [v for v in buckets.values() if "-artifacts-" in json.dumps(v["Properties"]["BucketName"])]
        [rule] = [
            r for r in artifacts["Properties"]["LifecycleConfiguration"]["Rules"] if r["Id"] == "expire-checkpoints"
        ]
        days = rule["NoncurrentVersionExpiration"]["NoncurrentDays"]
        assert days == checkpoint_noncurrent_days(env.settings)
        assert days * 86400 >= longest_step + 86400
