"""Issue 30, finding 9: the project key let CloudWatch Logs use it for any log group in the account, and the job
role could list the whole artifacts bucket.

Each attack is performed on the synthesized templates (the session's dev and prod App) with a policy evaluator
(tests/security/policy_evaluation.py): what the project needs is allowed, the attacker's request is denied. AWS's
evaluation itself cannot be run offline.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import SynthesizedEnvironment, resources_of_type
from tests.security.policy_evaluation import allowed, condition_holds, role_statements
from tests.stacks.iam_reference import ACCOUNT, PARTITION, REGION, Stacks


@pytest.fixture(scope="module", params=["dev", "prod"])
def env(request) -> SynthesizedEnvironment:
    return request.getfixturevalue(request.param)


# ------------------------------------------------------------------------- the key and CloudWatch Logs (finding 9)


def key_statement(env: SynthesizedEnvironment, sid: str) -> dict[str, Any]:
    template = env.templates["data"]
    [key] = resources_of_type(template, "AWS::KMS::Key").values()
    [statement] = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Sid") == sid]
    return Stacks(env.templates).concrete(statement, template)


def log_group_arn(name: str) -> str:
    return f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{name}"


def test_cloudwatch_logs_may_use_the_key_for_the_project_log_groups_only(env):
    """The encryption context CloudWatch Logs sends is kms:EncryptionContext:aws:logs:arn, the log group's ARN
    (encrypt-log-data-kms page). Every log group the project encrypts with the key is named under the project's
    root, and those pass; any other log group of the account does not."""
    statement = key_statement(env, "CloudWatchLogsForTheProjectLogGroups")
    encrypted = [
        group["Properties"]
        for template in env.templates.values()
        for group in resources_of_type(template, "AWS::Logs::LogGroup").values()
        if "KmsKeyId" in group["Properties"]
    ]
    assert len(encrypted) >= 4  # the four functions' (dev and prod: the flow logs too)
    for group in encrypted:
        name = group["LogGroupName"]
        assert name.startswith(env.settings.log_group_root), name
        context = {"kms:EncryptionContext:aws:logs:arn": log_group_arn(name)}
        assert allowed([statement], "kms:GenerateDataKey", "*", context), name
    for unrelated in ("/aws/lambda/someone-elses-function", "/hfqa-other/functions/x", "team-logs"):
        context = {"kms:EncryptionContext:aws:logs:arn": log_group_arn(unrelated)}
        assert not allowed([statement], "kms:Decrypt", "*", context), unrelated
    # Nor a log group of another account or region.
    other_account = log_group_arn(f"{env.settings.log_group_root}x").replace(ACCOUNT, "999999999999")
    assert not condition_holds(statement["Condition"], {"kms:EncryptionContext:aws:logs:arn": other_account})


# ---------------------------------------------------------------------- the job role's listings (finding 9)


def test_the_job_role_lists_only_the_prefixes_sagemaker_lists_for_its_jobs(env):
    statements = role_statements(env.templates, "pipeline", "JobRole")
    layout = env.settings.layout
    bucket = f"arn:{PARTITION}:s3:::{env.settings.bucket_name('artifacts', ACCOUNT, REGION)}"

    def may_list(prefix: str | None) -> bool:
        return allowed(statements, "s3:ListBucket", bucket, {} if prefix is None else {"s3:prefix": prefix})

    # The S3Prefix inputs and the checkpoint folder of an execution, as the definition names them.
    for prefix in (
        f"{layout.base_models}/bert-large-uncased-whole-word-masking/",
        f"{layout.inputs}/0123abcd/",
        f"{layout.processed}/exec-1/train",
        f"{layout.checkpoints}/exec-1",
    ):
        assert may_list(prefix), prefix
    for denied in (None, "", f"{layout.claims}/", f"{layout.models}/", f"{layout.evaluation}/", "registry/"):
        assert not may_list(denied), denied


# ---------------------------------------------------------------- EventBridge and the topic (Do 9, last item)


def test_eventbridge_holds_no_unconditioned_grant_on_the_topic_and_invokes_the_notifier_per_rule(env):
    """At 216184a the topic policy let events.amazonaws.com publish without a condition (the EventBridge-to-SNS
    statement allowed none). The rules now invoke the notification function, which publishes with its own role: no
    topic statement names EventBridge, and each of its invoke permissions names one rule (SourceArn)."""
    template = env.templates["pipeline"]
    topic_statements = [
        statement
        for policy in resources_of_type(template, "AWS::SNS::TopicPolicy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert topic_statements
    assert all("events.amazonaws.com" not in str(s.get("Principal")) for s in topic_statements)
    rules = resources_of_type(template, "AWS::Events::Rule")
    invokes = [
        p["Properties"]
        for p in resources_of_type(template, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert invokes and all(p["SourceArn"]["Fn::GetAtt"][0] in rules for p in invokes)
