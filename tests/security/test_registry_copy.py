"""Issue 30, finding 2: the registered archive can be swapped.

The attack: overwrite FineTune's models/<job>/output/model.tar.gz (the job role, and any principal with
s3:PutObject on the artifacts bucket, may write there) after training, before or after RecordModel runs, or the
object the package references; then update the package's metadata to match, so that `make verify-model` says ok.

What holds now: RecordModel hashes and copies the one version the training job wrote (a second version fails the
step), into registry/<sha256>/model.tar.gz with If-None-Match; RegisterModel registers that copy; the bucket
policy lets only RecordModel's role write registry/ and nothing delete there; no lifecycle rule expires it; and
`make verify-model` compares the package with its execution's RecordModel outputs.

Run on the local runner's S3 folder (the functions' LocalObjectStore) and on moto server's S3. moto does not model
bucket policies (its CloudFormation skips them; it enforces no IAM): the denies are asserted on the synthesized
templates instead; nor ListPipelineExecutionSteps (tests/tools/test_verify_model.py's stand-in answers it)."""

from __future__ import annotations

import hashlib

import boto3
import pipeline_functions as functions
import pytest
from botocore.stub import Stubber
from qa.outputs import LOCAL_S3_ROOT_ENV

from pipeline_steps.names import MODEL_METADATA_ARCHIVE_SHA256, MODEL_METADATA_ARCHIVE_VERSION_ID
from tests.conftest import aws_environment, pointed_at, render
from tests.tools.test_verify_model import register_copy
from tools import verify_model

TRAINED = "models/pipelines-e1-FineTune/output/model.tar.gz"
EVENT = {
    "ModelArchiveUri": f"s3://artifacts/{TRAINED}",
    "RegistryUri": "s3://artifacts/registry/",
    "Task": "question-answering",
    "Metrics": '{"exact_match": 85.0, "f1": 91.0}',
    "ReportUri": "s3://artifacts/evaluation/e1/evaluation.json",
}
MEASURED, SWAPPED = b"the weights that were evaluated", b"weights of the attacker's choosing"


@pytest.fixture
def local(tmp_path, monkeypatch) -> functions.LocalObjectStore:
    monkeypatch.setenv(LOCAL_S3_ROOT_ENV, str(tmp_path / "s3"))
    return functions.LocalObjectStore(tmp_path / "s3")


def test_a_swap_before_recordmodel_fails_the_step_and_registers_nothing(local):
    """Before: RecordModel hashed the current object, so the swapped bytes were recorded as the trained model."""
    local.put("artifacts", TRAINED, MEASURED)  # the training job's upload
    local.put("artifacts", TRAINED, SWAPPED)  # the swap, after the job, before RecordModel
    with pytest.raises(functions.RecordError, match="has 2 versions"):
        functions.record_model_handler(EVENT)
    assert not local.exists("artifacts", f"registry/{hashlib.sha256(SWAPPED).hexdigest()}/model.tar.gz")


def test_a_swap_written_past_the_version_store_fails_too(local):
    local.put("artifacts", TRAINED, MEASURED)
    (local.root / "artifacts" / TRAINED).write_bytes(SWAPPED)  # no kept version: still a second version
    with pytest.raises(functions.RecordError, match="has 2 versions"):
        functions.record_model_handler(EVENT)


def test_a_swap_after_recordmodel_leaves_the_registered_bytes(local):
    """Before: the package's ModelDataUrl was the models/ key, which then served the swapped bytes."""
    local.put("artifacts", TRAINED, MEASURED)
    recorded = functions.record_model_handler(EVENT)
    local.put("artifacts", TRAINED, SWAPPED)
    sha256 = hashlib.sha256(MEASURED).hexdigest()
    assert recorded["ModelUri"] == f"s3://artifacts/registry/{sha256}/model.tar.gz"
    assert local.get(*functions.split_uri(recorded["ModelUri"]))[0] == MEASURED


def test_bytes_planted_at_the_registry_key_are_refused(local):
    """Someone who could write registry/ (the bucket policy denies it in AWS) plants other bytes under the digest
    of the model about to be recorded: the existing object is hashed, not trusted."""
    local.put("artifacts", f"registry/{hashlib.sha256(MEASURED).hexdigest()}/model.tar.gz", SWAPPED)
    local.put("artifacts", TRAINED, MEASURED)
    with pytest.raises(functions.RecordError, match="registry was tampered with"):
        functions.record_model_handler(EVENT)


def test_on_s3_the_copy_is_of_the_trained_version_and_a_swap_is_caught(moto_url, monkeypatch):
    """The S3 path on moto server: ListObjectVersions, GetObject and CopyObject at a VersionId, CopyObject with
    IfNoneMatch. moto 5.2.5 ignores CopyObject's IfNoneMatch (it copies again): the 412 path is stubbed below."""
    monkeypatch.delenv(LOCAL_S3_ROOT_ENV, raising=False)
    with pointed_at(aws_environment(moto_url)):
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="artifacts")
        s3.put_bucket_versioning(Bucket="artifacts", VersioningConfiguration={"Status": "Enabled"})
        s3.put_object(Bucket="artifacts", Key=TRAINED, Body=MEASURED)
        s3.put_object(Bucket="artifacts", Key=TRAINED + ".other", Body=b"a key with the same prefix")
        recorded = functions.record_model_handler(EVENT)
        key = f"registry/{hashlib.sha256(MEASURED).hexdigest()}/model.tar.gz"
        assert recorded["ModelUri"] == f"s3://artifacts/{key}"
        copy = s3.get_object(Bucket="artifacts", Key=key, VersionId=recorded["ModelVersionId"])
        assert copy["Body"].read() == MEASURED

        s3.put_object(Bucket="artifacts", Key=TRAINED, Body=SWAPPED)
        with pytest.raises(functions.RecordError, match="has 2 versions"):
            functions.record_model_handler(EVENT)


def test_the_copy_is_conditional_and_an_existing_copy_is_not_replaced():
    """CopyObject with IfNoneMatch="*" at the trained VersionId; its 412 PreconditionFailed (the key exists) means no
    copy was made, and the record then hashes the existing object (test_pipeline_functions: reuse)."""
    s3 = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    store = functions.S3ObjectStore.__new__(functions.S3ObjectStore)
    store.s3 = s3
    copy = {
        "CopySource": {"Bucket": "artifacts", "Key": TRAINED, "VersionId": "v1"},
        "Bucket": "artifacts",
        "Key": "registry/d/model.tar.gz",
        "IfNoneMatch": "*",
    }
    with Stubber(s3) as stub:
        stub.add_response("copy_object", {"VersionId": "r1"}, copy)
        stub.add_client_error("copy_object", service_error_code="PreconditionFailed", http_status_code=412)
        assert store.copy_if_absent("artifacts", TRAINED, "v1", "artifacts", "registry/d/model.tar.gz") == "r1"
        assert store.copy_if_absent("artifacts", TRAINED, "v1", "artifacts", "registry/d/model.tar.gz") is None


def test_an_overwrite_with_a_metadata_update_no_longer_passes(moto_url):
    """The issue's emulator attack: overwrite the registered object, then UpdateModelPackage its digest and version
    to the new object's. Before, verify-model compared the object with that metadata only, and said ok."""
    with pointed_at(aws_environment(moto_url)):
        s3, bucket = boto3.client("s3"), "attack-artifacts"
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        registered = register_copy(s3, boto3.client("sagemaker"), bucket, "attack-overwrite", MEASURED)
        assert verify_model.verify(registered.sagemaker, registered.s3, registered.package).problems == []
        swapped = registered.s3.put_object(Bucket=bucket, Key=registered.key, Body=SWAPPED)["VersionId"]
        metadata = registered.sagemaker.describe_model_package(ModelPackageName=registered.package)
        registered.sagemaker.update_model_package(
            ModelPackageArn=registered.package,
            CustomerMetadataProperties={
                **metadata["CustomerMetadataProperties"],
                MODEL_METADATA_ARCHIVE_SHA256: hashlib.sha256(SWAPPED).hexdigest(),
                MODEL_METADATA_ARCHIVE_VERSION_ID: swapped,
            },
        )
        found = verify_model.verify(registered.sagemaker, registered.s3, registered.package).problems
        assert any(
            f"the package's {MODEL_METADATA_ARCHIVE_SHA256} is {hashlib.sha256(SWAPPED).hexdigest()}" in p
            for p in found
        )
        assert any(f"the package's {MODEL_METADATA_ARCHIVE_VERSION_ID} is {swapped}" in p for p in found)
        assert any(f"was overwritten after registration (current version {swapped})" in p for p in found)


def test_a_package_repointed_at_other_bytes_is_reported():
    """UpdateModelPackage also takes InferenceSpecification (moto's keeps the old containers): a package repointed at
    the models/ key differs from what its execution recorded."""
    sha256 = hashlib.sha256(MEASURED).hexdigest()
    recorded = verify_model.Recorded(f"s3://artifacts/registry/{sha256}/model.tar.gz", sha256, "v1")
    repointed = verify_model.Package("arn", f"s3://artifacts/{TRAINED}", sha256, "v1", "e1")
    assert verify_model.package_problems(repointed, recorded) == (
        f"the package's ModelDataUrl is s3://artifacts/{TRAINED}, execution e1's RecordModel recorded "
        f"{recorded.archive}",
    )


# ------------------------------------------------------------------------------------------ the templates


def artifacts_policy(template: dict) -> list[dict]:
    [policy] = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::S3::BucketPolicy" and "Artifacts" in r["Properties"]["Bucket"]["Ref"]
    ]
    return policy


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_only_recordmodel_writes_the_registry_and_nothing_deletes_there(synthesized, env_name):
    environment = synthesized[env_name]
    data, pipeline = environment.templates["data"], environment.templates["pipeline"]
    registry = f"/{environment.settings.layout.registry}/*"
    statements = {s.get("Sid"): s for s in artifacts_policy(data)}
    write = statements["OnlyRecordModelWritesTheRegistry"]
    assert (write["Effect"], write["Principal"], write["Action"]) == ("Deny", {"AWS": "*"}, "s3:PutObject")
    assert render(write["Resource"]).endswith(registry)
    # The one exception is the role the pipeline stack gives RecordModel's function, by its name.
    [record_role] = [
        r for k, r in pipeline["Resources"].items() if r["Type"] == "AWS::IAM::Role" and "RecordModel" in k
    ]
    exempt = render(write["Condition"]["ArnNotEquals"]["aws:PrincipalArn"])
    assert exempt == "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/" + render(
        record_role["Properties"]["RoleName"]
    )
    delete = statements["NothingDeletesFromTheRegistry"]
    assert delete["Effect"] == "Deny" and delete["Action"] == ["s3:DeleteObject", "s3:DeleteObjectVersion"]
    if env_name == "prod":
        assert "Condition" not in delete
    else:  # dev is destroyed with its data: CDK's auto-delete provider alone may empty the bucket
        assert delete["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]["Fn::GetAtt"][0].startswith(
            "CustomS3AutoDeleteObjectsCustomResourceProviderRole"
        )


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_no_lifecycle_rule_expires_what_a_package_references_or_its_versions(synthesized, env_name):
    """Before: `expire-old-artifact-versions` had no filter, so a registry object's noncurrent versions expired
    after 30 days."""
    environment = synthesized[env_name]
    layout = environment.settings.layout
    # A package's ModelDataUrl, its ModelMetrics, and the benchmark version that gated it.
    referenced = (layout.registry + "/", layout.evaluation + "/", layout.benchmarks + "/")
    [artifacts] = [
        r
        for k, r in environment.templates["data"]["Resources"].items()
        if r["Type"] == "AWS::S3::Bucket" and k.startswith("ArtifactsBucket")
    ]
    expiring = [
        rule
        for rule in artifacts["Properties"]["LifecycleConfiguration"]["Rules"]
        if {"ExpirationInDays", "NoncurrentVersionExpiration", "ExpiredObjectDeleteMarker"} & set(rule)
    ]
    assert expiring
    for rule in expiring:  # every expiring rule is scoped to a prefix that referenced keys do not start with
        assert "Prefix" in rule and not any(prefix.startswith(rule["Prefix"]) for prefix in referenced), rule
