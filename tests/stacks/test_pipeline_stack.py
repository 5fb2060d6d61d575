"""PipelineStack: the pipeline resource, its code asset, trigger, dead-letter queue and notifications."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from local_runner.assembly import synthesized_definition
from local_runner.event_pattern import matches
from local_runner.trigger import object_created_event
from pipeline_steps.definition import definition_json
from pipeline_steps.placeholders import placeholders
from pipeline_steps.walk import all_steps
from stacks.source_bundle import build_source_tarball
from tests.conftest import ROOT, as_list, dumps, resources_of_type


def the(template, resource_type):
    [resource] = resources_of_type(template, resource_type).values()
    return resource["Properties"]


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_the_template_embeds_exactly_the_built_definition(synthesized, env_name):
    environment = synthesized[env_name]
    text, _ = synthesized_definition(environment.templates["pipeline"])
    assert text == definition_json(environment.settings)


def test_pipeline_embeds_the_definition_with_deploy_time_values(dev):
    props = the(dev.templates["pipeline"], "AWS::SageMaker::Pipeline")
    assert props["PipelineName"] == "hfqa-dev-qa-fine-tuning"
    body, variables = synthesized_definition(dev.templates["pipeline"])
    definition = json.loads(body)
    assert [s["Name"] for s in all_steps(definition["Steps"])][:5] == [
        "ClaimManifest",
        "FirstDelivery",
        "ValidateAndTokenize",
        "CheckTrainingCost",
        "FineTune",
    ]
    assert set(variables) == set(placeholders(dev.settings).substitutions())
    assert "PipelineRole" in dumps(props["RoleArn"])
    assert variables["JobRoleName"] == {
        "Ref": next(k for k in dev.templates["pipeline"]["Resources"] if k.startswith("JobRole"))
    }


def test_code_asset_is_a_reproducible_tarball_of_training_code():
    first, second = build_source_tarball(ROOT / "training_code"), build_source_tarball(ROOT / "training_code")
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(first))) as tar:
        names = tar.getnames()
        assert {"train.py", "preprocess.py", "evaluate.py", "qa/checkpoints.py"} <= set(names)
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        assert {m.mtime for m in tar.getmembers()} == {0}


def test_job_role_reads_exactly_the_code_object(dev):
    statements = [
        s
        for p in resources_of_type(dev.templates["pipeline"], "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") in ("ReadTrainingCode", "ListTrainingCode")
    ]
    assert len(statements) == 2
    assert "*" not in dumps([s["Resource"] for s in statements])


def rule_with_target(env):
    rules = resources_of_type(env.templates["pipeline"], "AWS::Events::Rule")
    [rule] = [r["Properties"] for r in rules.values() if "SageMakerPipelineParameters" in dumps(r)]
    return rule


def test_trigger_targets_the_pipeline_with_bucket_key_and_version(dev):
    rule = rule_with_target(dev)
    [target] = rule["Targets"]
    assert target["SageMakerPipelineParameters"]["PipelineParameterList"] == [
        {"Name": "DatasetBucket", "Value": "$.detail.bucket.name"},
        {"Name": "ManifestKey", "Value": "$.detail.object.key"},
        {"Name": "ManifestVersionId", "Value": "$.detail.object.version-id"},
    ]
    assert target["RetryPolicy"]["MaximumRetryAttempts"] > 0
    assert "DeadLetterQueue" in dumps(target["DeadLetterConfig"])
    assert ":pipeline/hfqa-dev-qa-fine-tuning" in dumps(target["Arn"])


def test_eventbridge_role_may_only_start_this_pipeline(dev):
    template = dev.templates["pipeline"]
    role_id = next(k for k in resources_of_type(template, "AWS::IAM::Role") if "StartPipeline" in k)
    [policy] = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources_of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    assert [(s["Action"], dumps(s["Resource"]).count("pipeline/hfqa-dev-qa-fine-tuning")) for s in policy] == [
        ("sagemaker:StartPipelineExecution", 1)
    ]


def test_dead_letter_queue_is_kms_encrypted_and_only_eventbridge_sends(dev):
    template = dev.templates["pipeline"]
    queue = the(template, "AWS::SQS::Queue")
    assert "KmsMasterKeyId" in queue
    statements = the(template, "AWS::SQS::QueuePolicy")["PolicyDocument"]["Statement"]
    [send] = [s for s in statements if s["Effect"] == "Allow"]
    assert send["Principal"] == {"Service": "events.amazonaws.com"}
    assert "aws:SourceArn" in send["Condition"]["ArnEquals"]


def s3_event(bucket: str, key: str) -> dict:
    return object_created_event(bucket, key, b"[]", account="123456789012", region="us-east-1")


DATASETS = "hfqa-dev-datasets-123456789012-us-east-1"


@pytest.mark.parametrize(
    ("bucket", "key", "expected"),
    [
        (DATASETS, "datasets/squad/v1/manifest.json", True),
        (DATASETS, "datasets/sample-squad/2026-11-29/manifest.json", True),
        (DATASETS, "datasets/squad/v1/train/train-v1.1.json", False),
        (DATASETS, "datasets/squad/v1/validation/dev-v1.1.json", False),
        (DATASETS, "datasets/squad/v1/manifest.json.tmp", False),
        (DATASETS, "uploads/squad/v1/manifest.json", False),
        (DATASETS, "manifest.json", False),
        ("someone-elses-bucket", "datasets/squad/v1/manifest.json", False),
    ],
)
def test_event_pattern_matches_only_manifest_uploads(dev, bucket, key, expected):
    pattern = rule_with_target(dev)["EventPattern"]
    bucket_name = {"Fn::Join": ["", ["hfqa-dev-datasets-", {"Ref": "AWS::AccountId"}, "-", {"Ref": "AWS::Region"}]]}
    rendered = json.loads(json.dumps(pattern).replace(json.dumps(bucket_name), json.dumps(DATASETS)))
    assert rendered != pattern
    assert matches(rendered, s3_event(bucket, key)) is expected


def test_other_event_types_do_not_match(dev):
    pattern = rule_with_target(dev)["EventPattern"]
    event = s3_event(DATASETS, "datasets/squad/v1/manifest.json") | {"detail-type": "Object Deleted"}
    assert not matches(json.loads(json.dumps(pattern).replace('"hfqa', '"x')), event)


def test_notifications_topic_and_rules(dev, prod):
    template = dev.templates["pipeline"]
    topic = the(template, "AWS::SNS::Topic")
    assert "KmsMasterKeyId" in topic
    rules = [r["Properties"] for r in resources_of_type(template, "AWS::Events::Rule").values()]
    patterns = {p["EventPattern"]["detail-type"][0]: p for p in rules}
    status = patterns["SageMaker Model Building Pipeline Execution Status Change"]
    assert status["EventPattern"]["detail"]["currentPipelineExecutionStatus"] == ["Failed", "Succeeded", "Stopped"]
    approval = patterns["SageMaker Model Package State Change"]
    assert approval["EventPattern"]["detail"]["ModelApprovalStatus"] == ["PendingManualApproval"]
    assert approval["EventPattern"]["detail"]["ModelPackageGroupName"] == ["hfqa-dev-qa-models"]
    for rule in (status, approval):
        assert "NotificationsTopic" in dumps(as_list(rule["Targets"])[0]["Arn"])
    assert not resources_of_type(template, "AWS::SNS::Subscription")  # no e-mail configured


def test_optional_email_subscription(cdk_context, tmp_path):
    import aws_cdk as cdk

    from config import load_settings
    from stacks.app_builder import build_stacks

    app = cdk.App(context=cdk_context, outdir=str(tmp_path))
    settings = load_settings({**cdk_context, "notification_email": "ml-team@example.com"})
    stacks = build_stacks(app, settings, build_dir=tmp_path / "build")
    template = app.synth().get_stack_by_name(stacks.pipeline.stack_name).template
    [subscription] = resources_of_type(template, "AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == "ml-team@example.com"
