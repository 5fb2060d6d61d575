"""PipelineNotifications alone in a bare stack: the encrypted topic, its rules and the function they invoke, who
may publish, the dead-letter alarm. Events are the examples of the SageMaker developer guide
(https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html), with this
pipeline's names; matched with the local runner's EventBridge matcher. The messages themselves:
tests/training_code/test_notification_function.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template
from qa import notifications as contract

from config import Settings
from local_runner.assembly import LocalAccount, resolve_intrinsics
from local_runner.event_pattern import matches
from pipeline_steps.names import (
    CLAIM_STEP,
    FIRST_DELIVERY_STEP,
    MODEL_METADATA_DATASET_MANIFEST,
    evaluation_key,
)
from pipeline_steps.walk import find_step
from stacks.assembly import synthesized_definition
from stacks.functions import stage_function_code
from stacks.log_groups import LogGroupSettings
from stacks.notifications import PipelineNotifications
from tests.conftest import as_list, resources_of_type
from tests.stacks.conftest import BareStack, logical_id
from tests.training_code.test_notification_function import ACCOUNT, EXECUTION_ARN, PIPELINE_ARN, REGION, sagemaker_event


def notifications(bare_stack: BareStack, settings: Settings, email: str | None, build_dir: Path) -> Template:
    stack = bare_stack(settings)
    construct = PipelineNotifications(
        stack,
        "Notifications",
        topic_name=settings.notification_topic_name,
        display_name="test fine-tuning",
        pipeline_name="p",
        pipeline_arn=PIPELINE_ARN,
        model_package_group_name=settings.model_package_group_name,
        gate_metric=settings.task_facts.GATE_METRIC,
        key=kms.Key(stack, "Key"),
        email=email,
        env_name=settings.env_name,
        name_prefix=settings.name_prefix,
        code=lambda_.Code.from_asset(str(stage_function_code(build_dir))),
        log_groups=LogGroupSettings.of(settings),
    )
    construct.alarm_on_dead_letters(sqs.Queue(stack, "Queue"), "test queue")
    return Template.from_stack(stack)


@pytest.fixture
def template(bare_stack, dev_settings, tmp_path) -> Template:
    return notifications(bare_stack, dev_settings, email=None, build_dir=tmp_path)


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


def package_event(group: str, status: str) -> dict[str, Any]:
    detail: dict[str, Any] = {
        "ModelPackageGroupName": group,
        "ModelPackageVersion": 2,
        "ModelPackageArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/{group}/2",
        "ModelApprovalStatus": status,
        "MetadataProperties": {"GeneratedBy": EXECUTION_ARN},
        "CustomerMetadataProperties": {
            evaluation_key("f1"): "91.2",
            MODEL_METADATA_DATASET_MANIFEST: "s3://datasets-bucket/datasets/a/v1/manifest.json",
        },
    }
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
        (step_event("FirstDelivery", "Succeeded"), "DuplicateDelivery"),  # the function tells a duplicate
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
        [decided] = rules_matching(template, package_event(group, decision))
        assert decided.startswith("NotificationsModelApprovalDecided")
    assert rules_matching(template, package_event("another-group", "PendingManualApproval")) == []


# The detail fields of the developer guide's examples (leaf paths), per detail type: all a rule may match.
DOCUMENTED_DETAIL_FIELDS = {
    contract.EXECUTION_STATUS_CHANGE: {
        "pipelineExecutionDisplayName",
        "currentPipelineExecutionStatus",
        "previousPipelineExecutionStatus",
        "executionStartTime",
        "executionEndTime",
        "pipelineExecutionDescription",
        "pipelineArn",
        "pipelineExecutionArn",
    },
    contract.STEP_STATUS_CHANGE: {
        "metadata.processingJob.arn",
        "stepStartTime",
        "stepEndTime",
        "stepName",
        "stepType",
        "previousStepStatus",
        "currentStepStatus",
        "pipelineArn",
        "pipelineExecutionArn",
        "failureReason",
        "cacheHitResult",
    },
    contract.MODEL_PACKAGE_STATE_CHANGE: {
        "ModelPackageGroupName",
        "ModelPackageVersion",
        "ModelPackageArn",
        "CreationTime",
        "ModelPackageStatus",
        "CertifyForMarketplace",
        "ModelApprovalStatus",
        "MetadataProperties.GeneratedBy",
        "LastModifiedTime",
    },
}


def leaf_paths(pattern: dict[str, Any], prefix: str = "") -> set[str]:
    paths: set[str] = set()
    for key, value in pattern.items():
        path = f"{prefix}{key}"
        paths |= leaf_paths(value, f"{path}.") if isinstance(value, dict) else {path}
    return paths


def test_rules_match_only_fields_the_sagemaker_event_examples_document(synthesized):
    """A rule on a field no AWS example shows (a condition step's metadata outcome, UpdatedModelPackageFields) may
    never fire; FirstDelivery's outcome is read by the function from the claim step's outputs instead."""
    checked = 0
    for env in synthesized.values():
        for logical, rule in resources_of_type(env.templates["pipeline"], "AWS::Events::Rule").items():
            pattern = rule["Properties"]["EventPattern"]
            if pattern["source"] == ["aws.sagemaker"]:
                [detail_type] = pattern["detail-type"]
                assert leaf_paths(pattern["detail"]) <= DOCUMENTED_DETAIL_FIELDS[detail_type], logical
                checked += 1
    assert checked == 10  # five rules in dev and prod


def notifier(template: Template) -> tuple[str, dict[str, Any]]:
    [(logical, function)] = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": contract.HANDLER}}
    ).items()
    return logical, function["Properties"]


def test_every_rule_invokes_the_function_with_the_event_as_it_is(template):
    """No input transformer: EventBridge "doesn't escape values extracted by Input Path"
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-transform-target-input.html)."""
    logical, _ = notifier(template)
    found = rules(template)
    assert len(found) == 5
    permissions = template.find_resources("AWS::Lambda::Permission")
    for rule_id, rule in found.items():
        [target] = rule["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [logical, "Arn"]}, rule_id
        assert not {"Input", "InputPath", "InputTransformer"} & set(target), rule_id
        assert any(
            p["Properties"]["SourceArn"] == {"Fn::GetAtt": [rule_id, "Arn"]}
            and p["Properties"]["Principal"] == "events.amazonaws.com"
            for p in permissions.values()
        ), rule_id


def test_the_function_knows_the_topic_the_steps_and_the_metadata_keys_it_quotes(template, dev_settings):
    _, function = notifier(template)
    variables = function["Environment"]["Variables"]
    assert variables[contract.TOPIC_ARN_ENV] == {"Ref": logical_id(template, "AWS::SNS::Topic")}
    assert variables[contract.CLAIM_STEP_ENV] == CLAIM_STEP
    assert variables[contract.FIRST_DELIVERY_STEP_ENV] == FIRST_DELIVERY_STEP
    assert (
        variables[contract.F1_METADATA_KEY_ENV]
        == evaluation_key(dev_settings.task_facts.GATE_METRIC)
        == "evaluation_f1"
    )
    assert variables[contract.DATASET_METADATA_KEY_ENV] == MODEL_METADATA_DATASET_MANIFEST
    assert variables[contract.PIPELINE_NAME_ENV] == "p"
    details = str(variables[contract.DETAILS_ENV])
    assert "make runs ENV=dev" in details and "console.aws.amazon.com/sagemaker" in details


def test_the_function_may_publish_encrypted_and_read_only_this_pipelines_steps(template):
    """The publisher's sns:Publish and kms:GenerateDataKey + kms:Decrypt on the topic's key
    (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#send-to-encrypted-topic)."""
    [role] = [r for r in template.find_resources("AWS::IAM::Role") if r.startswith("NotificationsNotifyTopicRole")]
    statements = {
        statement["Sid"]: statement
        for policy in template.find_resources("AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "Sid" in statement
    }
    topic = {"Ref": logical_id(template, "AWS::SNS::Topic")}
    key = {"Fn::GetAtt": [logical_id(template, "AWS::KMS::Key"), "Arn"]}
    assert statements["PublishNotifications"]["Action"] == "sns:Publish"
    assert statements["PublishNotifications"]["Resource"] == topic
    assert statements["EncryptNotifications"]["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert statements["EncryptNotifications"]["Resource"] == key
    assert statements["ReadClaimOutputs"]["Action"] == "sagemaker:ListPipelineExecutionSteps"
    assert "pipeline/p/execution/*" in json.dumps(statements["ReadClaimOutputs"]["Resource"])


def topic_statements(template: Template) -> list[dict[str, Any]]:
    [policy] = template.find_resources("AWS::SNS::TopicPolicy").values()
    return policy["Properties"]["PolicyDocument"]["Statement"]


def test_only_the_alarm_publishes_through_the_topic_policy_and_only_its_own(template):
    publishers = {
        statement["Principal"]["Service"]: statement
        for statement in topic_statements(template)
        if statement["Effect"] == "Allow" and "sns:Publish" in as_list(statement["Action"])
    }
    assert sorted(publishers) == ["cloudwatch.amazonaws.com"]  # EventBridge invokes the function, never the topic
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


def test_optional_email_subscription(bare_stack, dev_settings, tmp_path):
    template = notifications(bare_stack, dev_settings, email="ml-team@example.com", build_dir=tmp_path)
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ml-team@example.com"})
    assert len(resources_of_type(template.to_json(), "AWS::Events::Rule")) == 5


HOSTILE_TEXT = ('Error: "quoted" it\'s C:\\path\\ \\"escaped\\"\nline two\r\n\t{"json": [1]} ' + "x" * 2000)[:2000]


def rendered_by_eventbridge(transformer: dict[str, Any], value: str) -> str:
    """The target input EventBridge builds when every InputPathsMap path holds `value`: each <name> replaced by the
    raw value, as EventBridge "doesn't escape values extracted by Input Path, when populating the Input Template"
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-transform-target-input.html). The template's
    deploy-time parts (Fn::Join of the region) resolved as CloudFormation would."""
    text = resolve_intrinsics(transformer["InputTemplate"], LocalAccount(region="us-east-1").pseudo())
    for name in transformer.get("InputPathsMap", {}):
        text = text.replace(f"<{name}>", value)
    return text


def survives(transformer: dict[str, Any]) -> bool:
    """Whether the input is still a JSON string or document (the page: "For Strings, quotes are required") that
    holds the value whole."""
    try:
        decoded = json.loads(rendered_by_eventbridge(transformer, HOSTILE_TEXT))
    except json.JSONDecodeError:
        return False
    return HOSTILE_TEXT in (decoded if isinstance(decoded, str) else json.dumps(decoded, ensure_ascii=False))


def test_no_rule_target_builds_an_input_a_failure_reason_can_break(synthesized):
    transformers = [
        target["InputTransformer"]
        for env in synthesized.values()
        for template in env.templates.values()
        for rule in resources_of_type(template, "AWS::Events::Rule").values()
        for target in rule["Properties"].get("Targets", [])
        if "InputTransformer" in target
    ]
    assert [t for t in transformers if not survives(t)] == []


def test_the_input_check_catches_the_quoted_text_template_the_rules_had():
    """RuleTargetInput.from_text's template (text in JSON quotes) with a failure reason in it, as it was."""
    old = {
        "InputPathsMap": {"detail-failureReason": "$.detail.failureReason"},
        "InputTemplate": '"[p] execution FAILED at step FineTune: <detail-failureReason>. Details"',
    }
    assert not survives(old)
    assert survives({"InputPathsMap": {}, "InputTemplate": json.dumps(f"a fixed {HOSTILE_TEXT}")})
