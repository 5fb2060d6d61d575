"""Construct: an encrypted SNS topic told what each execution did, which models wait for approval, and what a
person decided; plus an alarm when the trigger parks a start in its dead-letter queue.

The messages are written by a function (training_code/notification_function.py, NotifyTopic) that the rules
invoke with the event as it is and that publishes with the SNS API: an input transformer cannot carry a failure
reason or an approval note safely, as EventBridge "doesn't escape values extracted by Input Path" into the
template (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-transform-target-input.html), and AWS
documents no template that is not a quoted string or JSON ("For Strings, quotes are required").

Who may use the topic and its key, as the AWS pages require:
- The function publishes with its role: sns:Publish on the topic, and kms:GenerateDataKey + kms:Decrypt on the
  topic's key ("The publisher must have the kms:GenerateDataKey and kms:Decrypt permissions",
  https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#send-to-encrypted-topic).
- CloudWatch alarms publish with aws:SourceArn/aws:SourceAccount, which they send
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Notify_Users_Alarm_Changes.html); their KMS
  use is in the key policy (stacks/data.py, ProjectKey).

The rules match only fields of the developer guide's event examples
(https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html): an execution's
currentPipelineExecutionStatus, a step's stepName and currentStepStatus, a package's ModelPackageGroupName and
ModelApprovalStatus. A failed execution is told by its failing step (once, with its reason: a Fail step's message
names the parameter, the cost or the F1), a success by the execution, a run that trained nothing by FirstDelivery
(the function reads the claim step's outputs to tell a duplicate from a real run), the model by its package.
"""

from __future__ import annotations

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from qa.notifications import (
    CLAIM_STEP_ENV,
    DATASET_METADATA_KEY_ENV,
    DETAILS_ENV,
    EXECUTION_STATUS_CHANGE,
    F1_METADATA_KEY_ENV,
    FIRST_DELIVERY_STEP_ENV,
    HANDLER,
    MODEL_PACKAGE_STATE_CHANGE,
    PENDING_APPROVAL,
    PIPELINE_NAME_ENV,
    STEP_STATUS_CHANGE,
    TOPIC_ARN_ENV,
)

from config.aws_locations import pipeline_console_url
from pipeline_steps.names import (
    CLAIM_STEP,
    FIRST_DELIVERY_STEP,
    MODEL_METADATA_DATASET_MANIFEST,
    evaluation_key,
)
from stacks.functions import PipelineFunction, pipeline_executions_arn
from stacks.log_groups import LogGroupSettings
from stacks.nag import add_reviewed_statement

SAGEMAKER_SOURCE = ["aws.sagemaker"]
# Failed executions are told by their failing step (with its reason); these by the execution.
EXECUTION_STATUSES_TOLD = ["Succeeded", "Stopped"]
DECISIONS = ["Approved", "Rejected"]
NOTIFY_TIMEOUT = Duration.seconds(60)  # two API calls at most


class PipelineNotifications(Construct):
    """SNS topic (+ optional e-mail) written to by the NotifyTopic function, which EventBridge rules invoke; and
    the alarm of the trigger's dead-letter queue."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        topic_name: str,
        display_name: str,
        pipeline_name: str,
        pipeline_arn: str,
        model_package_group_name: str,
        gate_metric: str,
        key: kms.IKey,
        email: str | None,
        env_name: str,
        name_prefix: str,
        code: lambda_.Code,
        log_groups: LogGroupSettings,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(
            self, "Topic", topic_name=topic_name, master_key=key, enforce_ssl=True, display_name=display_name
        )
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        # The SageMaker AI console's page of the pipeline; `make runs` lists its executions with every step.
        details = f"Details: make runs ENV={env_name} | {pipeline_console_url(Aws.REGION, pipeline_name)}"
        self.notifier = PipelineFunction(
            self,
            "NotifyTopic",
            name_prefix=name_prefix,
            log_groups=log_groups,
            key=key,
            code=code,
            handler=HANDLER,
            timeout=NOTIFY_TIMEOUT,
            purpose="pipeline notifications: formats each event and publishes it to the topic",
            environment={
                TOPIC_ARN_ENV: self.topic.topic_arn,
                PIPELINE_NAME_ENV: pipeline_name,
                DETAILS_ENV: details,
                CLAIM_STEP_ENV: CLAIM_STEP,
                FIRST_DELIVERY_STEP_ENV: FIRST_DELIVERY_STEP,
                F1_METADATA_KEY_ENV: evaluation_key(gate_metric),  # the package's score of the task's gate metric
                DATASET_METADATA_KEY_ENV: MODEL_METADATA_DATASET_MANIFEST,
            },
        )
        self._grant_notifier(key, pipeline_name)
        self.execution_rule = self._rule(
            "ExecutionFinished",
            "A pipeline execution succeeded or was stopped",
            EXECUTION_STATUS_CHANGE,
            {"pipelineArn": [pipeline_arn], "currentPipelineExecutionStatus": EXECUTION_STATUSES_TOLD},
        )
        self.step_failed_rule = self._rule(
            "StepFailed",
            "A pipeline step failed: its reason ends the execution (told once, by the step)",
            STEP_STATUS_CHANGE,
            {"pipelineArn": [pipeline_arn], "currentStepStatus": ["Failed"]},
        )
        self.duplicate_rule = self._rule(
            "DuplicateDelivery",
            "FirstDelivery finished: the function tells a duplicate delivery (or a key that is no manifest)",
            STEP_STATUS_CHANGE,
            {"pipelineArn": [pipeline_arn], "stepName": [FIRST_DELIVERY_STEP], "currentStepStatus": ["Succeeded"]},
        )
        self.approval_rule = self._rule(
            "ModelPendingApproval",
            "A real run registered a model that waits for manual approval",
            MODEL_PACKAGE_STATE_CHANGE,
            {"ModelPackageGroupName": [model_package_group_name], "ModelApprovalStatus": [PENDING_APPROVAL]},
        )
        self.decision_rule = self._rule(
            "ModelApprovalDecided",
            "A registered model is approved or rejected",
            MODEL_PACKAGE_STATE_CHANGE,
            {"ModelPackageGroupName": [model_package_group_name], "ModelApprovalStatus": DECISIONS},
        )

    def _grant_notifier(self, key: kms.IKey, pipeline_name: str) -> None:
        role = self.notifier.role
        role.add_to_principal_policy(
            iam.PolicyStatement(sid="PublishNotifications", actions=["sns:Publish"], resources=[self.topic.topic_arn])
        )
        # sns-key-management#send-to-encrypted-topic (module docstring): the publisher's two KMS actions.
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="EncryptNotifications", actions=["kms:GenerateDataKey", "kms:Decrypt"], resources=[key.key_arn]
            )
        )
        add_reviewed_statement(
            role,
            iam.PolicyStatement(
                sid="ReadClaimOutputs",
                actions=["sagemaker:ListPipelineExecutionSteps"],
                resources=[pipeline_executions_arn(self, pipeline_name)],
            ),
            "NotifyTopic lists the steps of this one pipeline's executions (ListPipelineExecutionSteps) to read the "
            "claim step's outputs when FirstDelivery ends; execution ids are random.",
        )

    def _rule(self, construct_id: str, description: str, detail_type: str, detail: dict) -> events.Rule:
        return events.Rule(
            self,
            construct_id,
            description=description,
            event_pattern=events.EventPattern(source=SAGEMAKER_SOURCE, detail_type=[detail_type], detail=detail),
            targets=[targets.LambdaFunction(self.notifier.function)],
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
