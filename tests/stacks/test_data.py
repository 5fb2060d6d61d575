"""DataStack as composed in the whole app: which bucket gets the key, the access logs, which lifecycle rules
and events; the per-construct baseline is in test_key_and_buckets.py."""

from __future__ import annotations

from aws_cdk.assertions import Match

from tests.conftest import dumps, resources_of_type


def buckets(env):
    return resources_of_type(env.templates["data"], "AWS::S3::Bucket")


def bucket(env, purpose):
    [(logical_id, resource)] = [
        (k, v) for k, v in buckets(env).items() if f"-{purpose}-" in dumps(v["Properties"]["BucketName"])
    ]
    return logical_id, resource["Properties"]


def test_data_buckets_use_the_project_key_and_versioning(dev):
    assert len(buckets(dev)) == 3
    for purpose in ("datasets", "artifacts"):
        _, props = bucket(dev, purpose)
        sse = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
        assert sse["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
        assert "ProjectKey" in dumps(sse["ServerSideEncryptionByDefault"]["KMSMasterKeyID"])
        assert props["VersioningConfiguration"] == {"Status": "Enabled"}


def test_server_access_logging_goes_to_the_log_bucket(dev):
    log_bucket_id, log_props = bucket(dev, "access-logs")
    # S3 cannot deliver access logs into an SSE-KMS bucket.
    sse = log_props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    assert sse["SSEAlgorithm"] == "AES256"
    for purpose in ("datasets", "artifacts"):
        _, props = bucket(dev, purpose)
        assert props["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": log_bucket_id}


def test_lifecycle_rules(dev):
    for purpose in ("datasets", "artifacts", "access-logs"):
        rules = bucket(dev, purpose)[1]["LifecycleConfiguration"]["Rules"]
        assert any(r.get("AbortIncompleteMultipartUpload") == {"DaysAfterInitiation": 7} for r in rules), purpose
    artifacts_rules = bucket(dev, "artifacts")[1]["LifecycleConfiguration"]["Rules"]
    [checkpoint_rule] = [r for r in artifacts_rules if r.get("Prefix") == f"{dev.settings.layout.checkpoints}/"]
    assert checkpoint_rule["ExpirationInDays"] == dev.settings.checkpoint_retention_days


def test_datasets_bucket_sends_events_to_eventbridge_without_a_lambda(dev):
    _, props = bucket(dev, "datasets")
    assert props["NotificationConfiguration"] == {"EventBridgeConfiguration": {"EventBridgeEnabled": True}}
    assert not resources_of_type(dev.templates["data"], "Custom::S3BucketNotifications")


def test_checkpoint_uri_prefix_is_exposed(dev):
    prefix = dev.stacks.data.checkpoint_s3_uri_prefix
    layout = dev.settings.layout
    assert prefix.startswith(f"s3://{dev.settings.name_prefix}-artifacts-") and prefix.endswith(
        f"/{layout.checkpoints}/"
    )
    dev.template("data").has_output("CheckpointS3UriPrefix", {"Value": Match.any_value()})


RESOURCE_POLICIES = {
    "AWS::KMS::Key": "KeyPolicy",
    "AWS::SNS::TopicPolicy": "PolicyDocument",
    "AWS::SQS::QueuePolicy": "PolicyDocument",
    "AWS::S3::BucketPolicy": "PolicyDocument",
}
# Conditions that tie a service principal to this account, one resource, or an encryption context
# (https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html).
SCOPING_KEYS = ("aws:SourceAccount", "aws:SourceArn", "kms:EncryptionContext:")


def service_statements(template):
    for resource_type, attribute in RESOURCE_POLICIES.items():
        for resource in resources_of_type(template, resource_type).values():
            for statement in resource["Properties"][attribute]["Statement"]:
                principal = statement.get("Principal")
                if statement["Effect"] == "Allow" and isinstance(principal, dict) and "Service" in principal:
                    yield resource_type, statement


# The unconditioned service statements: EventBridge's KMS use for the encrypted dead-letter queue, as the SQS
# developer guide shows it for an AWS service event source (a condition key EventBridge does not send would lose
# every dead letter; see stacks/data.py):
# https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html
# And CloudWatch Logs' kms:DescribeKey (key metadata only): DescribeKey carries no encryption context, and no AWS page
# names a key CloudWatch Logs sends with it (stacks/data.py; AWS's own CloudWatchLogsAPIKeyAccess managed policy also
# grants DescribeKey in a statement of its own, without the encryption-context condition).
UNSCOPED_BY_DESIGN = [
    ("AWS::KMS::Key", "CloudWatchLogsDescribesTheKey"),
    ("AWS::KMS::Key", "EventBridgeSendsToTheEncryptedDeadLetterQueue"),
]


def test_every_service_principal_in_a_resource_policy_is_scoped(dev, prod):
    """Before: CDK's SNS rule target added an unconditioned events.amazonaws.com statement to the key policy."""
    found, unscoped = 0, []
    for env in (dev, prod):
        for template in env.templates.values():
            for resource_type, statement in service_statements(template):
                found += 1
                condition_keys = [key for operator in statement.get("Condition", {}).values() for key in operator]
                if not any(key.startswith(SCOPING_KEYS) for key in condition_keys):
                    unscoped.append((resource_type, statement.get("Sid")))
    assert unscoped == UNSCOPED_BY_DESIGN * 2  # dev and prod
    # logs, alarms (topic), events (queue) on the key; two log-delivery bucket statements; the queue; the topic's
    # alarm statement
    assert found >= 8


def test_access_logs_bucket_is_versioned_with_short_noncurrent_retention(dev):
    _, props = bucket(dev, "access-logs")
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    [expire] = [rule for rule in props["LifecycleConfiguration"]["Rules"] if rule["Id"] == "expire-access-logs"]
    assert expire["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1}
