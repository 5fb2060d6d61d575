"""PipelineStack as composed in the whole app: the pipeline resource and what it is wired to; every IAM
statement of the app. The constructs themselves are tested alone (test_roles.py, test_trigger.py,
test_notifications.py, test_training_code_asset.py)."""

from __future__ import annotations

import json

import pytest

from local_runner.assembly import synthesized_definition
from pipeline_steps.definition import definition_json
from pipeline_steps.placeholders import placeholders
from pipeline_steps.walk import all_steps
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
        "ValidateAndTokenize",
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


def rules_by_detail_type(env):
    rules = resources_of_type(env.templates["pipeline"], "AWS::Events::Rule").values()
    return {rule["Properties"]["EventPattern"]["detail-type"][0]: rule["Properties"] for rule in rules}


def test_trigger_starts_this_pipeline_on_uploads_to_the_datasets_bucket(dev):
    trigger = rules_by_detail_type(dev)["Object Created"]
    assert f":pipeline/{dev.settings.pipeline_name}" in dumps(trigger["Targets"][0]["Arn"])
    assert f'"{dev.settings.name_prefix}-datasets-"' in dumps(trigger["EventPattern"]["detail"]["bucket"])


def test_notifications_follow_this_pipeline_and_its_model_package_group(dev):
    rules = rules_by_detail_type(dev)
    status = rules["SageMaker Model Building Pipeline Execution Status Change"]["EventPattern"]["detail"]
    assert f":pipeline/{dev.settings.pipeline_name}" in dumps(status["pipelineArn"])
    approval = rules["SageMaker Model Package State Change"]["EventPattern"]["detail"]
    assert approval["ModelPackageGroupName"] == [dev.settings.model_package_group_name]
