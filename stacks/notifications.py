"""Construct: an encrypted SNS topic told about pipeline outcomes and models waiting for approval."""

from __future__ import annotations

from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

FINAL_STATUSES = ["Failed", "Succeeded", "Stopped"]


class PipelineNotifications(Construct):
    """SNS topic (+ optional e-mail) fed by EventBridge rules for execution status and pending approvals."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pipeline_arn: str,
        model_package_group_name: str,
        key: kms.IKey,
        email: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Topic", master_key=key, enforce_ssl=True, display_name="QA fine-tuning")
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        status = events.EventField.from_path("$.detail.currentPipelineExecutionStatus")
        execution = events.EventField.from_path("$.detail.pipelineExecutionArn")
        self.execution_rule = events.Rule(
            self,
            "ExecutionStatus",
            description="Pipeline execution finished (failed, succeeded or stopped)",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=["SageMaker Model Building Pipeline Execution Status Change"],
                detail={"pipelineArn": [pipeline_arn], "currentPipelineExecutionStatus": FINAL_STATUSES},
            ),
            targets=[
                targets.SnsTopic(
                    self.topic, message=events.RuleTargetInput.from_text(f"Pipeline execution {execution}: {status}")
                )
            ],
        )
        package = events.EventField.from_path("$.detail.ModelPackageArn")
        self.approval_rule = events.Rule(
            self,
            "ModelPendingApproval",
            description="A registered model is waiting for manual approval",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=["SageMaker Model Package State Change"],
                detail={
                    "ModelPackageGroupName": [model_package_group_name],
                    "ModelApprovalStatus": ["PendingManualApproval"],
                },
            ),
            targets=[
                targets.SnsTopic(
                    self.topic, message=events.RuleTargetInput.from_text(f"Model {package} is waiting for approval")
                )
            ],
        )
