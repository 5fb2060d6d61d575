"""Construct: an encrypted SNS topic told about pipeline outcomes and models waiting for approval."""

from __future__ import annotations

import jsii
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk.interfaces.aws_events import IRuleRef
from constructs import Construct

FINAL_STATUSES = ["Failed", "Succeeded", "Stopped"]


@jsii.implements(events.IRuleTarget)
class RuleScopedTopicTarget:
    """An SNS topic as a rule target that only that rule may publish to.

    CDK's `aws_events_targets.SnsTopic` also grants `events.amazonaws.com` use of the topic's KMS key with no
    condition (a confused-deputy opening). Here the topic policy names the rule (`aws:SourceArn`), and the
    project key already lets EventBridge use it for this account only (`aws:SourceAccount`, see
    stacks/data.py). https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html
    """

    def __init__(self, topic: sns.ITopic, message: events.RuleTargetInput) -> None:
        self.topic = topic
        self.message = message

    def bind(self, rule: IRuleRef, id: str | None = None) -> events.RuleTargetConfig:  # IRuleTarget's signature
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={"ArnEquals": {"aws:SourceArn": rule.rule_ref.rule_arn}},
            )
        )
        return events.RuleTargetConfig(arn=self.topic.topic_arn, input=self.message)


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
                RuleScopedTopicTarget(
                    self.topic, events.RuleTargetInput.from_text(f"Pipeline execution {execution}: {status}")
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
                RuleScopedTopicTarget(
                    self.topic, events.RuleTargetInput.from_text(f"Model {package} is waiting for approval")
                )
            ],
        )
