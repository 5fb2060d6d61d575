"""Least-privilege IAM: what the job and pipeline roles may do, and what they may not."""

from __future__ import annotations

import pytest

from tests.conftest import as_list, dumps, resources_of_type


def role_statements(env, role_prefix):
    template = env.templates["pipeline"]
    [role_id] = [k for k in resources_of_type(template, "AWS::IAM::Role") if k.startswith(role_prefix)]
    return [
        statement
        for policy in resources_of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def actions(statements):
    return {action for s in statements for action in as_list(s["Action"])}


@pytest.mark.parametrize("role_prefix", ["JobRole", "PipelineRole"])
def test_no_wildcard_actions_and_no_managed_full_access(dev, role_prefix):
    statements = role_statements(dev, role_prefix)
    assert statements
    assert all(s["Effect"] == "Allow" for s in statements)
    for action in actions(statements):
        assert "*" not in action, f"{role_prefix}: wildcard action {action}"
    for role in resources_of_type(dev.templates["pipeline"], "AWS::IAM::Role").values():
        assert "ManagedPolicyArns" not in role["Properties"]


def test_star_resources_only_for_actions_that_cannot_be_scoped(dev):
    unscopable = {
        "ecr:GetAuthorizationToken",
        "cloudwatch:PutMetricData",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeVpcs",
        "ec2:DescribeDhcpOptions",
        "ec2:DescribeSubnets",
        "ec2:DescribeSecurityGroups",
    }
    for role_prefix in ("JobRole", "PipelineRole"):
        for statement in role_statements(dev, role_prefix):
            if "*" in as_list(statement["Resource"]):
                assert set(as_list(statement["Action"])) <= unscopable, statement


def test_job_role_reads_datasets_and_writes_only_artifact_prefixes(dev):
    statements = role_statements(dev, "JobRole")
    writes = [s for s in statements if "s3:PutObject" in as_list(s["Action"])]
    assert len(writes) == 1
    written = dumps(writes[0]["Resource"])
    for prefix in ("checkpoints/*", "processed/*", "models/*", "evaluation/*"):
        assert f"/{prefix}" in written
    assert "datasets" not in written and "base-models" not in written
    reads = dumps([s["Resource"] for s in statements if as_list(s["Action"]) == ["s3:GetObject"]])
    assert "hfqa-dev-datasets-" in reads and "/base-models/*" in reads


def test_job_role_pulls_only_hugging_face_containers(dev):
    [pull] = [s for s in role_statements(dev, "JobRole") if "ecr:BatchGetImage" in as_list(s["Action"])]
    assert ":763104351884:repository/huggingface-pytorch-*" in dumps(pull["Resource"])


def test_job_role_uses_the_project_key_and_grants_only_for_aws_resources(dev):
    statements = role_statements(dev, "JobRole")
    [grant] = [s for s in statements if "kms:CreateGrant" in as_list(s["Action"])]
    assert grant["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}
    [use] = [s for s in statements if "kms:GenerateDataKey" in as_list(s["Action"])]
    assert "ProjectKey" in dumps(use["Resource"])


def test_job_role_may_create_enis_only_in_the_project_subnets_and_group(dev):
    [eni] = [s for s in role_statements(dev, "JobRole") if "ec2:CreateNetworkInterface" in as_list(s["Action"])]
    resources = dumps(eni["Resource"])
    assert "network-interface/*" in resources
    assert "subnet/*" not in resources and "security-group/*" not in resources
    assert resources.count("ImportValue") == dev.settings.network.max_azs + 1  # subnets + EFA group


def test_job_role_writes_logs_only_to_sagemaker_log_groups(dev):
    [logs] = [s for s in role_statements(dev, "JobRole") if "logs:PutLogEvents" in as_list(s["Action"])]
    assert "/aws/sagemaker/TrainingJobs:*" in dumps(logs["Resource"])
    assert "/aws/sagemaker/ProcessingJobs:*" in dumps(logs["Resource"])


def test_pipeline_role_passes_only_the_job_role_and_registers_in_its_group(dev):
    statements = role_statements(dev, "PipelineRole")
    [pass_role] = [s for s in statements if "iam:PassRole" in as_list(s["Action"])]
    assert "JobRole" in dumps(pass_role["Resource"]) and "*" not in dumps(pass_role["Resource"])
    [register] = [s for s in statements if "sagemaker:CreateModelPackage" in as_list(s["Action"])]
    assert "model-package/hfqa-dev-qa-models/*" in dumps(register["Resource"])
    assert "model-package-group/hfqa-dev-qa-models" in dumps(register["Resource"])


def test_model_package_group_exists(dev):
    dev.template("pipeline").has_resource_properties(
        "AWS::SageMaker::ModelPackageGroup", {"ModelPackageGroupName": "hfqa-dev-qa-models"}
    )
