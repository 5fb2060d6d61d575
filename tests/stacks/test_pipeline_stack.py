"""PipelineStack as composed in the whole app: the pipeline resource and what it is wired to; every IAM
statement of the app. The constructs themselves are tested alone (test_roles.py, test_trigger.py,
test_notifications.py, test_training_code_asset.py)."""

from __future__ import annotations

import json

import pytest

from pipeline_steps.definition import definition_json
from pipeline_steps.placeholders import placeholders
from pipeline_steps.walk import all_steps
from stacks.assembly import synthesized_definition
from tests.conftest import as_list, dumps, policy_statements, resources_of_type

# Actions that support no resource-level permissions (cloudwatch:PutMetricData is scoped by namespace).
UNSCOPABLE_ACTIONS = {
    "ecr:GetAuthorizationToken",
    "cloudwatch:PutMetricData",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
}


def the(template, resource_type):
    [resource] = resources_of_type(template, resource_type).values()
    return resource["Properties"]


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_the_template_embeds_exactly_the_built_definition(synthesized, env_name):
    environment = synthesized[env_name]
    text, _ = synthesized_definition(environment.templates["pipeline"])
    assert text == definition_json(environment.settings)


def test_pipeline_embeds_the_definition_with_deploy_time_values(dev):
    props = the(dev.templates["pipeline"], "AWS::SageMaker::Pipeline")
    assert props["PipelineName"] == dev.settings.pipeline_name
    body, variables = synthesized_definition(dev.templates["pipeline"])
    definition = json.loads(body)
    assert [s["Name"] for s in all_steps(definition["Steps"])][:7] == [
        "ClaimManifest",
        "ParametersValid",
        "FirstDelivery",
        "DatasetValid",
        "EstimateTrainingCost",
        "CheckTrainingCost",
        "FineTune",
    ]
    assert set(variables) == set(placeholders(dev.settings).substitutions())
    functions = {
        name: {"Fn::GetAtt": [next(k for k in dev.templates["pipeline"]["Resources"] if k.startswith(prefix)), "Arn"]}
        for name, prefix in (
            ("ClaimFunctionArn", "FunctionsClaimManifestFunction"),
            ("EstimateFunctionArn", "FunctionsEstimateTrainingCostFunction"),
            ("RecordFunctionArn", "FunctionsRecordModelFunction"),
        )
    }
    assert {name: variables[name] for name in functions} == functions
    assert "PipelineRole" in dumps(props["RoleArn"])
    assert variables["JobRoleName"] == {
        "Ref": next(k for k in dev.templates["pipeline"]["Resources"] if k.startswith("JobRole"))
    }


def test_model_package_group_exists(dev):
    dev.template("pipeline").has_resource_properties(
        "AWS::SageMaker::ModelPackageGroup", {"ModelPackageGroupName": dev.settings.model_package_group_name}
    )


def test_no_wildcard_action_and_star_resources_only_where_nothing_narrower_exists(dev, prod):
    for env in (dev, prod):
        statements = [s for template in env.templates.values() for s in policy_statements(template)]
        assert statements and all(s["Effect"] == "Allow" for s in statements)
        for statement in statements:
            assert not [a for a in as_list(statement["Action"]) if "*" in a], statement
            if "*" in as_list(statement["Resource"]):
                assert set(as_list(statement["Action"])) <= UNSCOPABLE_ACTIONS, statement
        for role in resources_of_type(env.templates["pipeline"], "AWS::IAM::Role").values():
            assert "ManagedPolicyArns" not in role["Properties"]


def rules_by_detail_type(env) -> dict[str, list[dict]]:
    rules = resources_of_type(env.templates["pipeline"], "AWS::Events::Rule").values()
    by_type: dict[str, list[dict]] = {}
    for rule in rules:
        by_type.setdefault(rule["Properties"]["EventPattern"]["detail-type"][0], []).append(rule["Properties"])
    return by_type


def test_trigger_starts_this_pipeline_on_uploads_to_the_datasets_bucket(dev):
    [trigger] = rules_by_detail_type(dev)["Object Created"]
    assert f":pipeline/{dev.settings.pipeline_name}" in dumps(trigger["Targets"][0]["Arn"])
    assert f'"{dev.settings.name_prefix}-datasets-"' in dumps(trigger["EventPattern"]["detail"]["bucket"])


def test_notifications_follow_this_pipeline_and_its_model_package_group(dev):
    rules = rules_by_detail_type(dev)
    pipeline_rules = [
        *rules["SageMaker Model Building Pipeline Execution Status Change"],
        *rules["SageMaker Model Building Pipeline Execution Step Status Change"],
    ]
    assert len(pipeline_rules) == 3
    for rule in pipeline_rules:
        assert f":pipeline/{dev.settings.pipeline_name}" in dumps(rule["EventPattern"]["detail"]["pipelineArn"])
    packages = rules["SageMaker Model Package State Change"]
    assert len(packages) == 2
    for rule in packages:
        assert rule["EventPattern"]["detail"]["ModelPackageGroupName"] == [dev.settings.model_package_group_name]


@pytest.mark.parametrize(("env_name", "protected"), [("dev", False), ("prod", True)])
def test_production_stacks_are_termination_protected_and_retain_their_state(synthesized, env_name, protected):
    env = synthesized[env_name]
    assert [stack.termination_protection for stack in env.stacks.all()] == [protected] * 3
    pipeline = env.templates["pipeline"]
    stateful = ("AWS::SageMaker::Pipeline", "AWS::SageMaker::ModelPackageGroup", "AWS::SQS::Queue")
    for resource_type in stateful:
        [resource] = resources_of_type(pipeline, resource_type).values()
        assert resource.get("DeletionPolicy") == ("Retain" if protected else "Delete"), resource_type
        assert resource.get("UpdateReplacePolicy") == ("Retain" if protected else "Delete"), resource_type


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_every_stack_and_its_taggable_resources_carry_the_project_tags(synthesized, env_name):
    """The stack tags `cdk deploy` gives CloudFormation (the assembly manifest) and the template's resource tags;
    flag @aws-cdk/core:explicitStackTags drops the former unless the Stack is given them."""
    env = synthesized[env_name]
    expected = {"project": env.settings.name_prefix, "environment": env_name}
    manifest = json.loads((env.assembly / "manifest.json").read_text())
    for which, stack in zip(("data", "network", "pipeline"), env.stacks.all(), strict=True):
        assert manifest["artifacts"][stack.artifact_id]["properties"].get("tags") == expected, stack.stack_name
        [bucket_or_role, *_] = [
            resource
            for resource in env.templates[which]["Resources"].values()
            if resource["Type"] in ("AWS::S3::Bucket", "AWS::EC2::VPC", "AWS::IAM::Role")
        ]
        tags = {tag["Key"]: tag["Value"] for tag in bucket_or_role["Properties"]["Tags"]}
        assert expected.items() <= tags.items(), stack.stack_name


def registration_statements(env) -> list[dict]:
    return [
        statement
        for statement in policy_statements(env.templates["pipeline"])
        if "sagemaker:CreateModelPackage" in as_list(statement["Action"])
    ]


@pytest.mark.parametrize(
    ("env_name", "statuses"),
    [("dev", ["PendingManualApproval", "Approved", "Rejected"]), ("prod", ["PendingManualApproval", "Rejected"])],
)
def test_no_route_to_an_approved_registration_in_prod(synthesized, env_name, statuses):
    env = synthesized[env_name]
    definition = json.loads(synthesized_definition(env.templates["pipeline"])[0])
    [approval] = [p for p in definition["Parameters"] if p["Name"] == "ModelApprovalStatus"]
    assert approval["EnumValues"] == statuses
    assert approval["DefaultValue"] == "PendingManualApproval"
    [register] = registration_statements(env)
    assert register["Condition"] == {"StringEquals": {"sagemaker:ModelApprovalStatus": statuses}}
    every_action = [
        a for template in env.templates.values() for s in policy_statements(template) for a in as_list(s["Action"])
    ]
    assert "sagemaker:UpdateModelPackage" not in every_action
