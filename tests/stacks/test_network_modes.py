"""network.mode=existing imports a VPC by id (no lookup at synth); network.mode=none runs jobs outside a VPC."""

from __future__ import annotations

import json

import aws_cdk as cdk

from config import load_settings
from pipeline_steps.walk import find_step
from stacks.app_builder import build_stacks
from stacks.assembly import synthesized_definition
from tests.conftest import resources_of_type
from tests.security.policy_evaluation import job_request, may_create, resolved_definition, role_statements


def synth(cdk_context, tmp_path, **overrides):
    app = cdk.App(context=cdk_context, outdir=str(tmp_path))
    stacks = build_stacks(app, load_settings({**cdk_context, **overrides}), build_dir=tmp_path / "build")
    assembly = app.synth()
    return {s.stack_name.rsplit("-", 1)[1]: assembly.get_stack_by_name(s.stack_name).template for s in stacks.all()}


def test_existing_vpc_gets_only_the_efa_group_and_the_jobs_use_its_subnets(cdk_context, tmp_path):
    templates = synth(
        cdk_context,
        tmp_path,
        **{
            "network.mode": "existing",
            "network.existing_vpc_id": "vpc-0123456789abcdef0",
            "network.existing_subnet_ids": '["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"]',
            "network.existing_availability_zones": '["us-east-1a", "us-east-1b"]',
            "training.availability_zone": "us-east-1b",
            # The cpu_job graph: both job kinds (its processing job runs in every job subnet).
            "processing.tokenize_in": "cpu_job",
        },
    )
    network = templates["network"]
    assert not resources_of_type(network, "AWS::EC2::VPC")
    [group] = resources_of_type(network, "AWS::EC2::SecurityGroup").values()
    assert group["Properties"]["VpcId"] == "vpc-0123456789abcdef0"
    body, variables = synthesized_definition(templates["pipeline"])
    assert variables["Subnet0"] == "subnet-0123456789abcdef0" and variables["Subnet1"] == "subnet-0fedcba9876543210"
    # Training pinned to us-east-1b: all nodes in that zone's subnet; processing may use both.
    definition = json.loads(body)
    assert find_step(definition, "FineTune")["Arguments"]["VpcConfig"]["Subnets"] == ["${Subnet1}"]
    processing = find_step(definition, "ValidateAndTokenize")["Arguments"]["NetworkConfig"]["VpcConfig"]
    assert processing["Subnets"] == ["${Subnet0}", "${Subnet1}"]
    # The pipeline role backs it: training in us-east-1b's subnet only (tests/security/test_iam_backs_definition.py).
    role, resolved = role_statements(templates, "pipeline", "PipelineRole"), resolved_definition(templates)
    request = job_request(resolved, "FineTune")
    assert request["VpcConfig"]["Subnets"] == ["subnet-0fedcba9876543210"] and may_create(role, "FineTune", request)
    request["VpcConfig"]["Subnets"] = ["subnet-0123456789abcdef0"]
    assert not may_create(role, "FineTune", request)
    assert may_create(role, "ValidateAndTokenize", job_request(resolved, "ValidateAndTokenize"))


def test_no_vpc_mode_has_no_network_resources_and_no_eni_permissions(cdk_context, tmp_path):
    templates = synth(cdk_context, tmp_path, **{"network.mode": "none", "processing.tokenize_in": "cpu_job"})
    assert not templates["network"].get("Resources")
    text = json.dumps(templates["pipeline"])
    assert "ec2:CreateNetworkInterface" not in text
    assert "VpcConfig" not in text
    # Nor may an execution put a job into some VPC: the pipeline role asks for no subnets and no security group.
    role, resolved = role_statements(templates, "pipeline", "PipelineRole"), resolved_definition(templates)
    vpc = {"Subnets": ["subnet-0123456789abcdef0"], "SecurityGroupIds": ["sg-0123456789abcdef0"]}
    training, processing = job_request(resolved, "FineTune"), job_request(resolved, "ValidateAndTokenize")
    assert may_create(role, "FineTune", training) and may_create(role, "ValidateAndTokenize", processing)
    training["VpcConfig"], processing["NetworkConfig"]["VpcConfig"] = vpc, vpc
    assert not may_create(role, "FineTune", training) and not may_create(role, "ValidateAndTokenize", processing)
