"""JobRole and PipelineRole alone in a bare stack, granted access by the owners of the key, the buckets and
the network (a DataStack and an EFA group in other stacks, as in the app)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from config.images import DLC_REPOSITORIES
from stacks.data import DataStack
from stacks.network import EfaSecurityGroup
from stacks.registry import ACCOUNT_KEY, MAPPING_ID
from stacks.roles import JobRequests, JobRole, PipelineRole
from tests.conftest import as_list, dumps
from tests.stacks.conftest import SUBNET_IDS, bucket_arn, efa_group_in_imported_vpc, environment, joined, new_app
from tests.stacks.iam_reference import ACCOUNT, PARTITION, REGION, Stacks, arn_form_overlaps, reference_arn_form

ARN = "arn:<partition>:{service}:<region>:{account}:{resource}"


@pytest.fixture(scope="module")
def roles(cdk_context, dev_settings, tmp_path_factory) -> dict[str, Template]:
    """Stack name -> template: 'Roles' (jobs in a VPC) and 'RolesWithoutVpc', synthesized once."""
    app = new_app(cdk_context, tmp_path_factory.mktemp("roles"))
    env = environment(dev_settings)
    data = DataStack(app, "Data", settings=dev_settings, env=env)
    efa_group = efa_group_in_imported_vpc(cdk.Stack(app, "Network", env=env))
    stacks = {}
    for name, job_security_group in (("Roles", efa_group), ("RolesWithoutVpc", None)):
        stack = cdk.Stack(app, name, env=env)
        job_role = JobRole(
            stack,
            "JobRole",
            name_prefix=dev_settings.name_prefix,
            layout=dev_settings.layout,
            key=data.project_key,
            artifacts=data.artifacts,
            job_security_group=job_security_group,
        )
        PipelineRole(
            stack,
            "PipelineRole",
            name_prefix=dev_settings.name_prefix,
            layout=dev_settings.layout,
            approval_statuses=dev_settings.registry.approval_statuses,
            key=data.project_key,
            job_role=job_role.role,
            artifacts=data.artifacts,
            model_package_group_name=dev_settings.model_package_group_name,
            **job_requests(dev_settings, data, job_security_group),
        )
        stacks[name] = stack
    return {name: Template.from_stack(stack) for name, stack in stacks.items()}


def job_requests(settings, data: DataStack, group: EfaSecurityGroup | None) -> dict[str, JobRequests]:
    """The pipeline role's training_jobs and processing_jobs, as stacks/pipeline.py builds them."""
    subnets = tuple(subnet.subnet_id for subnet in group.subnets) if group else ()
    group_id = group.security_group.security_group_id if group else None
    key_arn = data.project_key.key.key_arn
    return {
        "training_jobs": JobRequests(
            settings.training_instance_types, tuple(settings.training_subnets(subnets)), group_id, key_arn
        ),
        "processing_jobs": JobRequests((settings.processing.preprocess_instance_type,), subnets, group_id, key_arn),
    }


def role_statements(template: Template, role_prefix: str) -> list[dict[str, Any]]:
    [role_id] = [k for k in template.find_resources("AWS::IAM::Role") if k.startswith(role_prefix)]
    return [
        statement
        for policy in template.find_resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def with_action(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [s for s in statements if action in as_list(s["Action"])]


def test_roles_are_assumed_by_sagemaker_and_carry_no_managed_policy(roles):
    template = roles["Roles"]
    template.resource_count_is("AWS::IAM::Role", 2)
    for role in template.find_resources("AWS::IAM::Role").values():
        assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}}
        ]
        assert "ManagedPolicyArns" not in role["Properties"]


def test_job_role_reads_pinned_inputs_and_base_models_and_writes_only_job_prefixes(roles, dev_settings):
    statements = role_statements(roles["Roles"], "JobRole")
    layout = dev_settings.layout
    reads = [s["Resource"] for s in statements if s["Action"] == "s3:GetObject"]
    # No dataset access: the jobs read the copies ClaimManifest pinned under inputs/.
    assert reads == [
        [
            bucket_arn(dev_settings, "artifacts", f"/{layout.base_models}/*"),
            bucket_arn(dev_settings, "artifacts", f"/{layout.inputs}/*"),
        ]
    ]
    [write] = with_action(statements, "s3:PutObject")
    assert write["Action"] == ["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"]
    assert write["Resource"] == [
        bucket_arn(dev_settings, "artifacts", f"/{prefix}/*") for prefix in sorted(layout.writable_by_jobs())
    ]
    # Claims and evaluation reports are the Lambda functions' to write.
    assert not {layout.claims, layout.evaluation, layout.inputs} & set(layout.writable_by_jobs())
    [listing] = with_action(statements, "s3:ListBucket")
    assert listing["Resource"] == bucket_arn(dev_settings, "artifacts")
    # Only where SageMaker lists for the jobs: the S3Prefix inputs and the checkpoint sync.
    prefixes = [f"{prefix}/*" for prefix in (layout.base_models, layout.inputs, layout.processed, layout.checkpoints)]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": prefixes}}


def test_only_the_job_role_deletes_and_only_checkpoints(roles, dev_settings):
    """SageMaker mirrors the script's checkpoint pruning to S3 with the job's role (model-checkpoints page)."""
    template = roles["Roles"]
    [delete] = with_action(role_statements(template, "JobRole"), "s3:DeleteObject")
    assert as_list(delete["Action"]) == ["s3:DeleteObject"]
    assert as_list(delete["Resource"]) == [
        bucket_arn(dev_settings, "artifacts", f"/{dev_settings.layout.checkpoints}/*")
    ]
    assert not with_action(role_statements(template, "PipelineRole"), "s3:DeleteObject")


def test_only_the_key_arn_is_imported_from_the_data_stack(roles):
    """The buckets' grants name them by their deterministic names: no export for them."""
    resources = [r for s in role_statements(roles["Roles"], "JobRole") for r in as_list(s["Resource"])]
    from_data_stack = {dumps(r) for r in resources if '"Fn::ImportValue": "Data:' in dumps(r)}
    assert len(from_data_stack) == 1 and "ProjectKey" in from_data_stack.pop()


def test_job_role_pulls_only_the_hugging_face_containers(roles):
    """From the registry of the region the stack is deployed to (tests/stacks/test_registry.py)."""
    [pull] = with_action(role_statements(roles["Roles"], "JobRole"), "ecr:BatchGetImage")
    resource = ARN.format(service="ecr", account="<account>", resource=f"repository/{DLC_REPOSITORIES}")
    registry = {"Fn::FindInMap": [MAPPING_ID, {"Ref": "AWS::Region"}, ACCOUNT_KEY]}
    parts = [registry if part == {"Ref": "AWS::AccountId"} else part for part in joined(resource)["Fn::Join"][1]]
    assert pull["Resource"] == {"Fn::Join": ["", parts]}


@pytest.mark.parametrize("role_prefix", ["JobRole", "PipelineRole"])
def test_roles_use_the_project_key_and_grant_it_only_for_aws_resources(roles, role_prefix):
    statements = role_statements(roles["Roles"], role_prefix)
    [grant] = with_action(statements, "kms:CreateGrant")
    # kms:GrantIsForAWSResource applies to grant operations only (KMS grant-authorization page): CreateGrant alone.
    assert grant["Action"] == "kms:CreateGrant"
    assert grant["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}
    [use] = with_action(statements, "kms:GenerateDataKey")
    assert use["Action"] == ["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"]
    assert "ProjectKey" in dumps(use["Resource"]) and use["Resource"] == grant["Resource"]


def test_only_the_job_role_may_encrypt_job_outputs_with_the_project_key(roles):
    [encrypt] = with_action(role_statements(roles["Roles"], "JobRole"), "kms:Encrypt")
    assert encrypt["Action"] == "kms:Encrypt" and "ProjectKey" in dumps(encrypt["Resource"])
    assert not with_action(role_statements(roles["Roles"], "PipelineRole"), "kms:Encrypt")


def test_job_role_may_create_enis_only_in_the_job_subnets_and_group(roles):
    [eni] = with_action(role_statements(roles["Roles"], "JobRole"), "ec2:CreateNetworkInterface")
    resources = dumps(eni["Resource"])
    assert "network-interface/*" in resources
    assert all(f"subnet/{subnet_id}" in resources for subnet_id in SUBNET_IDS)
    assert "subnet/*" not in resources and "security-group/*" not in resources
    assert resources.count("ImportValue") == 1  # the EFA group's id


def test_job_role_outside_a_vpc_gets_no_ec2_permission(roles):
    statements = role_statements(roles["RolesWithoutVpc"], "JobRole")
    assert statements and not [s for s in statements if "ec2:" in dumps(s["Action"])]


# The log groups SageMaker writes job logs to (https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html).
JOB_LOG_GROUPS = ("/aws/sagemaker/ProcessingJobs", "/aws/sagemaker/TrainingJobs")
# Each logs action of the job role and the resource type the Service Authorization Reference gives it
# (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatchlogs.html).
JOB_LOGS_ACTIONS = {
    "logs:CreateLogGroup": "log-group",
    "logs:DescribeLogStreams": "log-group",
    "logs:CreateLogStream": "log-stream",
    "logs:PutLogEvents": "log-stream",
}


def job_logs_resources(roles: dict[str, Template]) -> dict[str, list[str]]:
    """Each logs action of the job role -> its resources, as concrete ARNs."""
    template = roles["Roles"].to_json()
    statements = [
        Stacks({"roles": template}).concrete(s, template)
        for s in role_statements(roles["Roles"], "JobRole")
        if "logs:" in dumps(s["Action"])
    ]
    return {
        action: [r for s in statements if action in as_list(s["Action"]) for r in as_list(s["Resource"])]
        for action in JOB_LOGS_ACTIONS
    }


def test_job_role_writes_logs_only_to_the_sagemaker_job_log_groups(roles):
    resources = job_logs_resources(roles)
    assert all(resources.values())
    group_arns = [f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{group}" for group in JOB_LOG_GROUPS]
    for arn in (r for listed in resources.values() for r in listed):
        assert any(arn == group or arn.startswith(group + ":") for group in group_arns), arn


@pytest.mark.parametrize("action", JOB_LOGS_ACTIONS)
def test_each_job_logs_action_names_both_job_log_groups_in_its_reference_form(roles, action):
    """Finding 5 (a fresh account, where the first job creates its log group): CreateLogGroup and
    DescribeLogStreams take a log-group, arn:...:log-group:<name>, in the Service Authorization Reference; the role
    gave every logs action only arn:...:log-group:<name>:*, a log stream's form there. Each action must name each
    job log group in the form of its own resource type."""
    form = reference_arn_form("logs", JOB_LOGS_ACTIONS[action])
    resources = [r for r in job_logs_resources(roles)[action] if arn_form_overlaps(form, r)]
    for group in JOB_LOG_GROUPS:
        named = f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{group}"
        assert any(r == named or r.startswith(named + ":") for r in resources), (action, group, resources)


def test_pipeline_role_passes_only_the_job_role_and_registers_in_its_group(roles, dev_settings):
    template = roles["Roles"]
    statements = role_statements(template, "PipelineRole")
    [job_role_id] = [k for k in template.find_resources("AWS::IAM::Role") if k.startswith("JobRole")]
    [pass_role] = with_action(statements, "iam:PassRole")
    assert pass_role["Resource"] == {"Fn::GetAtt": [job_role_id, "Arn"]}
    [register] = with_action(statements, "sagemaker:CreateModelPackage")
    group = dev_settings.model_package_group_name
    assert register["Resource"] == [
        joined(ARN.format(service="sagemaker", account="<account>", resource=f"model-package-group/{group}")),
        joined(ARN.format(service="sagemaker", account="<account>", resource=f"model-package/{group}/*")),
    ]


def test_pipeline_role_reads_only_models_and_their_reports_and_cannot_update_packages(roles, dev_settings):
    layout = dev_settings.layout
    statements = role_statements(roles["Roles"], "PipelineRole")
    assert not with_action(statements, "sagemaker:UpdateModelPackage")  # no step uses it
    [read] = with_action(statements, "s3:GetObject")
    patterns = [f"{layout.models}/*", f"{layout.evaluation}/*"]
    assert read["Action"] == "s3:GetObject"
    assert read["Resource"] == [bucket_arn(dev_settings, "artifacts", f"/{p}") for p in sorted(patterns)]
