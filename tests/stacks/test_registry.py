"""The jobs pull their images from the Deep Learning Containers registry of the region they run in: one account per
region, from the DLC "Region Availability" table (https://aws.github.io/deep-learning-containers/reference/region_availability/,
copied in config/images.py). Most regions share 763104351884; af-south-1, eu-south-1 and China have their own, and
a URI or ECR statement naming another account's registry cannot pull there."""

from __future__ import annotations

import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from config.images import DLC_REGISTRY_ACCOUNTS, DLC_REPOSITORIES, dlc_registry_account
from pipeline_steps.placeholders import PLACEHOLDER, variable_name
from stacks.data import DataStack
from stacks.registry import MAPPING_ID, registry_account
from stacks.roles import JobRole
from tests.conftest import render, resources_of_type
from tests.stacks.conftest import environment, new_app

# (region, partition, URL suffix): two regions with their own registry, one on the shared one, one in China.
REGIONS = [
    ("af-south-1", "aws", "amazonaws.com"),
    ("eu-south-1", "aws", "amazonaws.com"),
    ("us-east-1", "aws", "amazonaws.com"),
    ("cn-north-1", "aws-cn", "amazonaws.com.cn"),
]
IMAGE_FIELDS = re.compile(r'"(?:TrainingImage|ImageUri|Image)":"([^"]+)"')


def in_region(value: Any, template: dict[str, Any], region: str, partition: str, url_suffix: str) -> str:
    """What CloudFormation makes of a template value deployed in `region`: `Fn::FindInMap` looked up in the
    template's Mappings (a KeyError where the region has no entry, as the deployment fails), pseudo parameters
    replaced; other ${...} variables are left as they are."""
    pseudo = {"AWS::Region": region, "AWS::Partition": partition, "AWS::URLSuffix": url_suffix}

    def substituted(text: str) -> str:
        return PLACEHOLDER.sub(lambda match: pseudo.get(match.group(1), match.group(0)), text)

    def looked_up(node: Any) -> Any:
        if isinstance(node, dict) and set(node) == {"Fn::FindInMap"}:
            name, top_key, second_key = node["Fn::FindInMap"]
            return template["Mappings"][name][substituted(render(top_key))][second_key]
        if isinstance(node, dict):
            return {key: looked_up(item) for key, item in node.items()}
        if isinstance(node, list):
            return [looked_up(item) for item in node]
        return node

    return substituted(render(looked_up(value)))


def ecr_statement(template: dict[str, Any]) -> dict[str, Any]:
    [statement] = [
        statement
        for policy in resources_of_type(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Sid") == "PullDeepLearningContainers"
    ]
    return statement


def repository_arn(region: str, partition: str) -> str:
    return f"arn:{partition}:ecr:{region}:{DLC_REGISTRY_ACCOUNTS[region]}:repository/{DLC_REPOSITORIES}"


@pytest.mark.parametrize(("region", "partition", "url_suffix"), REGIONS)
def test_deployed_in_a_region_the_images_and_the_ecr_statement_name_its_registry(
    synthesized, region, partition, url_suffix
):
    """The stacks are environment-agnostic: the pipeline definition's images and the job role's ECR statement look
    the account up on AWS::Region in the template's mapping."""
    template = synthesized["dev"].templates["pipeline"]
    [pipeline] = resources_of_type(template, "AWS::SageMaker::Pipeline").values()
    body, variables = pipeline["Properties"]["PipelineDefinition"]["PipelineDefinitionBody"]["Fn::Sub"]
    account_variable = variable_name("dlc_registry_account")
    account = in_region(variables[account_variable], template, region, partition, url_suffix)
    body = body.replace("${" + account_variable + "}", account)
    definition = in_region(body, template, region, partition, url_suffix)
    images = IMAGE_FIELDS.findall(definition)
    assert len(images) == 2  # FineTune, RegisterModel's inference container (fine_tune mode: no ValidateAndTokenize)
    registry = f"{DLC_REGISTRY_ACCOUNTS[region]}.dkr.ecr.{region}.{url_suffix}/"
    assert all(image.startswith(registry + "huggingface-pytorch-") for image in images), images
    resource = ecr_statement(template)["Resource"]
    assert in_region(resource, template, region, partition, url_suffix) == repository_arn(region, partition)


def test_the_mapping_lists_exactly_the_regions_with_a_registry(synthesized):
    """A region without an entry fails the deployment at the lookup, before a job could fail to pull."""
    template = synthesized["dev"].templates["pipeline"]
    mapping = template["Mappings"][MAPPING_ID]
    assert {region: entry["Account"] for region, entry in mapping.items()} == DLC_REGISTRY_ACCOUNTS
    with pytest.raises(KeyError):
        in_region(ecr_statement(template)["Resource"], template, "xx-nowhere-1", "aws", "amazonaws.com")


def test_a_region_known_at_synth_gets_its_account_and_no_mapping(cdk_context, dev_settings, tmp_path):
    settings = dev_settings.model_copy(update={"region": "af-south-1", "account": "111122223333"})
    app = new_app(cdk_context, tmp_path)
    data = DataStack(app, "Data", settings=settings, env=environment(settings))
    stack = cdk.Stack(app, "Roles", env=environment(settings))
    JobRole(
        stack,
        "JobRole",
        name_prefix=settings.name_prefix,
        layout=settings.layout,
        key=data.project_key,
        artifacts=data.artifacts,
        job_security_group=None,
    )
    assert registry_account(stack) == "626614931356"
    template = Template.from_stack(stack).to_json()
    assert "Mappings" not in template
    assert in_region(ecr_statement(template)["Resource"], template, "af-south-1", "aws", "amazonaws.com") == (
        repository_arn("af-south-1", "aws")
    )


def test_a_region_without_a_registry_has_no_account():
    with pytest.raises(ValueError, match=r"^no AWS Deep Learning Containers registry serves xx-nowhere-1 \(") as err:
        dlc_registry_account("xx-nowhere-1")
    assert "\n" not in str(err.value)
