"""Issue 30, attack 1 (every manifest PUT, even of identical content, was a new claim and a new p4d run, without
limit) and the parameter half of attack 7 (the claim accepted MaxTrainingCostUSD=1e12 and Epochs=500: 8 x p4d x
24 h is about $7,200 per attempt). Performed against the claim function (LocalObjectStore, and moto server's
versioned S3, where a PUT of the same bytes is a new version id) and against `make start` on moto server.
Not modelled by moto: pipeline executions that keep running (moto's succeed at once, so the limit at once is
performed on the local runner's record of executions) and ListPipelineExecutions' CreatedAfter (ignored)."""

from __future__ import annotations

import json
import time
import uuid

import boto3
import notification_function as notify
import pipeline_functions as functions
import pytest
from qa.notifications import CLAIM_STEP_ENV, FIRST_DELIVERY_STEP_ENV
from qa.outputs import LOCAL_EXECUTIONS_ENV, LOCAL_S3_ROOT_ENV, MANIFEST_V2_FORMAT
from qa.parameter_rules import execution_limit_error

from tests.conftest import aws_environment, pointed_at
from tests.tools.conftest import assert_one_line_error, run_cli
from tools.deployment import ToolError
from tools.executions import claim_event, refuse_past_the_execution_limits

KEY = "datasets/squad/v1/manifest.json"
# Buckets of this module's own on the session's moto server (other tests create theirs).
DATASETS, ARTIFACTS = "bounds-datasets", "bounds-artifacts"
START = ("tools.executions", "start", "--name", "squad", "--version", "v1")
DATA = {"train/train.jsonl": b'{"id": "1"}\n', "validation/validation.json": b'{"data": []}'}


def execution(name: str) -> str:
    return f"arn:aws:sagemaker:us-east-1:123456789012:pipeline/p/execution/{name}"


@pytest.fixture(scope="module")
def definition(deployed_session) -> dict:
    """The dev pipeline definition the stacks deploy (on moto server): its ClaimManifest inputs carry the bounds."""
    return json.loads(deployed_session.pipeline_definition)


def claim(definition: dict, owner: str, version: str, key: str = KEY, **values: object) -> dict:
    """ClaimManifest's event in execution `owner` of the deployed definition, with parameter `values`."""
    event = claim_event(definition, {"DatasetBucket": DATASETS, "ManifestKey": key, "ManifestVersionId": version})
    return {**event, "ExecutionArn": execution(owner), "ArtifactsBucket": ARTIFACTS, **values}


def manifest(store, files: dict[str, bytes], key: str = KEY) -> bytes:
    """The data files, and the v2 manifest make upload-dataset would write for them (not yet uploaded)."""
    import hashlib

    folder = key.rsplit("/", 1)[0]
    listed = [
        {
            "key": name,
            "version_id": store.put(DATASETS, f"{folder}/{name}", body),
            "sha256": hashlib.sha256(body).hexdigest(),
            "size": len(body),
        }
        for name, body in files.items()
    ]
    return json.dumps({"format": MANIFEST_V2_FORMAT, "dataset": "squad", "version": "v1", "files": listed}).encode()


@pytest.fixture
def local(tmp_path, monkeypatch) -> functions.LocalObjectStore:
    monkeypatch.setenv(LOCAL_S3_ROOT_ENV, str(tmp_path / "s3"))
    monkeypatch.setenv(LOCAL_EXECUTIONS_ENV, str(tmp_path / "executions.json"))
    return functions.LocalObjectStore(tmp_path / "s3")


def record(tmp_path, **executions: tuple[str, float]) -> None:
    """The local runner's execution record: name -> (status, start), in start order."""
    recorded = {execution(k): {"status": s, "start": t} for k, (s, t) in executions.items()}
    (tmp_path / "executions.json").write_text(json.dumps(recorded))


def test_a_second_put_of_identical_manifest_bytes_is_a_duplicate_that_says_so(definition, moto_url, monkeypatch):
    """On versioned S3 the same bytes PUT twice are two version ids: before, two claims and two trainings."""
    monkeypatch.delenv(LOCAL_S3_ROOT_ENV, raising=False)
    monkeypatch.setattr(functions, "execution_status", lambda arn: "Executing")
    monkeypatch.setattr(functions, "earlier_executions", lambda arn: (time.time(), []))
    with pointed_at(aws_environment(moto_url)):
        s3 = boto3.client("s3")
        for bucket in (DATASETS, ARTIFACTS):
            s3.create_bucket(Bucket=bucket)
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        store = functions.S3ObjectStore()
        body = manifest(store, DATA)
        first_version, second_version = (store.put(DATASETS, KEY, body) for _ in range(2))
        assert first_version != second_version and first_version and second_version
        first = functions.claim_handler(claim(definition, "a", first_version))
        second = functions.claim_handler(claim(definition, "b", second_version))
    assert first["Duplicate"] == "false" and first["InputUri"]
    assert second["Duplicate"] == "true" and second["ClaimedBy"] == execution("a") and second["InputUri"] == ""
    assert "names the same data" in second["DuplicateReason"] and "nothing new to train" in second["DuplicateReason"]
    # The notification of the duplicate's FirstDelivery step says so, naming the owner.
    monkeypatch.setattr(notify, "claim_outputs", lambda arn, step: second)
    text = notify._step_message(
        {"pipelineExecutionArn": execution("b"), "stepName": "FirstDelivery", "currentStepStatus": "Succeeded"},
        {FIRST_DELIVERY_STEP_ENV: "FirstDelivery", CLAIM_STEP_ENV: "ClaimManifest"},
    )
    assert text is not None and text.startswith("duplicate, nothing trained:") and "names the same data" in text
    assert f"claimed by execution {execution('a')}" in text


def test_a_manifest_put_again_with_other_bytes_but_the_same_pinned_files_is_a_duplicate(definition, tmp_path, local):
    """Re-indenting the manifest (or reordering its entries) gives a new version id and new bytes: still the same
    objects, so still a duplicate. Other data is trained, and data whose owner failed goes to the next execution."""
    record(tmp_path, a=("Succeeded", time.time() - 60), b=("Executing", time.time()))
    body = manifest(local, DATA)
    first_version = local.put(DATASETS, KEY, body)
    parsed = json.loads(body)
    reformatted = json.dumps({**parsed, "files": parsed["files"][::-1]}, indent=2).encode()
    second_version = local.put(DATASETS, KEY, reformatted)
    assert second_version != first_version
    assert functions.claim_handler(claim(definition, "a", first_version))["Duplicate"] == "false"
    second = functions.claim_handler(claim(definition, "b", second_version))
    assert second["Duplicate"] == "true" and second["ClaimedBy"] == execution("a")
    assert "names the same data" in second["DuplicateReason"]
    # The same data for another model (make train MODEL=..., make start PARAMS=...) is a new training.
    other_model = claim(definition, "b", second_version)
    other_model["BaseModelUri"] = other_model["BaseModelsUri"] + "my-model/"
    assert functions.claim_handler(other_model)["Duplicate"] == "false"
    changed = local.put(DATASETS, KEY, manifest(local, {**DATA, "train/train.jsonl": b'{"id": "2"}\n'}))
    assert functions.claim_handler(claim(definition, "b", changed))["Duplicate"] == "false"
    record(tmp_path, a=("Failed", time.time() - 60), b=("Succeeded", time.time() - 30), c=("Executing", time.time()))
    assert functions.claim_handler(claim(definition, "c", first_version))["Duplicate"] == "false"


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"MaxTrainingCostUSD": 1e12}, "Parameter MaxTrainingCostUSD=1000000000000.0 must be between 0 and 18"),
        ({"Epochs": 500}, "Parameter Epochs=500 must be > 0 and at most 10 (limits.max_epochs)."),
        ({"LearningRate": 0.5}, "Parameter LearningRate=0.5 must be > 0 and at most 0.001"),
        ({"TrainingInstanceCount": 64}, "Parameter TrainingInstanceCount=64 must be between 1 and 8"),
    ],
)
def test_the_claim_refuses_a_ceiling_or_a_run_past_the_settings_limits(definition, tmp_path, local, values, says):
    version = local.put(DATASETS, KEY, manifest(local, DATA))
    result = functions.claim_handler(claim(definition, "a", version, **values))
    assert result["ParameterError"].startswith(says) and result["InputUri"] == ""
    assert not (tmp_path / "s3" / ARTIFACTS).exists()  # nothing claimed, nothing pinned


def test_the_claim_refuses_the_execution_past_the_daily_limit_and_past_the_limit_at_once(definition, tmp_path, local):
    """The dev limits (cdk.json defaults): 10 executions in 24 hours, 2 at once; duplicates end quietly anyway."""
    version = local.put(DATASETS, KEY, manifest(local, DATA))
    now = time.time()
    earlier = {f"e{n}": ("Succeeded", now - 3600 + n) for n in range(9)}
    record(tmp_path, old=("Succeeded", now - 25 * 3600), **earlier, me=("Executing", now))
    assert functions.claim_handler(claim(definition, "me", version))["ParameterError"] == ""  # the 10th
    record(tmp_path, old=("Succeeded", now - 25 * 3600), **earlier, e9=("Succeeded", now - 60), n=("Executing", now))
    third = "datasets/squad/v3/manifest.json"
    other = local.put(DATASETS, third, manifest(local, {**DATA, "train/t.jsonl": b"{}"}, third))
    refused = functions.claim_handler(claim(definition, "n", other, key=third))
    assert refused["ParameterError"] == (
        "10 executions of this pipeline started in the 24 hours before this one, and limits.max_executions_per_day "
        "allows 10: start it later, or raise the limit (cdk.json) and deploy."
    )
    assert refused["InputUri"] == ""  # nothing pinned, nothing trained
    record(tmp_path, r1=("Executing", now - 20), r2=("Stopping", now - 10), n=("Executing", now))
    assert (
        "2 earlier executions of this pipeline are still running"
        in (
            functions.claim_handler(claim(definition, "n", other, key="datasets/squad/v3/manifest.json"))[
                "ParameterError"
            ]
        )
    )


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ("MaxTrainingCostUSD=1e12", "Parameter MaxTrainingCostUSD='1e12' must be between 0 and 18"),
        ("Epochs=500", "Parameter Epochs='500' must be > 0 and at most 10 (limits.max_epochs)."),
    ],
)
def test_make_start_refuses_a_ceiling_or_epochs_past_the_limits(deployed, deployed_env, params, says):
    deployed.client("s3").put_object(Bucket=deployed.datasets_bucket, Key=KEY, Body=b"{}")
    sagemaker = deployed.client("sagemaker")
    before = sagemaker.list_pipeline_executions(PipelineName=deployed.pipeline_name)["PipelineExecutionSummaries"]
    assert_one_line_error(run_cli(*START, "--params", params, env=deployed_env), says, "Nothing started")
    after = sagemaker.list_pipeline_executions(PipelineName=deployed.pipeline_name)["PipelineExecutionSummaries"]
    assert len(after) == len(before)


def test_make_start_refuses_the_execution_past_the_daily_limit(deployed, deployed_env):
    """On moto server's pipeline (reset afterwards): 10 executions started today, the 11th is refused."""
    sagemaker = deployed.client("sagemaker")
    deployed.replace_pipeline(deployed.pipeline_definition)
    definition = json.loads(deployed.pipeline_definition)
    event = claim_event(definition, {})
    try:
        for _ in range(9):
            sagemaker.start_pipeline_execution(PipelineName=deployed.pipeline_name, ClientRequestToken=uuid.uuid4().hex)
        refuse_past_the_execution_limits(sagemaker, deployed.pipeline_name, event)  # the 10th may start
        sagemaker.start_pipeline_execution(PipelineName=deployed.pipeline_name, ClientRequestToken=uuid.uuid4().hex)
        with pytest.raises(ToolError, match=r"10 executions of this pipeline started in the 24 hours before this one"):
            refuse_past_the_execution_limits(sagemaker, deployed.pipeline_name, event)
        deployed.client("s3").put_object(Bucket=deployed.datasets_bucket, Key=KEY, Body=b"{}")
        assert_one_line_error(run_cli(*START, env=deployed_env), "limits.max_executions_per_day allows 10")
        # The claim's own count, from the 11th execution's ARN: the 10 before it, the 11th refused.
        eleventh = sagemaker.start_pipeline_execution(
            PipelineName=deployed.pipeline_name, ClientRequestToken=uuid.uuid4().hex
        )["PipelineExecutionArn"]
        start, earlier = functions.earlier_executions(eleventh)
        assert len(earlier) == 10 and "limits.max_executions_per_day" in execution_limit_error(
            event["Bounds"], start, earlier
        )
    finally:
        deployed.replace_pipeline(deployed.pipeline_definition)
