"""ProjectKey and SecureBucket, each alone in a bare stack: their resources and their grant methods."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import Aws
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match, Template

from config import Settings
from stacks.data import ProjectKey, SecureBucket, removal_policy, statement_id
from tests.conftest import dumps
from tests.stacks.conftest import (
    BareStack,
    bucket_arn,
    bucket_name,
    grantee,
    joined,
    logical_id,
    sibling_stack,
    statements_of,
)


def key_template(bare_stack: BareStack, settings: Settings) -> Template:
    stack = bare_stack(settings)
    key = ProjectKey(
        stack,
        "ProjectKey",
        name_prefix=settings.name_prefix,
        removal=removal_policy(settings.removal_policy),
        topic_names=(settings.notification_topic_name,),
        log_group_root=settings.log_group_root,
    )
    role = grantee(stack)
    key.grant_sse_kms(role)
    key.grant_job_volume_encryption(role)
    return Template.from_stack(stack)


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_key_rotates_and_follows_the_removal_policy_of_the_environment(bare_stack, request, env_name):
    settings: Settings = request.getfixturevalue(f"{env_name}_settings")
    template = key_template(bare_stack, settings)
    destroy = settings.removal_policy == "destroy"
    template.has_resource(
        "AWS::KMS::Key",
        {
            "Properties": Match.object_like({"EnableKeyRotation": True, "PendingWindowInDays": 7 if destroy else 30}),
            "DeletionPolicy": "Delete" if destroy else "Retain",
        },
    )
    template.has_resource_properties("AWS::KMS::Alias", {"AliasName": f"alias/{settings.name_prefix}"})


def test_key_policy_scopes_logs_and_alarm_deliveries_by_encryption_context(bare_stack, dev_settings):
    """The dead-letter statement as the SQS developer guide gives it for an AWS service event source: no condition
    (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html)."""
    template = key_template(bare_stack, dev_settings)
    topic_arn = joined(f"arn:<partition>:sns:<region>:<account>:{dev_settings.notification_topic_name}")
    log_groups = joined(f"arn:<partition>:logs:<region>:<account>:log-group:/{dev_settings.name_prefix}/*")
    template.has_resource_properties(
        "AWS::KMS::Key",
        {
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Sid": "CloudWatchLogsForTheProjectLogGroups",
                                "Action": ["kms:Decrypt*", "kms:Encrypt*", "kms:GenerateDataKey*", "kms:ReEncrypt*"],
                                # The project's log groups only (/hfqa-dev/...), not every log group of the account.
                                "Condition": {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": log_groups}},
                            }
                        ),
                        # DescribeKey carries no encryption context (its condition keys in the Service
                        # Authorization Reference, list_awskeymanagementservice.html): a statement of its own.
                        {
                            "Sid": "CloudWatchLogsDescribesTheKey",
                            "Effect": "Allow",
                            "Principal": {"Service": joined("logs.<region>.amazonaws.com")},
                            "Action": "kms:DescribeKey",
                            "Resource": "*",
                        },
                        Match.object_like(
                            {
                                "Sid": "AlarmsPublishToTheEncryptedTopic",
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                                "Condition": {"StringEquals": {"kms:EncryptionContext:aws:sns:topicArn": topic_arn}},
                            }
                        ),
                        {
                            "Sid": "EventBridgeSendsToTheEncryptedDeadLetterQueue",
                            "Effect": "Allow",
                            "Principal": {"Service": "events.amazonaws.com"},
                            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                            "Resource": "*",
                        },
                    ]
                )
            }
        },
    )


def test_key_grants_sse_kms_use_and_job_volume_grants_for_aws_resources_only(bare_stack, dev_settings):
    template = key_template(bare_stack, dev_settings)
    key_arn = {"Fn::GetAtt": [logical_id(template, "AWS::KMS::Key"), "Arn"]}
    assert statements_of(template) == [
        {
            "Sid": "UseProjectKey",
            "Action": ["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"],
            "Effect": "Allow",
            "Resource": key_arn,
        },
        {
            "Sid": "CreateGrantsForAwsResources",
            "Action": "kms:CreateGrant",
            "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}},
            "Effect": "Allow",
            "Resource": key_arn,
        },
    ]


def secure_bucket(stack: cdk.Stack, settings: Settings, *, encrypted: bool, logged: bool) -> SecureBucket:
    return SecureBucket(
        stack,
        "Datasets",
        removal=removal_policy(settings.removal_policy),
        bucket_name=settings.bucket_name("datasets", Aws.ACCOUNT_ID, Aws.REGION),
        key=kms.Key(stack, "Key") if encrypted else None,
        access_logs=SecureBucket(
            stack,
            "AccessLogs",
            removal=removal_policy(settings.removal_policy),
            bucket_name=settings.bucket_name("access-logs", Aws.ACCOUNT_ID, Aws.REGION),
            key=None,
            access_logs=None,
            versioned=False,
            lifecycle_rules=[],
        ).bucket
        if logged
        else None,
        versioned=True,
        lifecycle_rules=[],
    )


@pytest.mark.parametrize("encrypted", [True, False])
def test_bucket_blocks_public_access_enforces_tls_and_uses_the_key_given(bare_stack, dev_settings, encrypted):
    stack = bare_stack(dev_settings)
    secure_bucket(stack, dev_settings, encrypted=encrypted, logged=False)
    template = Template.from_stack(stack)
    encryption = (
        {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Fn::GetAtt": [logical_id(template, "AWS::KMS::Key"), "Arn"]}}
        if encrypted
        else {"SSEAlgorithm": "AES256"}
    )
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketName": bucket_name(dev_settings, "datasets"),
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    Match.object_like({"ServerSideEncryptionByDefault": encryption, "BucketKeyEnabled": encrypted})
                ]
            },
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
            "VersioningConfiguration": {"Status": "Enabled"},
        },
    )
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}),
                        Match.object_like({"Effect": "Deny", "Condition": {"NumericLessThan": {"s3:TlsVersion": 1.2}}}),
                    ]
                )
            }
        },
    )


def test_bucket_sends_access_logs_to_the_log_bucket_under_its_own_prefix(bare_stack, dev_settings):
    stack = bare_stack(dev_settings)
    secure_bucket(stack, dev_settings, encrypted=True, logged=True)
    template = Template.from_stack(stack)
    [log_bucket_id] = [k for k in template.find_resources("AWS::S3::Bucket") if k.startswith("AccessLogs")]
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {"LoggingConfiguration": {"DestinationBucketName": {"Ref": log_bucket_id}, "LogFilePrefix": "datasets/"}},
    )


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_bucket_removal_follows_the_environment(bare_stack, request, env_name):
    settings: Settings = request.getfixturevalue(f"{env_name}_settings")
    stack = bare_stack(settings)
    secure_bucket(stack, settings, encrypted=False, logged=False)
    template = Template.from_stack(stack)
    destroy = settings.removal_policy == "destroy"
    template.has_resource("AWS::S3::Bucket", {"DeletionPolicy": "Delete" if destroy else "Retain"})
    template.resource_count_is("Custom::S3AutoDeleteObjects", 1 if destroy else 0)


def test_bucket_grants_name_the_bucket_so_another_stack_needs_no_export(bare_stack, dev_settings):
    owner_stack = bare_stack(dev_settings)
    bucket = secure_bucket(owner_stack, dev_settings, encrypted=False, logged=False)
    role_stack = sibling_stack(owner_stack, "Roles")
    role = grantee(role_stack)
    layout = dev_settings.layout
    # In CDK's order of resources (sorted), so that the statements compare as a whole.
    bucket.grant_read_objects(role, ["*", f"{layout.base_models}/*"], reason="test reads")
    bucket.grant_write_objects(role, [layout.evaluation, layout.models], reason="test writes")
    bucket.grant_list(role)
    template = Template.from_stack(role_stack)
    assert "Fn::ImportValue" not in dumps(template.to_json())
    assert statements_of(template) == [
        {
            "Sid": "ReadDatasets",
            "Action": "s3:GetObject",
            "Effect": "Allow",
            "Resource": [
                bucket_arn(dev_settings, "datasets", "/*"),
                bucket_arn(dev_settings, "datasets", f"/{layout.base_models}/*"),
            ],
        },
        {
            "Sid": "WriteDatasets",
            "Action": ["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"],
            "Effect": "Allow",
            "Resource": [
                bucket_arn(dev_settings, "datasets", f"/{layout.evaluation}/*"),
                bucket_arn(dev_settings, "datasets", f"/{layout.models}/*"),
            ],
        },
        {
            "Sid": "ListDatasets",
            "Action": "s3:ListBucket",
            "Effect": "Allow",
            "Resource": bucket_arn(dev_settings, "datasets"),
        },
    ]


@pytest.mark.parametrize("words", [("Read", "access-logs"), ("", ""), ("Write", "Données")])
def test_statement_ids_outside_iams_alphabet_are_refused(words):
    with pytest.raises(ValueError, match="ASCII letters and digits"):
        statement_id(*words)
