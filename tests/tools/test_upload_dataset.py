"""tools.upload_dataset as a user meets it: run as a command against the moto server (see conftest.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import threading
import time
from datetime import UTC, datetime

import pipeline_functions
import pytest
from qa.data import SPLITS, convert_columnar, load_dataset_files, read_manifest
from qa.outputs import LOCAL_S3_ROOT_ENV, MANIFEST_V2_FORMAT, PINNED_MANIFEST_FILE

from config.layout import DatasetLayout
from local_runner.event_pattern import matches
from local_runner.trigger import s3_object_created_event
from pipeline_steps import names
from stacks.trigger import manifest_event_pattern
from tests.conftest import ROOT
from tests.tools.conftest import assert_one_line_error, run_cli, small_model, stage_base_model
from tests.training_code.test_dataset_formats import FORMATS, sample_records, write_copy  # noqa: F401  (fixture)
from tests.training_code.test_pipeline_functions import event
from tools.deployment import ToolError
from tools.upload_dataset import (
    UploadPlan,
    expected_parameters,
    find_execution,
    upload,
    validate_dataset,
)

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
    reported = next(line for line in result.stdout.splitlines() if line.startswith("pipeline execution: "))
    reported = reported.removeprefix("pipeline execution: ")
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
    assert (manifest["format"], manifest["dataset"], manifest["version"]) == (
        MANIFEST_V2_FORMAT,
        "sample-squad",
        "v1",
    )
    assert [f["key"] for f in manifest["files"]] == ["train/train.jsonl", "validation/validation.json"]
    for pinned in manifest["files"]:
        local = (SAMPLE / pinned["key"]).read_bytes()
        stored = s3.get_object(
            Bucket=deployed.datasets_bucket,
            Key=f"datasets/sample-squad/v1/{pinned['key']}",
            VersionId=pinned["version_id"],
        )["Body"].read()
        assert stored == local and pinned["size"] == len(local)
        assert pinned["sha256"] == hashlib.sha256(local).hexdigest()
        head = s3.head_object(
            Bucket=deployed.datasets_bucket,
            Key=f"datasets/sample-squad/v1/{pinned['key']}",
            VersionId=pinned["version_id"],
            ChecksumMode="ENABLED",
        )
        assert base64.b64decode(head["ChecksumSHA256"]).hex() == pinned["sha256"]  # stored by S3, which checked it
    assert result.stdout.strip().splitlines()[-1] == "  follow it: make runs ENV=dev"
    assert (
        f"  console: https://us-east-1.console.aws.amazon.com/sagemaker/home?region=us-east-1#/pipelines/{deployed.pipeline_name}/executions/"
        in result.stdout
    )


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
        plan = UploadPlan(deployed.datasets_bucket, "again", "v1", validate_dataset(SAMPLE, "again", "v1"))
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
    plan = UploadPlan(deployed.datasets_bucket, "big", "v1", [(big, "train/train.jsonl")])
    upload(plan, deployed.client("s3"), multipart_bytes=5 * 1024 * 1024)  # S3's smallest part size
    head = deployed.client("s3").head_object(Bucket=deployed.datasets_bucket, Key="datasets/big/v1/train/train.jsonl")
    assert head["ETag"].strip('"').endswith("-3")  # a multipart object's etag ends in -<number of parts>
    out = capsys.readouterr().out
    assert "11.0/11.0 MiB (100%), 1/1 files" in out
    assert "0/1 files" in out  # progress reported before the file was complete


def manifest_versions(deployed, key: str) -> list[dict]:
    """Every stored version of the manifest at `key`, oldest first."""
    s3 = deployed.client("s3")
    versions = s3.list_object_versions(Bucket=deployed.datasets_bucket, Prefix=key)["Versions"]
    ordered = reversed(versions)  # S3 lists a key's versions newest first (LastModified has 1 s resolution)
    return [
        json.loads(s3.get_object(Bucket=deployed.datasets_bucket, Key=key, VersionId=v["VersionId"])["Body"].read())
        for v in ordered
    ]


def test_a_second_upload_of_a_version_is_refused_and_replace_never_changes_an_uploaded_file(deployed, tmp_path):
    """--replace writes a new manifest that reuses the unchanged files at their versions and adds new ones; a
    changed file is refused before anything is written (data files are written once: stacks/data.py)."""
    s3 = deployed.client("s3")
    first = UploadPlan(deployed.datasets_bucket, "twice", "v1", validate_dataset(SAMPLE, "twice", "v1"))
    upload(first, s3)
    with pytest.raises(ToolError, match=r"dataset twice/v1 already exists .* pass --replace"):
        upload(first, s3)
    assert len(manifest_versions(deployed, first.manifest_key)) == 1  # nothing written by the refused upload

    changed = tmp_path / "changed"
    shutil.copytree(SAMPLE, changed)
    train = changed / "train" / "train.jsonl"
    train.write_text("\n".join(train.read_text().splitlines()[:50]) + "\n")
    with pytest.raises(ToolError, match=r"train/train.jsonl differs from .* upload the changed dataset under a new"):
        upload(
            UploadPlan(deployed.datasets_bucket, "twice", "v1", validate_dataset(changed, "twice", "v1")),
            s3,
            replace=True,
        )
    assert len(manifest_versions(deployed, first.manifest_key)) == 1

    added = tmp_path / "added"
    shutil.copytree(SAMPLE, added)
    more = [json.loads(line) for line in (SAMPLE / "train" / "train.jsonl").read_text().splitlines()[:5]]
    (added / "train" / "more.jsonl").write_text(
        "".join(json.dumps({**r, "id": f"more-{r['id']}"}) + "\n" for r in more)
    )
    (added / "manifest.json").unlink(missing_ok=True)  # the folder's own manifest (a check) lacks the new file
    upload(
        UploadPlan(deployed.datasets_bucket, "twice", "v1", validate_dataset(added, "twice", "v1")), s3, replace=True
    )
    old, new = manifest_versions(deployed, first.manifest_key)
    old_pins, new_pins = ({f["key"]: f for f in m["files"]} for m in (old, new))
    assert set(new_pins) == {*old_pins, "train/more.jsonl"}
    for key, pinned in old_pins.items():
        assert new_pins[key] == pinned  # same version, same SHA-256
    body = s3.get_object(
        Bucket=deployed.datasets_bucket,
        Key=f"{first.prefix}train/more.jsonl",
        VersionId=new_pins["train/more.jsonl"]["version_id"],
    )["Body"].read()
    assert hashlib.sha256(body).hexdigest() == new_pins["train/more.jsonl"]["sha256"]


def test_a_manifest_written_meanwhile_wins_over_this_upload(deployed, monkeypatch):
    """The conditional write (If-None-Match: *) refuses the manifest when another upload wrote one after this
    upload checked (moto 5.2.5 answers 412 PreconditionFailed, as S3 does)."""
    s3 = deployed.client("s3")
    plan = UploadPlan(deployed.datasets_bucket, "race", "v1", validate_dataset(SAMPLE, "race", "v1"))
    monkeypatch.setattr("tools.upload_dataset.existing_manifest_etag", lambda s3, plan: None)
    s3.put_object(Bucket=plan.bucket, Key=plan.manifest_key, Body=b"{}")
    with pytest.raises(ToolError, match="another upload wrote race/v1's manifest meanwhile"):
        upload(plan, s3)
    assert s3.get_object(Bucket=plan.bucket, Key=plan.manifest_key)["Body"].read() == b"{}"


def test_the_refusal_is_one_line_from_the_command(deployed, deployed_env, tmp_path):
    stage_base_model(deployed, tmp_path)
    upload(
        UploadPlan(deployed.datasets_bucket, "sample-squad", "v1", validate_dataset(SAMPLE, "x", "v1")),
        deployed.client("s3"),
    )
    assert_one_line_error(run_cli(*UPLOAD, env=deployed_env), "dataset sample-squad/v1 already exists", "--replace")


def test_no_execution_in_time_is_one_error_line_after_the_upload(deployed, deployed_env, tmp_path):
    stage_base_model(deployed, tmp_path)
    result = run_cli(*UPLOAD, "--wait-seconds", "0", env=deployed_env)
    assert "uploaded manifest" in result.stdout
    assert_one_line_error(result, "uploaded, but no execution of", "make runs ENV=dev")


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("", "is empty"),
        ("sample\n", "contains '\\n'"),  # re.match with $ let a trailing newline through
        ("..", "must start with a letter or a digit"),
        ("-x", "must start with a letter or a digit"),
        ("a/b", "contains '/'"),
        ("a b", "contains ' '"),
        ("x" * 2000, "has 2000 characters: at most 100 are allowed"),
    ],
)
def test_each_name_rule_says_which_rule_failed_and_echoes_only_a_prefix(value, rule):
    for option in ("--name", "--version"):
        name, version = (value, "v1") if option == "--name" else ("ok", value)
        with pytest.raises(ToolError) as failure:
            validate_dataset(SAMPLE, name, version)
        message = str(failure.value)
        assert message.startswith(option) and rule in message
        assert len(message) < 160, message


def test_the_longest_name_passes():
    assert validate_dataset(SAMPLE, "a" * 100, "v1.0_b-2")


def copy_sample(tmp_path):
    target = tmp_path / "d"
    shutil.copytree(SAMPLE, target)
    return target


def test_a_symlink_out_of_the_dataset_folder_is_refused(tmp_path):
    dataset = copy_sample(tmp_path)
    outside = tmp_path / "secret.json"
    outside.write_text("{}")
    (dataset / "train" / "extra.json").symlink_to(outside)
    with pytest.raises(ToolError, match=r"train/extra\.json is a symlink that leaves"):
        validate_dataset(dataset, "x", "v1")


def test_a_symlinked_folder_is_refused(tmp_path):
    dataset = copy_sample(tmp_path)
    (dataset / "train" / "more").symlink_to(dataset / "validation", target_is_directory=True)
    with pytest.raises(ToolError, match="train/more is a symlinked folder"):
        validate_dataset(dataset, "x", "v1")


def test_a_data_file_named_manifest_json_is_refused(tmp_path):
    """Its key would be datasets/<n>/<v>/train/manifest.json, which the trigger's wildcard also matches."""
    dataset = copy_sample(tmp_path)
    shutil.copy(dataset / "validation" / "validation.json", dataset / "train" / "manifest.json")
    with pytest.raises(ToolError, match=r"train/manifest\.json: a data file may not be named manifest\.json"):
        validate_dataset(dataset, "x", "v1")


def test_a_path_that_s3_events_would_encode_is_refused(tmp_path):
    dataset = copy_sample(tmp_path)
    (dataset / "train" / "train.jsonl").rename(dataset / "train" / "my train.jsonl")
    (dataset / "manifest.json").unlink()
    with pytest.raises(ToolError, match="contains ' ': rename it"):
        validate_dataset(dataset, "x", "v1")


def test_the_folders_own_manifest_must_match_its_files(tmp_path):
    dataset = copy_sample(tmp_path)
    assert validate_dataset(dataset, "x", "v1")  # the sample's manifest lists exactly its two files
    shutil.copy(dataset / "train" / "train.jsonl", dataset / "train" / "more.jsonl")
    with pytest.raises(ToolError, match=r"does not match the folder \(not listed: train/more.jsonl\)"):
        validate_dataset(dataset, "x", "v1")
    (dataset / "manifest.json").write_text("not json")
    with pytest.raises(ToolError, match=r"manifest\.json is not valid JSON"):
        validate_dataset(dataset, "x", "v1")


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_validates_and_uploads_every_file_it_needs(deployed, tmp_path, request, fmt):
    """Parquet, CSV and save_to_disk copies of the sample (with the folder manifest qa.data's tests write):
    validated like the JSON files. CSV goes up as it is (the processing image reads it with the stdlib);
    Parquet and a save_to_disk folder go up as JSON Lines of the same records (it has no pyarrow), and the
    manifest names what each was converted from."""
    records = request.getfixturevalue("sample_records")
    dataset = write_copy(tmp_path / fmt, records, fmt)
    files = validate_dataset(dataset, "formats", fmt)
    if fmt == "save_to_disk":
        keys = sorted(key for _, key in files)
        assert {"train/saved/state.json", "train/saved/dataset_info.json"} <= set(keys)
        assert any(key.startswith("train/saved/") and key.endswith(".arrow") for key in keys)
    files, converted_from = convert_columnar(dataset, files, tmp_path / "converted")
    source = {"parquet": "data.parquet", "save_to_disk": "saved"}.get(fmt)
    expected = [f"{split}/{'data.csv' if source is None else source.split('.')[0] + '.jsonl'}" for split in SPLITS]
    assert [key for _, key in files] == expected
    assert converted_from == (
        {}
        if source is None
        else {key: {"key": f"{split}/{source}", "format": fmt} for key, split in zip(expected, SPLITS, strict=True)}
    )
    response = upload(
        UploadPlan(deployed.datasets_bucket, "formats", fmt, files, converted_from), deployed.client("s3")
    )
    manifest_files = response["Manifest"]["files"]
    assert [f["key"] for f in manifest_files] == expected
    assert [f.get("converted_from") for f in manifest_files] == [converted_from.get(key) for key in expected]
    s3 = deployed.client("s3")
    download = tmp_path / "downloaded"
    for pinned in manifest_files:
        body = s3.get_object(
            Bucket=deployed.datasets_bucket,
            Key=f"datasets/formats/{fmt}/{pinned['key']}",
            VersionId=pinned["version_id"],
        )["Body"].read()
        (download / pinned["key"]).parent.mkdir(parents=True, exist_ok=True)
        (download / pinned["key"]).write_bytes(body)
    report = load_dataset_files(
        {split: [download / key] for key, split in zip(expected, SPLITS, strict=True)}, download
    )
    assert not report.problems and report.records == records


def test_a_conversion_that_would_overwrite_a_file_is_refused(tmp_path, sample_records):  # noqa: F811
    dataset = write_copy(tmp_path / "d", sample_records, "parquet")
    (dataset / "manifest.json").unlink()
    other = {**sample_records["train"][0], "id": "not-in-the-parquet-file"}
    (dataset / "train" / "data.jsonl").write_text(json.dumps(other) + "\n")
    files = validate_dataset(dataset, "x", "v1")
    with pytest.raises(ValueError, match=r"train/data.parquet converts to train/data.jsonl, which the dataset already"):
        convert_columnar(dataset, files, tmp_path / "converted")


def test_a_format_the_validation_does_not_read_gets_the_accepted_formats(tmp_path):
    for split in ("train", "validation"):
        (tmp_path / split).mkdir()
        (tmp_path / split / "data.xlsx").write_bytes(b"x")
    with pytest.raises(ToolError, match=r"has no train or validation data under train/: accepted are SQuAD v1\.1 JSON"):
        validate_dataset(tmp_path, "x", "v1")


def deep_copy_of_the_sample(tmp_path, relative_bytes: int):
    """The sample dataset with its train file moved to a nested path of `relative_bytes` bytes below the version
    folder (its own manifest.json dropped: it lists the old path)."""
    dataset = tmp_path / f"d{relative_bytes}"
    shutil.copytree(SAMPLE, dataset)
    (dataset / "manifest.json").unlink()
    folders = "/".join(letter * 200 for letter in "abcd")
    stem = "e" * (relative_bytes - len(f"train/{folders}/.jsonl"))
    relative = f"train/{folders}/{stem}.jsonl"
    assert len(relative.encode()) == relative_bytes
    (dataset / relative).parent.mkdir(parents=True)
    (dataset / "train" / "train.jsonl").rename(dataset / relative)
    return dataset


def test_a_file_whose_pinned_copy_would_overflow_an_s3_key_is_refused_before_any_upload(tmp_path):
    """An S3 object key holds at most 1,024 bytes (https://docs.aws.amazon.com/AmazonS3/latest/userguide/
    object-keys.html), and ClaimManifest copies each file to inputs/<64-hex claim digest>/<its path>: 72 bytes
    of prefix, so a path of 952 bytes is the longest that works. Before, a longer one uploaded, and the
    execution's first step failed on CopyObject."""
    assert validate_dataset(deep_copy_of_the_sample(tmp_path, 952), "sq", "v1")
    with pytest.raises(ToolError, match=r"would have 1025 bytes .*S3 allows 1024: shorten its path, or --name"):
        validate_dataset(deep_copy_of_the_sample(tmp_path, 953), "sq", "v1")


def test_a_dataset_dict_folder_goes_through_upload_claim_and_the_preprocess_reader(
    deployed,
    tmp_path,
    monkeypatch,
    sample_records,  # noqa: F811
):
    """`DatasetDict.save_to_disk` writes one save_to_disk folder per split at the folder's root (train/,
    validation/). Their JSON Lines copies must stay under train/ and validation/: ValidateAndTokenize's manifest
    reader takes a key's first segment as its split, and a key at the dataset root (`train.jsonl`, what the upload
    sent before) passed the upload and the claim and was rejected by the billed processing job. Here the folder
    goes through the upload (moto's S3), ClaimManifest's pinning (S3ObjectStore on moto: CopyObject at each
    VersionId, https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html) and the reader."""
    from datasets import Dataset, DatasetDict

    monkeypatch.delenv(LOCAL_S3_ROOT_ENV, raising=False)
    # The claim's execution count (ListPipelineExecutions of the event's pipeline, which moto does not have).
    monkeypatch.setattr(pipeline_functions, "earlier_executions", lambda arn: (0.0, []))
    records = {split: sample_records[split][:5] for split in SPLITS}
    dataset = tmp_path / "dataset-dict"
    DatasetDict({split: Dataset.from_list(records[split]) for split in SPLITS}).save_to_disk(str(dataset))
    files, converted_from = convert_columnar(dataset, validate_dataset(dataset, "dict", "v1"), tmp_path / "converted")
    keys = [key for _, key in files]
    assert keys == ["train/train.jsonl", "validation/validation.jsonl"]
    assert converted_from == {
        key: {"key": split, "format": "save_to_disk"} for key, split in zip(keys, SPLITS, strict=True)
    }
    response = upload(UploadPlan(deployed.datasets_bucket, "dict", "v1", files, converted_from), deployed.client("s3"))

    claim = pipeline_functions.claim_handler(
        event(
            "a",
            response["VersionId"],
            key="datasets/dict/v1/manifest.json",
            DatasetBucket=deployed.datasets_bucket,
            ArtifactsBucket=deployed.artifacts_bucket,
        )
    )
    assert claim["Duplicate"] == "false" and claim["InputUri"], claim
    bucket, prefix = pipeline_functions.split_uri(claim["InputUri"])
    s3, pinned = deployed.client("s3"), tmp_path / "pinned"
    for name in (PINNED_MANIFEST_FILE, *keys):
        (pinned / name).parent.mkdir(parents=True, exist_ok=True)
        (pinned / name).write_bytes(s3.get_object(Bucket=bucket, Key=prefix + name)["Body"].read())
    split_files, problems = read_manifest(pinned / PINNED_MANIFEST_FILE, pinned)
    assert not problems, problems
    report = load_dataset_files(split_files, pinned)
    assert not report.problems and report.records == records


# Held uploads (PARAMS, NO_RUN). moto models neither EventBridge's delivery of S3 events nor SageMaker targets (a
# manifest put starts nothing there, held or not), so "no trigger starts a held upload" is asserted on the rule's own
# pattern (stacks/trigger.py) with the local runner's matcher, and every execution seen here is one a tool started.
HELD_KEY = "datasets/sample-squad/v1/held-manifest.json"


def user_model_uri(deployed, tmp_path, name: str = "my-model") -> str:
    """A model staged under its own name (as make stage-model MODEL=... NAME=my-model does): not the default."""
    s3 = deployed.client("s3")
    for path in small_model(tmp_path / name, {"model_type": "bert", "hidden_size": 32}).iterdir():
        s3.upload_file(str(path), deployed.artifacts_bucket, f"base-models/{name}/{path.name}")
    return f"s3://{deployed.artifacts_bucket}/base-models/{name}/"


def dataset_keys(deployed) -> list[str]:
    listing = deployed.client("s3").list_objects_v2(Bucket=deployed.datasets_bucket)
    return sorted(item["Key"] for item in listing.get("Contents", []))


def started(deployed) -> dict[str, dict[str, str]]:
    sagemaker = deployed.client("sagemaker")
    summaries = sagemaker.list_pipeline_executions(PipelineName=deployed.pipeline_name)["PipelineExecutionSummaries"]
    return {
        s["PipelineExecutionArn"]: {
            p["Name"]: p["Value"]
            for p in sagemaker.list_pipeline_parameters_for_execution(PipelineExecutionArn=s["PipelineExecutionArn"])[
                "PipelineParameters"
            ]
        }
        for s in summaries
    }


def test_the_trigger_never_matches_a_held_manifest_and_the_claim_claims_it(deployed):
    pattern = manifest_event_pattern(deployed.datasets_bucket, DatasetLayout())
    for key, matched in ((MANIFEST_KEY, True), (HELD_KEY, False)):
        event = s3_object_created_event(deployed.datasets_bucket, key, 1, "0" * 32, "v", "123456789012", "us-east-1")
        assert matches(pattern, event) is matched, key
    assert pipeline_functions.manifest_key_pattern(DatasetLayout().root).fullmatch(HELD_KEY)


def test_an_upload_with_params_is_held_and_starts_its_one_execution_with_them(deployed, deployed_env, tmp_path):
    """The default BERT-large is not staged: the upload checks the model PARAMS names instead."""
    model = user_model_uri(deployed, tmp_path)
    before = started(deployed)
    params = f"Epochs=2 F1Threshold=60 {names.BASE_MODEL_URI}={model}"
    result = run_cli(*UPLOAD, "--params", params, env=deployed_env)
    assert result.returncode == 0, result.stderr
    assert HELD_KEY in dataset_keys(deployed) and MANIFEST_KEY not in dataset_keys(deployed)
    new = {arn: values for arn, values in started(deployed).items() if arn not in before}
    [(arn, values)] = new.items()
    version = deployed.client("s3").head_object(Bucket=deployed.datasets_bucket, Key=HELD_KEY)["VersionId"]
    assert values == {
        "Epochs": "2",
        "F1Threshold": "60",
        names.BASE_MODEL_URI: model,
        "DatasetBucket": deployed.datasets_bucket,
        "ManifestKey": HELD_KEY,
        "ManifestVersionId": version,
    }
    assert f"pipeline execution: {arn}" in result.stdout and "waiting" not in result.stdout


def test_a_no_run_upload_starts_nothing_until_make_start(deployed, deployed_env, tmp_path):
    stage_base_model(deployed, tmp_path)
    before = started(deployed)
    result = run_cli(*UPLOAD, "--no-run", env=deployed_env)
    assert result.returncode == 0, result.stderr
    assert "held: no execution started (NO_RUN); start it with make start NAME=sample-squad VERSION=v1" in result.stdout
    assert HELD_KEY in dataset_keys(deployed) and started(deployed) == before
    later = run_cli(
        "tools.executions",
        "start",
        "--name",
        "sample-squad",
        "--version",
        "v1",
        "--params",
        "Epochs=3",
        env=deployed_env,
    )
    assert later.returncode == 0, later.stderr
    [values] = [values for arn, values in started(deployed).items() if arn not in before]
    assert (values["ManifestKey"], values["Epochs"]) == (HELD_KEY, "3")


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ("ModelApprovalStatus=Approved", "PARAMS 'ModelApprovalStatus': an upload may set only the per-run parameters"),
        ("TrainingInstanceType=ml.p4d.24xlarge", "an upload may set only the per-run parameters Epochs, LearningRate"),
        ("Epochs=0", "Parameter Epochs='0' must be > 0 and at most 10 (limits.max_epochs). Nothing uploaded"),
        ("BaseModelUri=s3://elsewhere/model/", "must be a folder under s3://"),
    ],
)
def test_params_the_claim_would_refuse_upload_nothing(deployed, deployed_env, tmp_path, params, says):
    stage_base_model(deployed, tmp_path)
    assert_one_line_error(run_cli(*UPLOAD, "--params", params, env=deployed_env), says)
    assert dataset_keys(deployed) == []


def test_the_model_params_name_must_be_staged_and_the_fix_names_it(deployed, deployed_env, tmp_path):
    stage_base_model(deployed, tmp_path)  # the default is staged; the model PARAMS names is not
    uri = f"s3://{deployed.artifacts_bucket}/base-models/mine/"
    line = assert_one_line_error(
        run_cli(*UPLOAD, "--params", f"BaseModelUri={uri}", env=deployed_env), f"base model not staged at {uri}"
    )
    assert "make stage-model MODEL=<your model> NAME=mine ENV=dev" in line
    assert dataset_keys(deployed) == []


def test_a_version_uploaded_held_is_not_uploaded_again_to_run(deployed, deployed_env, tmp_path):
    stage_base_model(deployed, tmp_path)
    assert run_cli(*UPLOAD, "--no-run", env=deployed_env).returncode == 0
    assert_one_line_error(run_cli(*UPLOAD, "--replace", env=deployed_env), "was uploaded with PARAMS/NO_RUN")
    assert MANIFEST_KEY not in dataset_keys(deployed)
