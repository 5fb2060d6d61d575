"""PipelineNotifications alone in a bare stack: the encrypted topic, its rules and messages, who may publish,
the dead-letter alarm. Events are the examples of the SageMaker developer guide (automating-sagemaker-with-
eventbridge), with this pipeline's names; matched with the local runner's EventBridge matcher."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template

from config import Settings
from local_runner.event_pattern import matches
from pipeline_steps.names import FIRST_DELIVERY_STEP, MODEL_METADATA_DATASET_MANIFEST, MODEL_METADATA_F1
from pipeline_steps.walk import find_step
from stacks.assembly import synthesized_definition
from stacks.notifications import PipelineNotifications
from tests.conftest import as_list, resources_of_type
from tests.stacks.conftest import BareStack, logical_id

ACCOUNT, REGION = "123456789012", "us-east-1"
PIPELINE_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:pipeline/p"
EXECUTION_ARN = f"{PIPELINE_ARN}/execution/p4jn9xou8a8s"


def notifications(bare_stack: BareStack, settings: Settings, email: str | None) -> Template:
    stack = bare_stack(settings)
    construct = PipelineNotifications(
        stack,
        "Notifications",
        topic_name=settings.notification_topic_name,
        pipeline_name="p",
        pipeline_arn=PIPELINE_ARN,
        model_package_group_name=settings.model_package_group_name,
        key=kms.Key(stack, "Key"),
        email=email,
        env_name=settings.env_name,
    )
    construct.alarm_on_dead_letters(sqs.Queue(stack, "Queue"), "test queue")
    return Template.from_stack(stack)


@pytest.fixture
def template(bare_stack, dev_settings) -> Template:
    return notifications(bare_stack, dev_settings, email=None)


def sagemaker_event(detail_type: str, detail: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "ea37ccbb-5e2b-05e9-4073-1daazc940304",
        "detail-type": detail_type,
        "source": "aws.sagemaker",
        "account": ACCOUNT,
        "time": "2021-03-15T16:10:10Z",
        "region": REGION,
        "resources": [PIPELINE_ARN, EXECUTION_ARN],
        "detail": detail,
    }


def execution_event(status: str) -> dict[str, Any]:
    return sagemaker_event(
        "SageMaker Model Building Pipeline Execution Status Change",
        {
            "currentPipelineExecutionStatus": status,
            "previousPipelineExecutionStatus": "Executing",
            "pipelineArn": PIPELINE_ARN,
            "pipelineExecutionArn": EXECUTION_ARN,
        },
    )


def step_event(step: str, status: str, **extra: Any) -> dict[str, Any]:
    return sagemaker_event(
        "SageMaker Model Building Pipeline Execution Step Status Change",
        {
            "stepName": step,
            "previousStepStatus": "Executing",
            "currentStepStatus": status,
            "pipelineArn": PIPELINE_ARN,
            "pipelineExecutionArn": EXECUTION_ARN,
            **extra,
        },
    )


def package_event(group: str, status: str, updated: list[str] | None = None) -> dict[str, Any]:
    detail: dict[str, Any] = {
        "ModelPackageGroupName": group,
        "ModelPackageVersion": 2,
        "ModelPackageArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/{group}/2",
        "ModelApprovalStatus": status,
        "MetadataProperties": {"GeneratedBy": EXECUTION_ARN},
        "CustomerMetadataProperties": {
            MODEL_METADATA_F1: "91.2",
            MODEL_METADATA_DATASET_MANIFEST: "s3://datasets-bucket/datasets/a/v1/manifest.json",
        },
    }
    if updated is not None:
        detail["UpdatedModelPackageFields"] = updated
    return sagemaker_event("SageMaker Model Package State Change", detail)


def rules(template: Template) -> dict[str, dict[str, Any]]:
    """Rule construct id (the logical id's readable start) -> the rule's properties."""
    found = template.find_resources("AWS::Events::Rule")
    return {logical: resource["Properties"] for logical, resource in found.items()}


def rules_matching(template: Template, event: dict[str, Any]) -> list[str]:
    return sorted(logical for logical, rule in rules(template).items() if matches(rule["EventPattern"], event))


def test_the_duplicate_rule_names_the_pipelines_first_delivery_step(dev):
    definition = json.loads(synthesized_definition(dev.templates["pipeline"])[0])
    assert find_step(definition, FIRST_DELIVERY_STEP)["Type"] == "Condition"


def test_topic_is_encrypted_named_and_has_no_subscription_by_default(template, dev_settings):
    key_arn = {"Fn::GetAtt": [logical_id(template, "AWS::KMS::Key"), "Arn"]}
    template.has_resource_properties(
        "AWS::SNS::Topic", {"KmsMasterKeyId": key_arn, "TopicName": dev_settings.notification_topic_name}
    )
    template.resource_count_is("AWS::SNS::Subscription", 0)


@pytest.mark.parametrize(
    ("event", "rule"),
    [
        (execution_event("Succeeded"), "ExecutionFinished"),
        (execution_event("Stopped"), "ExecutionFinished"),
        (step_event("FineTune", "Failed", failureReason="CapacityError: no capacity"), "StepFailed"),
        (step_event("F1BelowThreshold", "Failed", failureReason="Validation F1 12.0 is below"), "StepFailed"),
        (step_event("FirstDelivery", "Succeeded", metadata={"condition": {"outcome": "False"}}), "DuplicateDelivery"),
    ],
)
def test_each_outcome_is_told_by_exactly_one_rule(template, event, rule):
    [matched] = rules_matching(template, event)
    assert matched.startswith(f"Notifications{rule}")


@pytest.mark.parametrize(
    "event",
    [
        execution_event("Failed"),  # told by the failing step, with its reason: a failure notifies once
        execution_event("Executing"),
        step_event("FineTune", "Succeeded"),
        step_event("FirstDelivery", "Succeeded", metadata={"condition": {"outcome": "True"}}),
        step_event("FineTune", "Failed", pipelineArn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:pipeline/other"),
    ],
)
def test_other_events_are_not_told(template, event):
    assert rules_matching(template, event) == []


def test_models_waiting_for_approval_and_decisions_by_a_person(template, dev_settings):
    group = dev_settings.model_package_group_name
    [pending] = rules_matching(template, package_event(group, "PendingManualApproval"))
    assert pending.startswith("NotificationsModelPendingApproval")
    for decision in ("Approved", "Rejected"):
        [decided] = rules_matching(template, package_event(group, decision, updated=["ModelApprovalStatus"]))
        assert decided.startswith("NotificationsModelApprovalDecided")
    assert rules_matching(template, package_event(group, "Approved", updated=["ModelLifeCycle"])) == []
    assert rules_matching(template, package_event("another-group", "PendingManualApproval")) == []


def input_templates(template: Template) -> dict[str, Any]:
    return {logical: rule["Targets"][0]["InputTransformer"] for logical, rule in rules(template).items()}


def test_messages_name_what_happened(template):
    transformers = input_templates(template)
    paths = {logical: set(t["InputPathsMap"].values()) for logical, t in transformers.items()}
    by_rule = {
        next(r for r in paths if r.startswith(f"Notifications{name}")): name
        for name in (
            "ExecutionFinished",
            "StepFailed",
            "DuplicateDelivery",
            "ModelPendingApproval",
            "ModelApprovalDecided",
        )
    }
    needed = {
        "ExecutionFinished": {"$.detail.currentPipelineExecutionStatus", "$.detail.pipelineExecutionArn"},
        "StepFailed": {"$.detail.stepName", "$.detail.failureReason", "$.detail.pipelineExecutionArn"},
        "DuplicateDelivery": {"$.detail.pipelineExecutionArn"},
        "ModelPendingApproval": {
            "$.detail.ModelPackageArn",
            f"$.detail.CustomerMetadataProperties.{MODEL_METADATA_F1}",
            f"$.detail.CustomerMetadataProperties.{MODEL_METADATA_DATASET_MANIFEST}",
            "$.detail.MetadataProperties.GeneratedBy",
        },
        "ModelApprovalDecided": {"$.detail.ModelPackageArn", "$.detail.ModelApprovalStatus"},
    }
    for logical, name in by_rule.items():
        assert needed[name] <= paths[logical], name
        text = str(transformers[logical]["InputTemplate"])
        assert "make runs ENV=dev" in text and "console.aws.amazon.com/sagemaker" in text, name
    duplicate = next(logical for logical, name in by_rule.items() if name == "DuplicateDelivery")
    assert "duplicate delivery, nothing trained" in str(transformers[duplicate]["InputTemplate"])


def topic_statements(template: Template) -> list[dict[str, Any]]:
    [policy] = template.find_resources("AWS::SNS::TopicPolicy").values()
    return policy["Properties"]["PolicyDocument"]["Statement"]


def test_eventbridge_may_publish_without_a_condition_and_alarms_only_their_own(template):
    publishers = {
        statement["Principal"]["Service"]: statement
        for statement in topic_statements(template)
        if statement["Effect"] == "Allow" and "sns:Publish" in as_list(statement["Action"])
    }
    assert sorted(publishers) == ["cloudwatch.amazonaws.com", "events.amazonaws.com"]
    assert "Condition" not in publishers["events.amazonaws.com"]  # see stacks/notifications.py for why
    alarm_arn = {"Fn::GetAtt": [logical_id(template, "AWS::CloudWatch::Alarm"), "Arn"]}
    assert publishers["cloudwatch.amazonaws.com"]["Condition"] == {
        "ArnLike": {"aws:SourceArn": alarm_arn},
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
    }


def test_a_dead_letter_alarms_the_topic(template):
    topic = {"Ref": logical_id(template, "AWS::SNS::Topic")}
    queue_name = {"Fn::GetAtt": [logical_id(template, "AWS::SQS::Queue"), "QueueName"]}
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "ApproximateNumberOfMessagesVisible",
            "Namespace": "AWS/SQS",
            "Dimensions": [{"Name": "QueueName", "Value": queue_name}],
            "Threshold": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "AlarmActions": [topic],
            "TreatMissingData": "notBreaching",
        },
    )


def test_optional_email_subscription(bare_stack, dev_settings):
    template = notifications(bare_stack, dev_settings, email="ml-team@example.com")
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ml-team@example.com"})
    assert len(resources_of_type(template.to_json(), "AWS::Events::Rule")) == 5
