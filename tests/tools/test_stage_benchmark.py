"""tools.stage_benchmark as a release engineer meets it: run as a command against the moto server (conftest.py).
moto does not evaluate bucket policies (the deny of other writers is asserted on the template:
tests/security/test_benchmark_gate.py)."""

from __future__ import annotations

import hashlib
import json
import shutil

from qa import benchmark

from tests.conftest import ROOT
from tests.tools.conftest import assert_one_line_error, run_cli

SAMPLE = ROOT / "data" / "sample-squad"


def test_stages_the_validation_split_manifest_last_and_prints_the_pin(deployed, deployed_env, tmp_path):
    result = run_cli("tools.stage_benchmark", "--benchmark", str(SAMPLE), "--name", "holdout", env=deployed_env)
    assert result.returncode == 0, result.stderr
    pin = json.loads(result.stdout.strip().splitlines()[-1])
    s3 = deployed.client("s3")
    bucket = deployed.artifacts_bucket
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="benchmarks/")["Contents"]
    assert {item["Key"] for item in listed} == {
        "benchmarks/holdout/v1/validation/validation.json",
        "benchmarks/holdout/v1/manifest.json",
    }
    manifest = s3.get_object(
        Bucket=bucket, Key=benchmark.manifest_key("holdout", "v1"), VersionId=pin["manifest_version_id"]
    )
    body = manifest["Body"].read()
    assert pin["manifest_sha256"] == hashlib.sha256(body).hexdigest()
    assert (pin["name"], pin["version"]) == ("holdout", "v1")
    assert pin["writers"] and pin["writers"][0].startswith("arn:aws:")
    # What the processing job does with the downloaded folder: the pin verifies it.
    folder = tmp_path / "download"
    for item in listed:
        target = folder / item["Key"].removeprefix(benchmark.prefix("holdout", "v1"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
    assert benchmark.verify(folder, pin["manifest_sha256"])[1] == ""
    # A staged version never changes: a second staging is refused.
    again = run_cli("tools.stage_benchmark", "--benchmark", str(SAMPLE), "--name", "holdout", env=deployed_env)
    assert_one_line_error(again, "already staged", "another VERSION")


def test_a_folder_with_an_invalid_record_is_refused_before_any_aws_call(aws, tmp_path):
    folder = tmp_path / "benchmark"
    shutil.copytree(SAMPLE / "validation", folder / "validation")
    (folder / "validation" / "bad.jsonl").write_text('{"id": "x"}\n')
    result = run_cli("tools.stage_benchmark", "--benchmark", str(folder), "--name", "b", env=aws)
    assert result.returncode == 1 and "bad.jsonl" in result.stderr and "Traceback" not in result.stderr


def test_a_folder_of_another_task_is_refused_before_any_aws_call(aws):
    """dev's pipeline answers questions: a text-classification folder (its manifest declares the task) is not its
    benchmark. (A text-classification pipeline's pin with its label names is not run here: the emulator's deployment
    is dev's, which has no such pipeline; tests/training_code/test_benchmark.py stages one into a folder.)"""
    folder = ROOT / "data" / "sample-text-classification"
    result = run_cli("tools.stage_benchmark", "--benchmark", str(folder), "--name", "b", env=aws)
    assert_one_line_error(result, "declares task text-classification", "question-answering pipeline's benchmark")
