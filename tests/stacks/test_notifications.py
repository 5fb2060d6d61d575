"""PipelineNotifications alone in a bare stack: the encrypted topic, its two rules, who may publish."""

from __future__ import annotations

import pytest
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match, Template

from config import Settings
from stacks.notifications import FINAL_STATUSES, PipelineNotifications
from tests.conftest import as_list
from tests.stacks.conftest import BareStack, logical_id

PIPELINE_ARN = "arn:aws:sagemaker:us-east-1:123456789012:pipeline/p"


def notifications(bare_stack: BareStack, settings: Settings, email: str | None) -> Template:
    stack = bare_stack(settings)
    PipelineNotifications(
        stack,
        "Notifications",
        pipeline_arn=PIPELINE_ARN,
        model_package_group_name=settings.model_package_group_name,
        key=kms.Key(stack, "Key"),
        email=email,
    )
    return Template.from_stack(stack)


@pytest.fixture
def template(bare_stack, dev_settings) -> Template:
    return notifications(bare_stack, dev_settings, email=None)


def test_topic_is_encrypted_with_the_key_and_has_no_subscription_by_default(template):
    key_arn = {"Fn::GetAtt": [logical_id(template, "AWS::KMS::Key"), "Arn"]}
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": key_arn})
    template.resource_count_is("AWS::SNS::Subscription", 0)


def test_rules_for_finished_executions_and_models_waiting_for_approval(template, dev_settings):
    topic = {"Ref": logical_id(template, "AWS::SNS::Topic")}
    template.resource_count_is("AWS::Events::Rule", 2)
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.sagemaker"],
                "detail-type": ["SageMaker Model Building Pipeline Execution Status Change"],
                "detail": {"pipelineArn": [PIPELINE_ARN], "currentPipelineExecutionStatus": FINAL_STATUSES},
            },
            "Targets": [Match.object_like({"Arn": topic})],
        },
    )
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.sagemaker"],
                "detail-type": ["SageMaker Model Package State Change"],
                "detail": {
                    "ModelPackageGroupName": [dev_settings.model_package_group_name],
                    "ModelApprovalStatus": ["PendingManualApproval"],
                },
            },
            "Targets": [Match.object_like({"Arn": topic})],
        },
    )


def test_only_the_two_rules_may_publish(template):
    rule_arns = sorted(
        ({"Fn::GetAtt": [rule_id, "Arn"]} for rule_id in template.find_resources("AWS::Events::Rule")), key=str
    )
    [policy] = template.find_resources("AWS::SNS::TopicPolicy").values()
    publishers = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow" and "sns:Publish" in as_list(s["Action"])
    ]
    assert all(s["Principal"] == {"Service": "events.amazonaws.com"} for s in publishers)
    assert sorted((s["Condition"]["ArnEquals"]["aws:SourceArn"] for s in publishers), key=str) == rule_arns


def test_optional_email_subscription(bare_stack, dev_settings):
    template = notifications(bare_stack, dev_settings, email="ml-team@example.com")
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ml-team@example.com"})
