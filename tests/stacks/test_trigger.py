"""DatasetTrigger alone in a bare stack: the rule, its target, its role and its dead-letter queue."""

from __future__ import annotations

import pytest
from aws_cdk import RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match, Template

from local_runner.event_pattern import matches
from local_runner.trigger import object_created_event
from stacks.trigger import DatasetTrigger
from tests.stacks.conftest import logical_id, statements_of

ACCOUNT, REGION = "123456789012", "us-east-1"


@pytest.fixture(scope="module")
def datasets_bucket(dev_settings) -> str:
    return dev_settings.bucket_name("datasets", ACCOUNT, REGION)


@pytest.fixture(scope="module")
def pipeline_arn(dev_settings) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:pipeline/{dev_settings.pipeline_name}"


@pytest.fixture
def template(bare_stack, dev_settings, datasets_bucket, pipeline_arn) -> Template:
    stack = bare_stack(dev_settings)
    DatasetTrigger(
        stack,
        "DatasetTrigger",
        datasets_bucket_name=datasets_bucket,
        datasets=dev_settings.datasets,
        pipeline_name=dev_settings.pipeline_name,
        pipeline_arn=pipeline_arn,
        key=kms.Key(stack, "Key"),
        dead_letter_queue_name=dev_settings.trigger_dead_letter_queue_name,
        removal_policy=RemovalPolicy.RETAIN,
    )
    return Template.from_stack(stack)


def test_targets_the_pipeline_with_bucket_key_version_and_uploader(template, pipeline_arn):
    queue_arn = {"Fn::GetAtt": [logical_id(template, "AWS::SQS::Queue"), "Arn"]}
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "State": "ENABLED",
            "Targets": [
                Match.object_like(
                    {
                        "Arn": pipeline_arn,
                        "SageMakerPipelineParameters": {
                            "PipelineParameterList": [
                                {"Name": "DatasetBucket", "Value": "$.detail.bucket.name"},
                                {"Name": "ManifestKey", "Value": "$.detail.object.key"},
                                {"Name": "ManifestVersionId", "Value": "$.detail.object.version-id"},
                                # Who uploaded the manifest, which the registered package records.
                                {"Name": "UploadedBy", "Value": "$.detail.requester"},
                            ]
                        },
                        "RetryPolicy": {"MaximumRetryAttempts": 10, "MaximumEventAgeInSeconds": 6 * 3600},
                        "DeadLetterConfig": {"Arn": queue_arn},
                    }
                )
            ],
        },
    )


def test_eventbridge_role_may_only_start_this_pipeline(template, pipeline_arn):
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [Match.object_like({"Principal": {"Service": "events.amazonaws.com"}})]
            }
        },
    )
    assert statements_of(template) == [
        {"Action": "sagemaker:StartPipelineExecution", "Effect": "Allow", "Resource": pipeline_arn}
    ]


def test_dead_letter_queue_is_kms_encrypted_named_retained_and_only_this_rule_sends(template, dev_settings):
    key_arn = {"Fn::GetAtt": [logical_id(template, "AWS::KMS::Key"), "Arn"]}
    template.has_resource(
        "AWS::SQS::Queue",
        {
            "Properties": {
                "KmsMasterKeyId": key_arn,
                "MessageRetentionPeriod": 14 * 86400,
                "QueueName": dev_settings.trigger_dead_letter_queue_name,
            },
            "DeletionPolicy": "Retain",
        },
    )
    rule_arn = {"Fn::GetAtt": [logical_id(template, "AWS::Events::Rule"), "Arn"]}
    template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Sid": "EventBridgeDeadLetters",
                                "Effect": "Allow",
                                "Action": "sqs:SendMessage",
                                "Principal": {"Service": "events.amazonaws.com"},
                                "Condition": {"ArnEquals": {"aws:SourceArn": rule_arn}},
                            }
                        )
                    ]
                )
            }
        },
    )


def event_pattern(template: Template) -> dict:
    [rule] = template.find_resources("AWS::Events::Rule").values()
    return rule["Properties"]["EventPattern"]


def s3_event(bucket: str, key: str) -> dict:
    return object_created_event(bucket, key, b"[]", account=ACCOUNT, region=REGION)


@pytest.mark.parametrize(
    ("other_bucket", "key", "expected"),
    [
        (False, "datasets/squad/v1/manifest.json", True),
        (False, "datasets/sample-squad/2026-11-29/manifest.json", True),
        (False, "datasets/squad/v1/train/train-v1.1.json", False),
        (False, "datasets/squad/v1/validation/dev-v1.1.json", False),
        (False, "datasets/squad/v1/manifest.json.tmp", False),
        (False, "uploads/squad/v1/manifest.json", False),
        (False, "manifest.json", False),
        (True, "datasets/squad/v1/manifest.json", False),
        (False, "datasets/squad/v1/manifest.JSON", False),
        (False, "datasets/squad/manifest.json", False),  # a version segment is missing
    ],
)
def test_event_pattern_matches_only_manifest_uploads(template, datasets_bucket, other_bucket, key, expected):
    bucket = "someone-elses-bucket" if other_bucket else datasets_bucket
    assert matches(event_pattern(template), s3_event(bucket, key)) is expected


def test_other_event_types_do_not_match(template, datasets_bucket):
    event = s3_event(datasets_bucket, "datasets/squad/v1/manifest.json") | {"detail-type": "Object Deleted"}
    assert not matches(event_pattern(template), event)


@pytest.mark.parametrize(
    "key",
    [
        # EventBridge's `*` also matches `/`, and no operator can forbid extra segments (stacks/trigger.py): these
        # start an execution, whose claim step ends them at once with one line and no failure.
        "datasets/mf/v1/train/manifest.json",
        "datasets/a/b/c/manifest.json",
        # S3 documents URL-encoding of keys only for notifications to SNS/SQS/Lambda; for EventBridge both forms
        # may arrive: the pattern matches both, and the claim step refuses any key outside [A-Za-z0-9._-] segments.
        "datasets/my squad/v1/manifest.json",
        "datasets/my+squad/v1/manifest.json",
        "datasets/caf%C3%A9/v1/manifest.json",
        "datasets/café/v1/manifest.json",
    ],
)
def test_what_the_wildcard_cannot_refuse_still_reaches_the_claim_step(template, datasets_bucket, key):
    assert matches(event_pattern(template), s3_event(datasets_bucket, key))
