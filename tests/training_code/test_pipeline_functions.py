"""pipeline_functions.py: the claim (parameters, exactly once, take-over, pinning), the cost estimate and the
model record, on the local runner's S3 folder and on the moto server."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import boto3
import botocore
import botocore.session
import pipeline_functions as functions
import pytest
from botocore.stub import Stubber
from qa.cost import UNKNOWN_COST_USD, run_estimate
from qa.outputs import (
    LOCAL_EXECUTIONS_ENV,
    LOCAL_S3_ROOT_ENV,
    MANIFEST_V2_FORMAT,
    MANIFEST_VERSION_UNSET,
    TASK_FILE,
    datasets_root,
)
from tasks import task

from tests.conftest import aws_environment, pointed_at
from tests.training_code.claim_inputs import CONTROLS

KEY = "datasets/squad/v1/manifest.json"
HELD_KEY = "datasets/squad/v1/held-manifest.json"
BOUNDS = json.dumps(
    {
        "MaxInstanceCount": 4,
        "MinF1Threshold": 50.0,
        "MaxEpochs": 10.0,
        "MaxLearningRate": 1e-3,
        "MaxTrainingCostUSD": 200.0,
        "MaxExecutionsPerDay": 10,
        "MaxConcurrentExecutions": 2,
        "GpuMemoryGiB": {},  # no GPU type and no model shape: PerDeviceTrainBatchSize is left to FineTune
        "ModelShape": None,
        "ShapeModelUri": "s3://artifacts/base-models/m/",
        "ActivationBytes": 2,
    }
)


def execution(name: str) -> str:
    return f"arn:aws:sagemaker:local:000000000000:pipeline/p/execution/{name}"


def event(owner: str, version: str, key: str = KEY, **parameters: object) -> dict:
    return {
        "ExecutionArn": execution(owner),
        "DatasetBucket": "datasets",
        "ManifestKey": key,
        "ManifestVersionId": version,
        "ArtifactsBucket": "artifacts",
        "ClaimsPrefix": "claims",
        "InputsPrefix": "inputs",
        "Epochs": 2.0,
        "LearningRate": 3e-5,
        "TrainingInstanceCount": 1,
        "F1Threshold": 80.0,
        "MaxTrainingCostUSD": 100.0,
        "Bounds": BOUNDS,
        "BaseModelUri": "s3://artifacts/base-models/m/",
        "BaseModelsUri": "s3://artifacts/base-models/",
        "UploadedBy": "111122223333",
        "Task": "question-answering",
        **CONTROLS,
        **parameters,
    }


@pytest.fixture
def local(tmp_path, monkeypatch) -> functions.LocalObjectStore:
    monkeypatch.setenv(LOCAL_S3_ROOT_ENV, str(tmp_path / "s3"))
    monkeypatch.setenv(LOCAL_EXECUTIONS_ENV, str(tmp_path / "executions.json"))
    return functions.LocalObjectStore(tmp_path / "s3")


def statuses(tmp_path: Path, **by_name: str) -> None:
    (tmp_path / "executions.json").write_text(json.dumps({execution(k): v for k, v in by_name.items()}))


def upload(store, files: dict[str, bytes], key: str = KEY) -> str:
    """Data files, then a v2 manifest naming each at its version; the manifest's version id."""
    folder = key.rsplit("/", 1)[0]
    listed = [
        {"key": name, "version_id": store.put("datasets", f"{folder}/{name}", body), "size": len(body)}
        for name, body in files.items()
    ]
    manifest = {"format": MANIFEST_V2_FORMAT, "dataset": "squad", "version": "v1", "files": listed}
    return store.put("datasets", key, json.dumps(manifest).encode())


DATA = {"train/train.jsonl": b'{"id": "1"}\n', "validation/validation.json": b'{"data": []}'}


def pinned(store, input_uri: str, name: str) -> bytes:
    bucket, prefix = functions.split_uri(input_uri)
    return store.get(bucket, prefix + name)[0]


@pytest.mark.parametrize("key", [KEY, HELD_KEY])  # a held upload's manifest (make upload-dataset NO_RUN=1 | PARAMS=)
def test_one_execution_owns_a_manifest_version_and_a_duplicate_names_it(tmp_path, local, key):
    """A second start of the same manifest version (a second delivery, or make start again) ends as a duplicate."""
    version = upload(local, DATA, key)
    statuses(tmp_path, a="Executing")
    first = functions.claim_handler(event("a", version, key))
    assert first["Duplicate"] == "false" and first["ClaimedBy"] == execution("a") and first["ParameterError"] == ""
    second = functions.claim_handler(event("b", version, key))
    assert second == {**second, "Duplicate": "true", "ClaimedBy": execution("a"), "InputUri": ""}
    assert functions.claim_handler(event("a", version, key))["Duplicate"] == "false"  # a retry of the owner's step
    assert len(list((tmp_path / "s3" / "artifacts" / "claims").glob("*.json"))) == 1


def test_a_new_upload_of_the_same_key_is_a_new_claim_with_its_own_pinned_data(tmp_path, local):
    """A re-upload under the same manifest key (a new S3 version) is new data: a new owner, not a duplicate."""
    first_version = upload(local, DATA)
    statuses(tmp_path, a="Executing", b="Executing")
    first = functions.claim_handler(event("a", first_version))
    second_version = upload(local, {**DATA, "train/train.jsonl": b'{"id": "2"}\n'})
    second = functions.claim_handler(event("b", second_version))
    assert second_version != first_version
    assert second["Duplicate"] == "false" and second["ClaimedBy"] == execution("b")
    assert second["InputUri"] != first["InputUri"]
    assert pinned(local, second["InputUri"], "train/train.jsonl") == b'{"id": "2"}\n'
    assert pinned(local, first["InputUri"], "train/train.jsonl") == b'{"id": "1"}\n'
    assert len(list((tmp_path / "s3" / "artifacts" / "claims").glob("*.json"))) == 2


def test_the_execution_trains_on_the_versions_its_manifest_pins(tmp_path, local):
    version = upload(local, DATA)
    local.put("datasets", "datasets/squad/v1/train/train.jsonl", b'{"id": "uploaded later"}\n')
    result = functions.claim_handler(event("a", version))
    assert pinned(local, result["InputUri"], "train/train.jsonl") == DATA["train/train.jsonl"]
    manifest = json.loads(pinned(local, result["InputUri"], "manifest.json"))
    assert manifest == [{"prefix": result["InputUri"]}, *DATA]  # what preprocess.py reads


def test_an_old_array_manifest_pins_the_versions_current_at_claim_time(tmp_path, local):
    for name, body in DATA.items():
        local.put("datasets", f"datasets/squad/v1/{name}", body)
    legacy = [{"prefix": "s3://datasets/datasets/squad/v1/"}, *DATA]
    version = local.put("datasets", KEY, json.dumps(legacy).encode())
    result = functions.claim_handler(event("a", version))
    local.put("datasets", "datasets/squad/v1/train/train.jsonl", b"changed after the claim\n")
    assert pinned(local, result["InputUri"], "train/train.jsonl") == DATA["train/train.jsonl"]


def test_a_failed_or_stopped_owner_is_taken_over_and_a_running_one_is_not(tmp_path, local):
    version = upload(local, DATA)
    functions.claim_handler(event("a", version))
    for status, duplicate in (("Executing", "true"), ("Succeeded", "true"), ("Failed", "false")):
        statuses(tmp_path, a=status)
        assert functions.claim_handler(event("b", version))["Duplicate"] == duplicate, status
    statuses(tmp_path, a="Failed", b="Stopped")
    taken = functions.claim_handler(event("c", version))
    assert taken["Duplicate"] == "false" and taken["ClaimedBy"] == execution("c")
    # The new owner reads the copy pinned by the first one (nothing copied again).
    assert pinned(local, taken["InputUri"], "train/train.jsonl") == DATA["train/train.jsonl"]


def claim_path(tmp_path: Path, version: str) -> Path:
    return tmp_path / "s3" / "artifacts" / "claims" / f"{functions.claim_digest('datasets', KEY, version)}.json"


def test_a_claim_overwritten_by_another_writer_is_an_error_not_a_silent_skip(tmp_path, local):
    version = upload(local, DATA)
    statuses(tmp_path, a="Executing")
    functions.claim_handler(event("a", version))
    claim_path(tmp_path, version).write_text(
        json.dumps({"execution_arn": "arn:aws:sagemaker:x:1:pipeline/p/execution/z"})
    )
    with pytest.raises(functions.ClaimError, match=r"names .*execution/z, which is no execution of this pipeline"):
        functions.claim_handler(event("a", version))


@pytest.mark.parametrize(("body", "says"), [(b"", "is empty"), (b"{not json", "not a claim"), (b"[]", "not a claim")])
def test_an_empty_or_corrupt_claim_is_a_clear_error(tmp_path, local, body, says):
    version = upload(local, DATA)
    claim = claim_path(tmp_path, version)
    claim.parent.mkdir(parents=True)
    claim.write_bytes(body)
    with pytest.raises(functions.ClaimError, match=f"claim object s3://artifacts/claims/.* {says}.*delete it"):
        functions.claim_handler(event("a", version))


@pytest.mark.parametrize(
    "key",
    [
        "datasets/mf/v1/train/manifest.json",
        "datasets/a/b/c/manifest.json",
        "datasets/a/manifest.json",
        "datasets/mf/v1/train/held-manifest.json",
        "datasets/mf/v1/xheld-manifest.json",
    ],
)
def test_a_key_that_is_no_manifest_ends_quietly_with_one_line(tmp_path, local, key):
    result = functions.claim_handler(event("a", "v-1", key=key))
    assert "is not a manifest key" in result["Ignored"] and "\n" not in result["Ignored"]
    assert result["ParameterError"] == "" and result["Duplicate"] == "false"
    assert not (tmp_path / "s3" / "artifacts").exists()


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("Epochs", -1, "Epochs=-1 must be > 0 and at most 10 (limits.max_epochs)"),
        ("Epochs", "two", "Epochs='two' is not a number"),
        ("TrainingInstanceCount", 0, "TrainingInstanceCount=0 must be between 1 and 4 (training.max_instance_count)"),
        ("TrainingInstanceCount", 5, "TrainingInstanceCount=5 must be between 1 and 4 (training.max_instance_count)"),
        ("LearningRate", 0, "LearningRate=0 must be > 0 and at most 0.001 (limits.max_learning_rate)"),
        ("LearningRate", -1e-5, "LearningRate=-1e-05 must be > 0 and at most 0.001 (limits.max_learning_rate)"),
        ("F1Threshold", 150, "F1Threshold=150 must be between 50 and 100"),
        ("F1Threshold", 10, "F1Threshold=10 must be between 50 and 100"),
        (
            "MaxTrainingCostUSD",
            -1,
            "MaxTrainingCostUSD=-1 must be between 0 and 200 (limits.max_training_cost_usd, or "
            "limits.max_cost_multiple x the estimate of make estimate)",
        ),
        ("Epochs", "nan", "Epochs='nan' is not a finite number"),
    ],
)
def test_a_bad_parameter_is_one_line_naming_it_and_claims_nothing(tmp_path, local, name, value, says):
    result = functions.claim_handler(event("a", "v-1", **{name: value}))
    assert result["ParameterError"] == f"Parameter {says}."
    assert not (tmp_path / "s3" / "artifacts").exists()


def test_every_claim_output_fits_a_lambda_step_output_whatever_the_values(tmp_path, local):
    """A Lambda step output value holds at most 1,024 characters (API_OutputParameter, botocore's shape:
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_OutputParameter.html), and a pipeline parameter
    value or an S3 key may be 1,024 characters long (API_Parameter; S3 object keys): the messages quote values
    shortened. Before, the "ignored key" line quoted the whole key and overflowed."""
    limit = botocore.session.get_session().get_service_model("sagemaker").shape_for("OutputParameter")
    most = limit.members["Value"].metadata["max"]
    long_key = "datasets/" + "k" * (1024 - len("datasets/"))
    ignored = functions.claim_handler(event("a", "v-1", key=long_key))
    assert "is not a manifest key" in ignored["Ignored"] and len(ignored["Ignored"]) <= most
    for name in ("Epochs", "LearningRate", "TrainingInstanceCount", "F1Threshold", "MaxTrainingCostUSD"):
        refused = functions.claim_handler(event("a", "v-1", **{name: "9" * 1023 + "x"}))["ParameterError"]
        assert refused.startswith(f"Parameter {name}='9999") and len(refused) <= most
    refused = functions.claim_handler(event("a", "v-1", BaseModelUri="s3://" + "b" * 1019))["ParameterError"]
    assert refused.startswith("Parameter BaseModelUri=") and len(refused) <= most
    assert not (tmp_path / "s3" / "artifacts").exists()


def test_a_file_whose_pinned_copy_would_overflow_an_s3_key_stops_the_claim_before_any_copy(tmp_path, local):
    """S3 keys hold at most 1,024 bytes (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html):
    a dataset file's key fits where it was uploaded but not in its pinned copy, inputs/<64-hex digest>/<path>.
    Before, the claim's CopyObject failed with S3's error (locally, the copy went through)."""
    relative = "train/" + "/".join(letter * 200 for letter in "abcd") + "/" + "e" * 140 + ".jsonl"
    assert len(f"datasets/squad/v1/{relative}") <= 1024 < len(f"inputs/{'0' * 64}/{relative}")
    version = upload(local, {relative: b'{"id": "1"}\n', "validation/validation.json": b'{"data": []}'})
    with pytest.raises(functions.ClaimError, match=r"lists 'train/.* its S3 key would have 1028 bytes"):
        functions.claim_handler(event("a", version))
    assert not (tmp_path / "s3" / "artifacts" / "inputs").exists()


def test_a_run_started_without_the_manifest_version_stops_with_the_fix(local):
    result = functions.claim_handler(event("a", MANIFEST_VERSION_UNSET))
    assert result["ParameterError"].startswith("Parameter ManifestVersionId is not set: pass the manifest's S3")


def test_a_manifest_naming_a_missing_file_or_leaving_its_folder_fails_with_the_key(tmp_path, local):
    version = local.put(
        "datasets",
        KEY,
        json.dumps({"format": MANIFEST_V2_FORMAT, "files": [{"key": "train/x.jsonl", "version_id": "v"}]}).encode(),
    )
    with pytest.raises(
        functions.ClaimError, match=r"datasets/squad/v1/train/x.jsonl \(version v\) named by the manifest"
    ):
        functions.claim_handler(event("a", version))
    escaping = local.put(
        "datasets",
        KEY,
        json.dumps({"format": MANIFEST_V2_FORMAT, "files": [{"key": "../other/x", "version_id": "v"}]}).encode(),
    )
    with pytest.raises(functions.ClaimError, match=r"keys must be relative, without '\.\.'"):
        functions.claim_handler(event("b", escaping))


def test_a_manifest_key_outside_the_split_folders_is_refused_before_any_job(tmp_path, local):
    """What the upload wrote for a DatasetDict folder before (`train.jsonl` at the dataset root): the claim copied
    it and ValidateAndTokenize, a billed processing job, rejected it (its reader takes a key's first segment as the
    split). The claim, a Lambda step (no instance), refuses it now, copying nothing."""
    version = upload(local, {"train.jsonl": b'{"id": "1"}\n', "validation/validation.jsonl": b'{"id": "2"}\n'})
    with pytest.raises(
        functions.ClaimError, match=r"lists 'train\.jsonl', which is not under train/ or validation/: upload the"
    ):
        functions.claim_handler(event("a", version))
    assert not list((tmp_path / "s3" / "artifacts").glob("inputs/*/*"))


def write_stats_and_model(store) -> dict:
    stats = {
        "splits": {
            "train": {"length_histogram": {"96-127": 30, "192-223": 10}},
            "validation": {"length_histogram": {"96-127": 5}},
        }
    }
    store.put("artifacts", "processed/e/stats/stats.json", json.dumps(stats).encode())
    config = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "vocab_size": 1000}
    store.put("artifacts", "base-models/m/config.json", json.dumps(config).encode())
    return config


def cost_model() -> dict:
    from config import load_settings, read_cdk_json_context
    from config.costs import cost_model as settings_cost_model

    return settings_cost_model(load_settings(read_cdk_json_context()))


def estimate_event(**overrides: object) -> dict:
    return {
        "StatsUri": "s3://artifacts/processed/e/stats/stats.json",
        "BaseModelUri": "s3://artifacts/base-models/m/",
        "TrainingInstanceType": "ml.p4d.24xlarge",
        "TrainingInstanceCount": 1,
        "Epochs": 1.0,
        "CostModel": json.dumps(cost_model()),
        **overrides,
    }


def test_the_estimate_prices_this_executions_choice_with_qa_cost(local):
    config = write_stats_and_model(local)
    one = functions.estimate_cost_handler(estimate_event())["EstimatedCostUSD"]
    expected = run_estimate(cost_model(), config, {127: 30, 223: 10}, {127: 5}, "ml.p4d.24xlarge", 1, 1.0)
    assert one == expected["training_on_demand_usd"] and one > 0
    # Start-up bills on every instance: a second one costs more; the histogram is read at its upper bounds.
    assert functions.estimate_cost_handler(estimate_event(TrainingInstanceCount=2))["EstimatedCostUSD"] > one
    unknown = functions.estimate_cost_handler(estimate_event(TrainingInstanceType="ml.p5.48xlarge"))
    assert unknown["EstimatedCostUSD"] == UNKNOWN_COST_USD  # the guard stops a run it cannot price


def test_the_estimate_prices_every_feature_of_a_heavily_windowed_dataset(local):
    """Issue 29's dataset: 160 examples, 82,464 features of up to 384 tokens. The estimate reads the features from
    the length histogram (one count per feature, tests/training_code/test_data_validation.py checks preprocess.py
    writes it so), so with the deployed default model, BERT-large, it prices them all; MiniLM (the demo) trains
    them in seconds, so its estimate hardly moves. (This held before issue 29 too: the dataset is refused for its
    windows per example, by ValidateAndTokenize, not by the cost ceiling.)"""
    from qa.cost import BERT_LARGE

    local.put("artifacts", "base-models/m/config.json", json.dumps(BERT_LARGE).encode())

    def estimate(train_features: int) -> float:
        stats = {
            "splits": {
                "train": {"features": train_features, "length_histogram": {"352-383": train_features}},
                "validation": {"features": 40, "length_histogram": {"352-383": 40}},
            }
        }
        local.put("artifacts", "processed/e/stats/stats.json", json.dumps(stats).encode())
        return functions.estimate_cost_handler(estimate_event(Epochs=2.0))["EstimatedCostUSD"]

    expected = run_estimate(cost_model(), BERT_LARGE, {383: 82_464}, {383: 40}, "ml.p4d.24xlarge", 1, 2.0)
    assert estimate(82_464) == expected["training_on_demand_usd"] > estimate(160) + 1.5


RECORD_EVENT = {
    "ModelArchiveUri": "s3://artifacts/models/job/output/model.tar.gz",
    "RegistryUri": "s3://artifacts/registry/",
    "Task": "question-answering",
    "Metrics": '{"exact_match": 84.25, "f1": 91.5}',
    "ReportUri": "s3://artifacts/evaluation/e/evaluation.json",
}


def test_the_record_copies_the_archive_to_the_registry_and_writes_the_model_quality_report(local):
    archive = b"model archive bytes" * 1000
    version = local.put("artifacts", "models/job/output/model.tar.gz", archive)
    result = functions.record_model_handler(RECORD_EVENT)
    sha256 = hashlib.sha256(archive).hexdigest()
    assert result["ModelSha256"] == sha256 and result["TrainedVersionId"] == version
    assert result["ModelUri"] == f"s3://artifacts/registry/{sha256}/model.tar.gz"
    assert local.get("artifacts", f"registry/{sha256}/model.tar.gz", result["ModelVersionId"])[0] == archive
    report = json.loads(local.get("artifacts", "evaluation/e/evaluation.json")[0])
    assert report["metrics"] == {"f1": {"value": 91.5}, "exact_match": {"value": 84.25}}
    assert report["model"]["sha256"] == sha256 and report["model"]["uri"] == result["ModelUri"]
    # The same bytes trained again (another execution): the registry object is reused, not replaced.
    local.put("artifacts", "models/job2/output/model.tar.gz", archive)
    again = functions.record_model_handler(
        {**RECORD_EVENT, "ModelArchiveUri": "s3://artifacts/models/job2/output/model.tar.gz"}
    )
    assert (again["ModelUri"], again["ModelVersionId"]) == (result["ModelUri"], result["ModelVersionId"])


def test_the_claim_on_s3_with_conditional_writes(moto_url, monkeypatch):
    """The real S3 path on moto server: versioned buckets, the 412 of put_object(IfNoneMatch="*"), copy_object at a
    VersionId, and the take-over's put_object(IfMatch=etag). Not modelled by moto: pipeline executions (their
    status comes from a stand-in here) and the 409 ConditionalRequestConflict of concurrent writes (below)."""
    monkeypatch.delenv(LOCAL_S3_ROOT_ENV, raising=False)
    owners = {execution("a"): "Executing"}
    monkeypatch.setattr(functions, "execution_status", lambda arn: owners.get(arn, "Unknown"))
    monkeypatch.setattr(functions, "earlier_executions", lambda arn: (0.0, []))
    with pointed_at(aws_environment(moto_url)):
        s3 = boto3.client("s3")
        for bucket in ("datasets", "artifacts"):
            s3.create_bucket(Bucket=bucket)
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        store = functions.S3ObjectStore()
        version = upload(store, DATA)
        s3.put_object(Bucket="datasets", Key="datasets/squad/v1/train/train.jsonl", Body=b"a second upload\n")
        first = functions.claim_handler(event("a", version))
        assert first["Duplicate"] == "false"
        copied = s3.get_object(Bucket="artifacts", Key=functions.split_uri(first["InputUri"])[1] + "train/train.jsonl")
        assert copied["Body"].read() == DATA["train/train.jsonl"]
        assert functions.claim_handler(event("b", version))["ClaimedBy"] == execution("a")
        owners[execution("a")] = "Failed"
        taken = functions.claim_handler(event("b", version))
        assert taken["Duplicate"] == "false" and taken["ClaimedBy"] == execution("b")
        [stored] = [
            o
            for o in s3.list_objects_v2(Bucket="artifacts", Prefix="claims/")["Contents"]
            if "/content/" not in o["Key"]
        ]
        claim = json.loads(s3.get_object(Bucket="artifacts", Key=stored["Key"])["Body"].read())
        assert claim["execution_arn"] == execution("b")


def test_a_runtime_sdk_without_conditional_writes_stops_the_store_in_one_line(tmp_path, monkeypatch):
    """The Lambda runtime's SDK "depends on the runtime version and your AWS Region" (lambda-python page,
    Runtime-included SDK versions): with an S3 model that has no PutObject IfMatch (botocore before 1.35.69), the
    store stops before any S3 call, in one line naming the version found and the one needed, instead of failing
    the claim's conditional write with botocore's parameter-validation error."""
    session = botocore.session.Session()
    model = copy.deepcopy(session.get_component("data_loader").load_service_model("s3", "service-2"))
    del model["shapes"]["PutObjectRequest"]["members"]["IfMatch"]
    folder = tmp_path / "s3" / model["metadata"]["apiVersion"]
    folder.mkdir(parents=True)
    (folder / "service-2.json").write_text(json.dumps(model))
    older = botocore.session.Session()
    older.get_component("data_loader").search_paths.insert(0, str(tmp_path))
    client = older.create_client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    monkeypatch.setattr(boto3, "client", lambda service: client)
    monkeypatch.setattr(botocore, "__version__", "1.35.68")
    with pytest.raises(functions.SdkTooOld) as raised:
        functions.S3ObjectStore()
    assert str(raised.value) == (
        "botocore 1.35.68 in this Lambda runtime has no S3 PutObject IfMatch (conditional writes): the pipeline "
        "functions need botocore >= 1.35.69"
    )


def test_a_persistent_write_conflict_fails_with_a_message_after_retries(monkeypatch):
    """409 ConditionalRequestConflict (not modelled by moto): retried, as S3's conditional-writes page says;
    when it persists, the claim fails with a message instead of reporting a false duplicate."""
    s3 = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    store = functions.S3ObjectStore.__new__(functions.S3ObjectStore)
    store.s3 = s3
    monkeypatch.setattr(functions.time, "sleep", lambda seconds: None)
    with Stubber(s3) as stub:
        stub.add_client_error("put_object", service_error_code="ConditionalRequestConflict", http_status_code=409)
        stub.add_client_error("put_object", service_error_code="PreconditionFailed", http_status_code=412)
        assert store.create_if_absent("artifacts", "claims/k.json", b"{}") is False
        stub.assert_no_pending_responses()
    with Stubber(s3) as stub:
        for _ in range(functions.CONFLICT_RETRIES + 1):
            stub.add_client_error("put_object", service_error_code="ConditionalRequestConflict", http_status_code=409)
        with pytest.raises(functions.ClaimError, match=r"ConditionalRequestConflict.*retry the execution"):
            store.create_if_absent("artifacts", "claims/k.json", b"{}")


def test_on_s3_an_overwritten_or_corrupt_claim_is_an_error_and_a_nested_manifest_key_starts_nothing(
    moto_url, monkeypatch
):
    """The claim's failure paths on moto server's S3 (buckets of this test's own; moto does not model pipeline
    executions, so their status comes from a stand-in): another writer's claim naming an execution this
    pipeline does not have and an empty or corrupt claim object stop the owner's retry with an error instead of a
    silent duplicate, and a nested manifest.json key ends quietly without writing anything."""
    monkeypatch.delenv(LOCAL_S3_ROOT_ENV, raising=False)
    monkeypatch.setattr(functions, "execution_status", lambda arn: "Executing" if arn == execution("a") else "Unknown")
    monkeypatch.setattr(functions, "earlier_executions", lambda arn: (0.0, []))
    buckets = {"DatasetBucket": "claims-ds-on-moto", "ArtifactsBucket": "claims-art-on-moto"}
    with pointed_at(aws_environment(moto_url)):
        s3 = boto3.client("s3")
        for bucket in buckets.values():
            s3.create_bucket(Bucket=bucket)
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        store = functions.S3ObjectStore()
        listed = [
            {"key": name, "version_id": store.put(buckets["DatasetBucket"], f"datasets/squad/v1/{name}", body)}
            for name, body in DATA.items()
        ]
        manifest = {"format": MANIFEST_V2_FORMAT, "dataset": "squad", "version": "v1", "files": listed}
        version = store.put(buckets["DatasetBucket"], KEY, json.dumps(manifest).encode())
        assert version is not None
        assert functions.claim_handler(event("a", version, **buckets))["Duplicate"] == "false"
        claim_key = f"claims/{functions.claim_digest(buckets['DatasetBucket'], KEY, version)}.json"
        overwritten = json.dumps({"execution_arn": "arn:aws:sagemaker:x:1:pipeline/p/execution/z"}).encode()
        for body, says in (
            (overwritten, "which is no execution of this pipeline"),
            (b"", "is empty"),
            (b"{x", "not a claim"),
        ):
            s3.put_object(Bucket=buckets["ArtifactsBucket"], Key=claim_key, Body=body)
            with pytest.raises(functions.ClaimError, match=says):
                functions.claim_handler(event("a", version, **buckets))
        nested = functions.claim_handler(event("a", "v-1", key="datasets/mf/v1/train/manifest.json", **buckets))
        assert "is not a manifest key" in nested["Ignored"]
        claims = s3.list_objects_v2(Bucket=buckets["ArtifactsBucket"], Prefix="claims/")["Contents"]
        # The nested key claimed nothing: the claims are the first execution's (its version and its content).
        assert [c["Key"] for c in claims if "/content/" not in c["Key"]] == [claim_key]
        assert len(claims) == 2


def upload_declaring(
    store, task_name: str, label_names: list[str] | None = None, pipeline_task: str = "question-answering"
) -> tuple[str, str]:
    """A v2 manifest of the SQuAD records DATA that declares a task (manifest v2's optional `task`) and, when given,
    label names, uploaded under the dataset root of `pipeline_task`'s pipeline; its key and version id."""
    folder = f"{datasets_root(task(pipeline_task).RESOURCE_INFIX)}/squad/v1/"
    listed = [{"key": k, "version_id": store.put("datasets", folder + k, b), "size": len(b)} for k, b in DATA.items()]
    manifest = {"format": MANIFEST_V2_FORMAT, "dataset": "squad", "version": "v1", "task": task_name, "files": listed}
    if label_names is not None:
        manifest["label_names"] = label_names
    key = folder + "manifest.json"
    return key, store.put("datasets", key, json.dumps(manifest).encode())


def test_a_manifest_of_another_task_is_refused_in_one_line_and_claims_nothing(tmp_path, local):
    key, version = upload_declaring(local, "text-classification")
    result = functions.claim_handler(event("a", version, key))
    assert result["ParameterError"] == (
        "manifest task 'text-classification' does not match this pipeline's task question-answering: upload it to "
        "the pipeline of 'text-classification', or change the manifest's task"
    )
    assert not (tmp_path / "s3" / "artifacts").exists()
    # The pipeline's own task declared: claimed and pinned as any other manifest.
    same_key, same_version = upload_declaring(local, "question-answering")
    same = functions.claim_handler(event("b", same_version, same_key))
    assert same["ParameterError"] == "" and same["InputUri"]


@pytest.mark.parametrize(
    ("task_name", "names", "refusal"),
    [
        ("token-classification", ["O", "B-PER", "I-PER"], "field=tokens: must be a non-empty list of words"),
        ("text-classification", ["yes", "no"], "field=text: missing (fix: add 'text')"),
    ],
)
def test_the_claim_pins_the_task_and_its_label_names_and_validates_records_as_the_tasks(
    local, task_name, names, refusal
):
    """Beside the pinned manifest, the task file names the pipeline's task and the manifest's label names (what the
    jobs build the head from); a validating claim reads the records as that task's, here SQuAD records: refused
    with one line per record naming the field, before any job."""
    key, version = upload_declaring(local, task_name, names, pipeline_task=task_name)
    validating = event("a", version, key, Task=task_name, ValidateRecords="true", MaxWindowsPerExample=100)
    result = functions.claim_handler({**validating, "SkipInvalidRecords": "false"})
    assert result["ParameterError"] == "" and result["InputUri"]
    pinned = result["InputUri"].removeprefix("s3://artifacts/")
    assert json.loads(local.get("artifacts", pinned + TASK_FILE)[0]) == {"task": task_name, "label_names": names}
    assert refusal in result["DatasetError"] and "error: dataset rejected" in result["DatasetError"]


def test_label_names_other_than_the_benchmark_s_are_refused_before_anything_is_claimed(tmp_path, local):
    """With a pinned benchmark of a task with labels (BenchmarkLabelNames, steps/claim.py), the manifest must declare
    the same names in the same order: the gate reads the benchmark's labels by index."""
    pinned = {"Task": "text-classification", "BenchmarkLabelNames": json.dumps(["yes", "no"])}
    for names, shown in ((["no", "yes"], '\'["no", "yes"]\''), (None, "'null'")):
        key, version = upload_declaring(local, "text-classification", names, pipeline_task="text-classification")
        result = functions.claim_handler(event("a", version, key, **pinned))
        assert result["ParameterError"] == (
            f'manifest label_names {shown} are not the benchmark\'s \'["yes", "no"]\' '
            "(evaluation.benchmark.label_names): the gate scores on the benchmark, so declare its label names in its "
            "order"
        )
    assert not (tmp_path / "s3" / "artifacts").exists()
    key, version = upload_declaring(local, "text-classification", ["yes", "no"], pipeline_task="text-classification")
    same = functions.claim_handler(event("b", version, key, **pinned))
    assert same["ParameterError"] == "" and same["InputUri"]


def test_the_record_names_each_metric_of_the_task_gate_first_and_refuses_a_missing_one(local):
    local.put("artifacts", "models/job/output/model.tar.gz", b"weights")
    functions.record_model_handler(
        {**RECORD_EVENT, "Task": "text-classification", "Metrics": '{"accuracy": "90.0", "macro_f1": 88.5}'}
    )
    report = json.loads(local.get("artifacts", "evaluation/e/evaluation.json")[0])
    assert list(report["metrics"].items()) == [("macro_f1", {"value": 88.5}), ("accuracy", {"value": 90.0})]
    with pytest.raises(ValueError, match="Metrics has no macro_f1"):
        functions.record_model_handler({**RECORD_EVENT, "Task": "text-classification", "Metrics": '{"accuracy": 1}'})
