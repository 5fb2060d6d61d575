"""Construct: an encrypted SNS topic told what each execution did, which models wait for approval, and what a
person decided; plus an alarm when the trigger parks a start in its dead-letter queue.

Who may use the topic and its key, as the AWS pages require:
- EventBridge publishes to a topic through the topic's resource policy (principal events.amazonaws.com, action
  sns:Publish: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sns-permissions).
  That statement carries no condition: the EventBridge guide's SNS example has none, an older version of it said
  topic policies for EventBridge may not carry conditions, and a condition key the service does not send denies
  silently (every notification lost), while the worst an unconditioned publish grant allows is an extra message.
- Its KMS calls for the encrypted topic are allowed in the key policy (stacks/data.py, ProjectKey), scoped by the
  encryption context SNS itself sends, never by aws:SourceAccount/aws:SourceArn, which "is not supported for
  EventBridge-to-encrypted topics" (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services;
  awslabs/landing-zone-accelerator-on-aws#407).
- CloudWatch alarms publish with aws:SourceArn/aws:SourceAccount, which they send
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Notify_Users_Alarm_Changes.html).

What the events carry (https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html):
an execution's status change has no parameters and no failure reason; a step's status change has
`failureReason` when it failed; a model package's state change has the package with its
CustomerMetadataProperties. So failures are told by the failing step (once: a Fail step's message names the
parameter, the cost or the F1), successes by the execution, the model by its package.
"""

from __future__ import annotations

import jsii
from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk.interfaces.aws_events import IRuleRef
from constructs import Construct

from config.aws_locations import pipeline_console_url
from pipeline_steps.names import FIRST_DELIVERY_STEP, MODEL_METADATA_DATASET_MANIFEST, MODEL_METADATA_F1

SAGEMAKER_SOURCE = ["aws.sagemaker"]
EXECUTION_STATUS_CHANGE = "SageMaker Model Building Pipeline Execution Status Change"
STEP_STATUS_CHANGE = "SageMaker Model Building Pipeline Execution Step Status Change"
MODEL_PACKAGE_STATE_CHANGE = "SageMaker Model Package State Change"
# Failed executions are told by their failing step (with its reason); these by the execution.
EXECUTION_STATUSES_TOLD = ["Succeeded", "Stopped"]
DECISIONS = ["Approved", "Rejected"]


@jsii.implements(events.IRuleTarget)
class TopicTarget:
    """The topic as a rule target, with a message from an input transformer (the topic policy is set once by
    PipelineNotifications)."""

    def __init__(self, topic: sns.ITopic, message: events.RuleTargetInput) -> None:
        self.topic = topic
        self.message = message

    def bind(self, rule: IRuleRef, id: str | None = None) -> events.RuleTargetConfig:  # IRuleTarget's signature
        return events.RuleTargetConfig(arn=self.topic.topic_arn, input=self.message)


def _field(path: str) -> str:
    return events.EventField.from_path(path)


class PipelineNotifications(Construct):
    """SNS topic (+ optional e-mail) fed by EventBridge rules, and the alarm of the trigger's dead-letter queue."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        topic_name: str,
        pipeline_name: str,
        pipeline_arn: str,
        model_package_group_name: str,
        key: kms.IKey,
        email: str | None,
        env_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(
            self, "Topic", topic_name=topic_name, master_key=key, enforce_ssl=True, display_name="QA fine-tuning"
        )
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeRulesPublish",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
            )
        )
        # The SageMaker AI console's page of the pipeline; `make runs` lists its executions with every step.
        where = f"Details: make runs ENV={env_name} | {pipeline_console_url(Aws.REGION, pipeline_name)}"
        execution = _field("$.detail.pipelineExecutionArn")
        self.execution_rule = self._rule(
            "ExecutionFinished",
            "A pipeline execution succeeded or was stopped",
            EXECUTION_STATUS_CHANGE,
            {"pipelineArn": [pipeline_arn], "currentPipelineExecutionStatus": EXECUTION_STATUSES_TOLD},
            f"[{pipeline_name}] execution {_field('$.detail.currentPipelineExecutionStatus')}: {execution}. "
            "A real run also reports its registered model (F1, dataset); a duplicate delivery reports that it "
            f"trained nothing. {where}",
        )
        self.step_failed_rule = self._rule(
            "StepFailed",
            "A pipeline step failed: its reason ends the execution (told once, by the step)",
            STEP_STATUS_CHANGE,
            {"pipelineArn": [pipeline_arn], "currentStepStatus": ["Failed"]},
            f"[{pipeline_name}] execution FAILED at step {_field('$.detail.stepName')}: "
            f"{_field('$.detail.failureReason')} (execution {execution}). {where}",
        )
        self.duplicate_rule = self._rule(
            "DuplicateDelivery",
            "A repeated delivery of a claimed dataset version ended at the first-delivery check",
            STEP_STATUS_CHANGE,
            {
                "pipelineArn": [pipeline_arn],
                "stepName": [FIRST_DELIVERY_STEP],
                "currentStepStatus": ["Succeeded"],
                # A condition step's metadata is its outcome (PipelineExecutionStepMetadata.Condition.Outcome).
                "metadata": {"condition": {"outcome": ["False"]}},
            },
            f"[{pipeline_name}] duplicate delivery, nothing trained: the dataset version is claimed by another "
            f"execution (execution {execution} ends Succeeded). {where}",
        )
        package = _field("$.detail.ModelPackageArn")
        metadata = "$.detail.CustomerMetadataProperties"
        f1 = _field(f"{metadata}.{MODEL_METADATA_F1}")
        dataset = _field(f"{metadata}.{MODEL_METADATA_DATASET_MANIFEST}")
        quality = f"F1 {f1} on {dataset}, report {_field('$.detail.ModelMetrics.ModelQuality.Statistics.S3Uri')}"
        self.approval_rule = self._rule(
            "ModelPendingApproval",
            "A real run registered a model that waits for manual approval",
            MODEL_PACKAGE_STATE_CHANGE,
            {"ModelPackageGroupName": [model_package_group_name], "ModelApprovalStatus": ["PendingManualApproval"]},
            f"[{pipeline_name}] model {package} is waiting for approval: {quality} "
            f"(execution {_field('$.detail.MetadataProperties.GeneratedBy')}). {where}",
        )
        self.decision_rule = self._rule(
            "ModelApprovalDecided",
            "A person approved or rejected a registered model",
            MODEL_PACKAGE_STATE_CHANGE,
            {
                "ModelPackageGroupName": [model_package_group_name],
                "ModelApprovalStatus": DECISIONS,
                "UpdatedModelPackageFields": ["ModelApprovalStatus"],
            },
            f"[{pipeline_name}] model {package} was {_field('$.detail.ModelApprovalStatus')} "
            f"({_field('$.detail.ApprovalDescription')}): {quality}. {where}",
        )

    def _rule(self, construct_id: str, description: str, detail_type: str, detail: dict, message: str) -> events.Rule:
        return events.Rule(
            self,
            construct_id,
            description=description,
            event_pattern=events.EventPattern(source=SAGEMAKER_SOURCE, detail_type=[detail_type], detail=detail),
            targets=[TopicTarget(self.topic, events.RuleTargetInput.from_text(message))],
        )

    def alarm_on_dead_letters(self, queue: sqs.IQueue, what: str) -> cloudwatch.Alarm:
        """Alarm (to the topic) as soon as `queue` holds a message: an event EventBridge could not deliver."""
        alarm = cloudwatch.Alarm(
            self,
            "DeadLettersAlarm",
            alarm_description=f"{what}: EventBridge parked an event it could not deliver; redrive it from the queue",
            metric=queue.metric_approximate_number_of_messages_visible(period=Duration.minutes(5), statistic="Maximum"),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(cloudwatch_actions.SnsAction(self.topic))
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="DeadLetterAlarmPublishes",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "ArnLike": {"aws:SourceArn": alarm.alarm_arn},
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                },
            )
        )
        return alarm
