"""tools.upload_dataset as a user meets it: run as a command against the moto server (see conftest.py)."""

from __future__ import annotations

import json
import shutil
import threading
import time
from datetime import UTC, datetime

import pytest

from tests.conftest import ROOT
from tests.tools.conftest import assert_one_line_error, run_cli, stage_base_model
from tools.deployment import ToolError
from tools.upload_dataset import UploadPlan, expected_parameters, find_execution, upload, validate_dataset

SAMPLE = ROOT / "data" / "sample-squad"
UPLOAD = ("tools.upload_dataset", "--dataset", str(SAMPLE), "--name", "sample-squad", "--version", "v1")
MANIFEST_KEY = "datasets/sample-squad/v1/manifest.json"


def test_validate_only_needs_no_credentials():
    result = run_cli(
        *UPLOAD, "--validate-only", env={"AWS_CONFIG_FILE": "/nonexistent", "AWS_EC2_METADATA_DISABLED": "true"}
    )
    assert result.returncode == 0, result.stderr
    assert "validated" in result.stdout and "nothing uploaded" in result.stdout


def test_invalid_dataset_uploads_nothing(tmp_path):
    shutil.copytree(SAMPLE, tmp_path / "d")
    train = tmp_path / "d" / "train" / "train.jsonl"
    lines = train.read_text().splitlines()
    bad = json.loads(lines[3])
    bad["answers"]["answer_start"] = [0]
    train.write_text("\n".join([*lines[:3], json.dumps(bad), *lines[4:]]) + "\n")
    result = run_cli("tools.upload_dataset", "--dataset", str(tmp_path / "d"), "--name", "x", "--validate-only", env={})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "train/train.jsonl:line 4 id=train-000-3 field=answers.answer_start[0]" in result.stderr
    assert result.stderr.strip().splitlines()[-1] == "error: nothing uploaded: fix the records listed above"


def test_bad_names_are_rejected():
    with pytest.raises(ToolError, match="--name"):
        validate_dataset(SAMPLE, "../escape", "v1")


def test_missing_credentials(aws):
    env = {k: v for k, v in aws.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    assert_one_line_error(run_cli(*UPLOAD, env=env), "no AWS credentials found", "aws configure")


def test_no_region(aws):
    env = {k: v for k, v in aws.items() if k not in ("AWS_REGION", "AWS_DEFAULT_REGION")}
    assert_one_line_error(run_cli(*UPLOAD, env=env), "no AWS region", "AWS_REGION")


def test_unknown_environment(aws):
    assert_one_line_error(run_cli(*UPLOAD, "--env", "staging", env=aws), "unknown environment 'staging'", "dev, prod")


def test_stacks_not_deployed(aws):
    line = assert_one_line_error(run_cli(*UPLOAD, env=aws), "datasets bucket", "make deploy ENV=dev")
    assert "does not exist" in line


def test_pipeline_missing(deployed, deployed_env):
    deployed.replace_pipeline(None)
    try:
        result = run_cli(*UPLOAD, env=deployed_env)
    finally:
        deployed.replace_pipeline(deployed.pipeline_definition)
    assert_one_line_error(result, f"pipeline {deployed.pipeline_name} not found in us-east-1", "make deploy ENV=dev")


def test_base_model_not_staged_uploads_nothing(deployed, deployed_env):
    assert_one_line_error(
        run_cli(*UPLOAD, env=deployed_env),
        f"base model not staged at {deployed.base_model_uri}",
        "make stage-model MODEL=bert-large-uncased-whole-word-masking ENV=dev",
    )
    assert deployed.client("s3").list_objects_v2(Bucket=deployed.datasets_bucket)["KeyCount"] == 0


def trigger_when_manifest_arrives(deployed, other_key: str) -> threading.Thread:
    """Stand in for the EventBridge trigger: once the manifest is in the bucket, start its execution, then one
    for another manifest."""
    s3 = deployed.client("s3")

    def trigger() -> None:
        for _ in range(600):
            if s3.list_objects_v2(Bucket=deployed.datasets_bucket, Prefix=MANIFEST_KEY)["KeyCount"]:
                break
            time.sleep(0.1)
        deployed.start_as_trigger(MANIFEST_KEY)
        deployed.start_as_trigger(other_key, {"etag": "0" * 32, "version-id": "other"})

    thread = threading.Thread(target=trigger, daemon=True)
    thread.start()
    return thread


def test_upload_reports_the_execution_its_manifest_started(deployed, deployed_env, tmp_path):
    stage_base_model(deployed, tmp_path)
    trigger = trigger_when_manifest_arrives(deployed, "datasets/other/v1/manifest.json")  # the other one last
    result = run_cli(*UPLOAD, "--wait-seconds", "60", env=deployed_env)
    trigger.join()
    assert result.returncode == 0, result.stderr
    sagemaker = deployed.client("sagemaker")
    arns = {
        s["PipelineExecutionArn"]: {
            p["Name"]: p["Value"]
            for p in sagemaker.list_pipeline_parameters_for_execution(PipelineExecutionArn=s["PipelineExecutionArn"])[
                "PipelineParameters"
            ]
        }["ManifestKey"]
        for s in sagemaker.list_pipeline_executions(PipelineName=deployed.pipeline_name)["PipelineExecutionSummaries"]
    }
    reported = result.stdout.strip().splitlines()[-1].removeprefix("pipeline execution: ")
    assert arns[reported] == MANIFEST_KEY
    s3 = deployed.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=deployed.datasets_bucket)["Contents"]]
    assert sorted(keys) == sorted(
        [
            MANIFEST_KEY,
            "datasets/sample-squad/v1/train/train.jsonl",
            "datasets/sample-squad/v1/validation/validation.json",
        ]
    )
    manifest = json.loads(s3.get_object(Bucket=deployed.datasets_bucket, Key=MANIFEST_KEY)["Body"].read())
    assert manifest == [
        {"prefix": f"s3://{deployed.datasets_bucket}/datasets/sample-squad/v1/"},
        "train/train.jsonl",
        "validation/validation.json",
    ]


@pytest.mark.parametrize(("parameter", "field"), [("ManifestVersionId", "version-id")])
def test_a_reupload_is_told_apart_by_the_manifest_object(deployed, parameter, field):
    """Two executions for the same key: the one whose version id is this upload's is ours (the trigger fills
    the parameter from the S3 event)."""
    definition = json.loads(deployed.pipeline_definition)
    if parameter not in {p["Name"] for p in definition["Parameters"]}:
        definition["Parameters"].append({"Name": parameter, "Type": "String", "DefaultValue": "unset"})
    deployed.replace_pipeline(json.dumps(definition))
    paths = {**deployed.trigger_parameters, parameter: f"$.detail.object.{field}"}
    try:
        plan = UploadPlan(deployed.datasets_bucket, "datasets/again/v1/", validate_dataset(SAMPLE, "again", "v1"))
        since = datetime.now(UTC)
        manifest = upload(plan, deployed.client("s3"))
        deployed.start_as_trigger(plan.manifest_key, {"etag": "0" * 32, "version-id": "an-earlier-upload"}, paths)
        deployed.start_as_trigger(plan.manifest_key, paths=paths)
        expected = expected_parameters(plan, manifest, {p["Name"] for p in definition["Parameters"]})
        sagemaker = deployed.client("sagemaker")
        arn = find_execution(sagemaker, deployed.pipeline_name, expected, since, timeout_s=0)
        values = {
            p["Name"]: p["Value"]
            for p in sagemaker.list_pipeline_parameters_for_execution(PipelineExecutionArn=arn)["PipelineParameters"]
        }
    finally:
        deployed.replace_pipeline(deployed.pipeline_definition)  # executions go with the pipeline
    ours = manifest["VersionId"]
    assert expected[parameter] == ours
    assert values[parameter] == ours


def test_large_files_go_up_in_parts_with_progress(deployed, tmp_path, capsys):
    big = tmp_path / "train.jsonl"
    big.write_bytes(b"x" * (11 * 1024 * 1024))
    plan = UploadPlan(deployed.datasets_bucket, "datasets/big/v1/", [(big, "train/train.jsonl")])
    upload(plan, deployed.client("s3"), multipart_bytes=5 * 1024 * 1024)  # S3's smallest part size
    head = deployed.client("s3").head_object(Bucket=deployed.datasets_bucket, Key="datasets/big/v1/train/train.jsonl")
    assert head["ETag"].strip('"').endswith("-3")  # a multipart object's etag ends in -<number of parts>
    out = capsys.readouterr().out
    assert "11.0/11.0 MiB (100%), 1/1 files" in out
    assert "0/1 files" in out  # progress reported before the file was complete
