"""upload-dataset and stage-model against stubbed AWS clients (nothing here reaches AWS)."""

from __future__ import annotations

import json
import shutil

import boto3
import pytest
from botocore.stub import ANY, Stubber

from tests.conftest import ROOT
from tools.stage_model import stage
from tools.upload_dataset import plan_upload, upload

SAMPLE = ROOT / "data" / "sample-squad"
BUCKET = "hfqa-dev-datasets-123456789012-us-east-1"


def client(service: str):
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")


def test_upload_puts_data_files_first_and_the_manifest_last():
    plan = plan_upload(SAMPLE, "sample-squad", "v1", BUCKET)
    s3 = client("s3")
    with Stubber(s3) as stub:
        for key in ("train/train.jsonl", "validation/validation.json"):
            stub.add_response(
                "put_object", {}, {"Bucket": BUCKET, "Key": f"datasets/sample-squad/v1/{key}", "Body": ANY}
            )
        stub.add_response(
            "put_object",
            {},
            {
                "Bucket": BUCKET,
                "Key": "datasets/sample-squad/v1/manifest.json",
                "Body": ANY,
                "ContentType": "application/json",
            },
        )
        upload(plan, s3)
        stub.assert_no_pending_responses()
    assert plan.manifest() == [
        {"prefix": f"s3://{BUCKET}/datasets/sample-squad/v1/"},
        "train/train.jsonl",
        "validation/validation.json",
    ]


def test_invalid_dataset_uploads_nothing(tmp_path):
    shutil.copytree(SAMPLE, tmp_path / "d")
    train = tmp_path / "d" / "train" / "train.jsonl"
    lines = train.read_text().splitlines()
    bad = json.loads(lines[3])
    bad["answers"]["answer_start"] = [0]
    train.write_text("\n".join([*lines[:3], json.dumps(bad), *lines[4:]]) + "\n")
    with pytest.raises(SystemExit, match=r"train/train.jsonl:line 4 id=train-000-3 field=answers.answer_start\[0\]"):
        plan_upload(tmp_path / "d", "x", "v1", BUCKET)


def test_bad_names_are_rejected():
    with pytest.raises(SystemExit, match="--name"):
        plan_upload(SAMPLE, "../escape", "v1", BUCKET)


def test_stage_model_uploads_weights_tokenizer_and_config(tmp_path, pretrained_dir):
    s3 = client("s3")
    uploaded = []
    s3.upload_file = lambda filename, bucket, key: uploaded.append((bucket, key))  # transfer manager stand-in
    keys = stage(pretrained_dir, "artifacts-bucket", "base-models/minilm/", s3)
    assert keys == [key for _, key in uploaded]
    names = {key.removeprefix("base-models/minilm/") for key in keys}
    assert {"config.json", "model.safetensors", "tokenizer.json", "vocab.txt"} <= names


def test_stage_model_refuses_a_folder_that_is_not_a_model(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(SystemExit, match="no weights"):
        stage(tmp_path, "b", "p/", client("s3"))
