"""The S3 gateway endpoint's policy and the job role's agree, in the synthesized templates of both environments.

A request through the endpoint needs both policies to allow it ("An endpoint policy does not override or replace
identity-based policies", https://docs.aws.amazon.com/vpc/latest/userguide/vpc-endpoints-access.html). The jobs' S3
traffic goes through it: under network isolation SageMaker moves the data with the job's role
(https://docs.aws.amazon.com/sagemaker/latest/dg/mkt-algo-model-internet-free.html), through the VpcConfig's network
interface (https://repost.aws/knowledge-center/sagemaker-access-network-isolation), including the checkpoint deletions
it mirrors to S3 (https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html). So every S3 grant of the
job role must pass the endpoint (else the job fails, as checkpoint pruning did), and the endpoint allows no write
and no action that the role does not make.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from typing import Any

import pytest

from pipeline_steps.placeholders import variable_name
from pipeline_steps.walk import all_steps
from tests.conftest import as_list, render, resources_of_type

READS = {"s3:GetObject", "s3:ListBucket"}  # the endpoint may read more widely than the role: IAM narrows it

Grant = tuple[str, str]  # (action, resource ARN pattern with ${AWS::...} placeholders)


def grants(statements: list[dict[str, Any]]) -> set[Grant]:
    """Every (S3 action, resource) an Allow statement grants."""
    return {
        (action, render(resource))
        for statement in statements
        if statement["Effect"] == "Allow"
        for action in as_list(statement["Action"])
        if action.startswith("s3:")
        for resource in as_list(statement["Resource"])
    }


def covered(grant: Grant, by: set[Grant]) -> bool:
    """Whether a grant in `by` allows the same action on every ARN `grant`'s pattern matches (a `*` in `by` matches the
    literal `*` of a narrower pattern too)."""
    action, resource = grant
    return any(other_action == action and fnmatchcase(resource, pattern) for other_action, pattern in by)


def endpoint_grants(env) -> set[Grant]:
    endpoints = resources_of_type(env.templates["network"], "AWS::EC2::VPCEndpoint").values()
    [gateway] = [e["Properties"] for e in endpoints if e["Properties"]["VpcEndpointType"] == "Gateway"]
    return grants(gateway["PolicyDocument"]["Statement"])


def job_role_id(env) -> str:
    """The role the pipeline definition runs its jobs as (the Fn::Sub variable behind ${JobRoleName})."""
    [pipeline] = resources_of_type(env.templates["pipeline"], "AWS::SageMaker::Pipeline").values()
    _, variables = pipeline["Properties"]["PipelineDefinition"]["PipelineDefinitionBody"]["Fn::Sub"]
    return variables[variable_name("job_role_name")]["Ref"]


def role_grants(env, role_id: str) -> set[Grant]:
    policies = resources_of_type(env.templates["pipeline"], "AWS::IAM::Policy").values()
    return grants(
        [
            statement
            for policy in policies
            if {"Ref": role_id} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]
    )


@pytest.fixture(params=["dev", "prod"])
def env(request, synthesized):
    return synthesized[request.param]


def test_only_the_jobs_run_in_the_subnets_and_all_as_the_job_role(env):
    """The endpoint's only users: the processing and training jobs, each as the job role; no function (nor any other
    resource) is attached to the VPC."""
    [pipeline] = resources_of_type(env.templates["pipeline"], "AWS::SageMaker::Pipeline").values()
    body, _ = pipeline["Properties"]["PipelineDefinition"]["PipelineDefinitionBody"]["Fn::Sub"]
    steps = [step for step in all_steps(json.loads(body)["Steps"]) if step["Type"] != "Condition"]
    in_vpc = [step for step in steps if '"Subnets"' in json.dumps(step["Arguments"])]
    jobs = {"Training"} if env.settings.tokenizes_in_fine_tune else {"Processing", "Training"}
    assert {step["Type"] for step in in_vpc} == jobs
    job_role_arn = "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/${" + variable_name("job_role_name") + "}"
    assert {step["Arguments"]["RoleArn"] for step in in_vpc} == {job_role_arn}
    for template in env.templates.values():
        for resource in template["Resources"].values():
            assert "VpcConfig" not in resource.get("Properties", {}), resource["Type"]


def test_the_endpoint_lets_through_every_s3_request_the_job_role_may_make(env):
    role = role_grants(env, job_role_id(env))
    assert ("s3:DeleteObject", bucket_arn(env, "artifacts", "/checkpoints/*")) in role
    assert not {grant for grant in role if not covered(grant, endpoint_grants(env))}


def test_the_endpoint_allows_no_write_and_no_action_the_job_role_does_not_make(env):
    role, endpoint = role_grants(env, job_role_id(env)), endpoint_grants(env)
    writes = {grant for grant in endpoint if grant[0] not in READS}
    assert not {grant for grant in writes if not covered(grant, role)}
    # Read-only there: no job writes datasets or the CDK assets (the training code).
    datasets = bucket_arn(env, "datasets")
    assert not {grant for grant in writes if grant[1].startswith((datasets, "arn:${AWS::Partition}:s3:::cdk-"))}
    # GetObjectVersion, GetBucketLocation, ListMultipartUploadParts: the role has none of them, so none passes.
    assert {action for action, _ in endpoint} <= {action for action, _ in role}


def bucket_arn(env, purpose: str, suffix: str = "") -> str:
    bucket = env.settings.bucket_name(purpose, "${AWS::AccountId}", "${AWS::Region}")
    return f"arn:${{AWS::Partition}}:s3:::{bucket}{suffix}"
