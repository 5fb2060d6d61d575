"""Construct: an uploaded dataset manifest starts the pipeline (S3 -> EventBridge -> SageMaker Pipeline)."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from config.layout import DatasetLayout
from pipeline_steps import names
from stacks.nag import acknowledge

# The manifest is uploaded last (tools/upload_dataset.py). EventBridge's `*` wildcard matches any characters,
# `/` included, and no pattern operator can forbid extra segments
# (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html#eb-filtering-wildcard-matching):
# `datasets/*/*/manifest.json` also matches `datasets/a/b/c/manifest.json` or `datasets/mf/v1/train/manifest.json`.
# The pattern therefore only narrows; the pipeline's first step (the claim function) ends every key that is not
# exactly `<root>/<name>/<version>/manifest.json` with one line and no failure. Each pipeline of an environment has
# its own root (Settings.datasets): `datasets/*/...` never matches `datasets-text-classification/...`, whose `-`
# follows the literal `datasets`.
# SageMakerPipelineParameters values must be whole JSON paths: bucket and key go in separately.
PIPELINE_PARAMETERS_FROM_EVENT = {
    names.DATASET_BUCKET: "$.detail.bucket.name",
    names.MANIFEST_KEY: "$.detail.object.key",
    # The datasets bucket is versioned: each upload has its own version id (the cache key of preprocessing).
    names.MANIFEST_VERSION_ID: "$.detail.object.version-id",
    # "requester": the AWS account ID or AWS service principal of the requester (S3 user guide, EventBridge event
    # message structure: https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html).
    names.UPLOADED_BY: "$.detail.requester",
}


def manifest_event_pattern(bucket_name: str, datasets: DatasetLayout) -> dict[str, Any]:
    """Object Created events of manifests under `datasets`' root in the datasets bucket, nothing else."""
    return {
        "source": ["aws.s3"],
        "detail-type": ["Object Created"],
        "detail": {
            "bucket": {"name": [bucket_name]},
            "object": {"key": [{"wildcard": datasets.manifest_key_pattern}]},
        },
    }


class DatasetTrigger(Construct):
    """EventBridge rule with a retry policy and an encrypted dead-letter queue; its role may only start
    this one pipeline."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        datasets_bucket_name: str,
        datasets: DatasetLayout,
        pipeline_name: str,
        pipeline_arn: str,
        key: kms.IKey,
        dead_letter_queue_name: str,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            # Named: the key policy (data stack) scopes EventBridge's use of the key to this queue's ARN.
            queue_name=dead_letter_queue_name,
            removal_policy=removal_policy,
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            self.dead_letter_queue,
            "SQS3",
            "This queue is itself the dead-letter queue of the dataset trigger's EventBridge target; a dead-letter "
            "queue of a dead-letter queue would add nothing.",
        )
        role = iam.Role(
            self,
            "StartPipelineRole",
            assumed_by=iam.ServicePrincipal("events.amazonaws.com"),
            description=f"EventBridge: start {pipeline_name} when a dataset manifest is uploaded",
        )
        role.add_to_policy(iam.PolicyStatement(actions=["sagemaker:StartPipelineExecution"], resources=[pipeline_arn]))
        self.rule = events.CfnRule(
            self,
            "ManifestUploaded",
            description="A dataset manifest was uploaded: start the fine-tuning pipeline",
            event_pattern=manifest_event_pattern(datasets_bucket_name, datasets),
            state="ENABLED",
            targets=[
                events.CfnRule.TargetProperty(
                    id="FineTuningPipeline",
                    arn=pipeline_arn,
                    role_arn=role.role_arn,
                    sage_maker_pipeline_parameters=events.CfnRule.SageMakerPipelineParametersProperty(
                        pipeline_parameter_list=[
                            events.CfnRule.SageMakerPipelineParameterProperty(name=name, value=path)
                            for name, path in PIPELINE_PARAMETERS_FROM_EVENT.items()
                        ]
                    ),
                    retry_policy=events.CfnRule.RetryPolicyProperty(
                        maximum_retry_attempts=10, maximum_event_age_in_seconds=6 * 3600
                    ),
                    dead_letter_config=events.CfnRule.DeadLetterConfigProperty(arn=self.dead_letter_queue.queue_arn),
                )
            ],
        )
        # The queue policy EventBridge's dead-letter delivery needs, with the rule's ARN, which it sends
        # (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html). Its KMS use: stacks/data.py.
        self.dead_letter_queue.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeDeadLetters",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sqs:SendMessage"],
                resources=[self.dead_letter_queue.queue_arn],
                conditions={"ArnEquals": {"aws:SourceArn": self.rule.attr_arn}},
            )
        )
