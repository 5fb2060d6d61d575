"""Every path on which EventBridge, a CloudWatch alarm or the notification function writes to a KMS-encrypted
topic or queue has, in the synthesized templates, the permissions the AWS pages require, and no KMS statement for
events.amazonaws.com depends on a condition key no AWS page shows EventBridge sending.

Sources: SNS developer guide, sns-key-management: "compatibility with AWS services" (a publishing service needs
kms:Decrypt and kms:GenerateDataKey* in the key policy; SNS names the topic in the encryption context,
aws:sns:topicArn) and "send-to-encrypted-topic" (a publisher role needs kms:GenerateDataKey and kms:Decrypt);
SQS developer guide, sqs-key-management "compatibility with AWS services" (an event source's key statement:
kms:GenerateDataKey and kms:Decrypt, Resource "*", no condition); EventBridge user guide eb-rule-dlq (queue
policy: sqs:SendMessage for the rule, aws:SourceArn). awslabs/landing-zone-accelerator-on-aws#407 shows the silent
FailedInvocations of a condition key EventBridge does not send. What no test here can show: that AWS delivers;
moto does not model key or topic policies.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import as_list, render, resources_of_type

EVENTS = "events.amazonaws.com"
ALARMS = "cloudwatch.amazonaws.com"
# Condition keys an AWS page shows in the KMS requests made for an EventBridge delivery to a queue: none (the SQS
# page's statement has no condition).
KEYS_EVENTBRIDGE_DELIVERIES_SEND: set[str] = set()
DELIVERY_KMS_ACTIONS = {"kms:Decrypt", "kms:GenerateDataKey"}
# sqs-key-management#compatibility-with-aws-services, the statement for a service event source.
SQS_PAGE_EVENT_SOURCE_STATEMENT = {
    "Effect": "Allow",
    "Principal": {"Service": EVENTS},
    "Action": ["kms:Decrypt", "kms:GenerateDataKey"],  # CDK sorts the page's [GenerateDataKey, Decrypt]
    "Resource": "*",
}


def services(statement: dict[str, Any]) -> list[str]:
    principal = statement.get("Principal", {})
    return as_list(principal.get("Service", [])) if isinstance(principal, dict) else []


def allows(statement: dict[str, Any], action: str) -> bool:
    """Whether an Allow statement's actions cover `action` (exact or a trailing-* pattern)."""
    actions = as_list(statement["Action"])
    return statement["Effect"] == "Allow" and any(
        granted == action or (granted.endswith("*") and action.startswith(granted[:-1])) for granted in actions
    )


def condition_keys(statement: dict[str, Any]) -> set[str]:
    return {key for operator in statement.get("Condition", {}).values() for key in operator}


def key_statements(env) -> list[dict[str, Any]]:
    [key] = resources_of_type(env.templates["data"], "AWS::KMS::Key").values()
    return key["Properties"]["KeyPolicy"]["Statement"]


def key_allows_delivery(env, service: str, context_key: str, arn: str) -> bool:
    """The project key lets `service` encrypt for (and only for) the topic/queue `arn`, by encryption context."""
    return any(
        service in services(statement)
        and all(allows(statement, action) for action in DELIVERY_KMS_ACTIONS)
        and condition_keys(statement) == {context_key}
        and render(statement["Condition"]["StringEquals"][context_key]) == arn
        for statement in key_statements(env)
    )


def arn(service: str, name: str) -> str:
    return f"arn:${{AWS::Partition}}:{service}:${{AWS::Region}}:${{AWS::AccountId}}:{name}"


@pytest.fixture(params=["dev", "prod"])
def env(request, synthesized):
    return synthesized[request.param]


def topics(env) -> dict[str, dict[str, Any]]:
    return resources_of_type(env.templates["pipeline"], "AWS::SNS::Topic")


def test_every_topic_and_queue_written_to_is_encrypted_with_the_project_key(env):
    """EventBridge invokes the notification function (which publishes) and starts the pipeline (dead letters to
    the queue); the alarm publishes too."""
    pipeline = env.templates["pipeline"]
    targets = [
        target
        for rule in resources_of_type(pipeline, "AWS::Events::Rule").values()
        for target in rule["Properties"]["Targets"]
    ]
    functions = resources_of_type(pipeline, "AWS::Lambda::Function")
    assert {target["Arn"]["Fn::GetAtt"][0] for target in targets if "Fn::GetAtt" in target["Arn"]} <= set(functions)
    queues = {target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0] for target in targets if "DeadLetterConfig" in target}
    assert queues == set(resources_of_type(pipeline, "AWS::SQS::Queue"))
    for logical in queues | set(topics(env)):
        properties = pipeline["Resources"][logical]["Properties"]
        assert "Fn::ImportValue" in str(properties.get("KmsMasterKeyId")), logical  # the data stack's key


def test_the_alarm_and_the_notification_function_may_publish_to_the_encrypted_topic(env):
    [(logical, topic)] = topics(env).items()
    name = topic["Properties"]["TopicName"]
    assert key_allows_delivery(env, ALARMS, "kms:EncryptionContext:aws:sns:topicArn", arn("sns", name))
    [policy] = resources_of_type(env.templates["pipeline"], "AWS::SNS::TopicPolicy").values()
    assert policy["Properties"]["Topics"] == [{"Ref": logical}]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    [alarm] = resources_of_type(env.templates["pipeline"], "AWS::CloudWatch::Alarm")
    assert any(
        ALARMS in services(s)
        and allows(s, "sns:Publish")
        and s["Condition"]["ArnLike"]["aws:SourceArn"] == {"Fn::GetAtt": [alarm, "Arn"]}
        for s in statements
    )
    assert not [s for s in statements if EVENTS in services(s)]  # EventBridge no longer publishes itself
    role_statements = [
        statement
        for policy in resources_of_type(env.templates["pipeline"], "AWS::IAM::Policy").values()
        if any("NotificationsNotifyTopicRole" in str(role) for role in policy["Properties"]["Roles"])
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert any(allows(s, "sns:Publish") and s["Resource"] == {"Ref": logical} for s in role_statements)
    assert any(
        all(allows(s, action) for action in DELIVERY_KMS_ACTIONS) and "Fn::ImportValue" in str(s["Resource"])
        for s in role_statements
    )


def test_eventbridge_may_park_failed_starts_in_the_encrypted_dead_letter_queue(env):
    pipeline = env.templates["pipeline"]
    [logical] = resources_of_type(pipeline, "AWS::SQS::Queue")
    [dead_letters] = [s for s in key_statements(env) if s.get("Sid") == "EventBridgeSendsToTheEncryptedDeadLetterQueue"]
    assert {k: v for k, v in dead_letters.items() if k != "Sid"} == SQS_PAGE_EVENT_SOURCE_STATEMENT
    [policy] = resources_of_type(pipeline, "AWS::SQS::QueuePolicy").values()
    [rule] = [r for r, v in resources_of_type(pipeline, "AWS::Events::Rule").items() if "DeadLetterConfig" in str(v)]
    assert any(
        EVENTS in services(s)
        and allows(s, "sqs:SendMessage")
        and s["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [rule, "Arn"]}}}
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    )
    assert policy["Properties"]["Queues"] == [{"Ref": logical}]


def test_no_kms_statement_for_eventbridge_uses_a_condition_key_it_does_not_send(synthesized):
    statements = [
        statement
        for env in synthesized.values()
        for template in env.templates.values()
        for key in resources_of_type(template, "AWS::KMS::Key").values()
        for statement in key["Properties"]["KeyPolicy"]["Statement"]
        if EVENTS in services(statement)
    ]
    assert statements, "the key policies grant EventBridge nothing: its encrypted deliveries would fail"
    for statement in statements:
        assert condition_keys(statement) <= KEYS_EVENTBRIDGE_DELIVERIES_SEND, statement["Sid"]


def test_kms_statement_check_catches_the_silent_deny():
    """The check above fails on the statement that lost every notification (aws:SourceAccount)."""
    broken = {"Principal": {"Service": EVENTS}, "Condition": {"StringEquals": {"aws:SourceAccount": "1"}}}
    assert not condition_keys(broken) <= KEYS_EVENTBRIDGE_DELIVERIES_SEND
