"""Per-construct fixtures: settings, and bare stacks to put one construct in (no pipeline definition build)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint

from config import Settings, load_settings
from config.settings import BucketPurpose
from stacks.network import EfaSecurityGroup

BareStack = Callable[[Settings], cdk.Stack]
SUBNET_IDS = ("subnet-0123456789abcdef0", "subnet-0fedcba9876543210")
VPC_ID = "vpc-0123456789abcdef0"


@pytest.fixture(scope="session")
def dev_settings(cdk_context: dict[str, Any]) -> Settings:
    return load_settings({**cdk_context, "env": "dev"})


@pytest.fixture(scope="session")
def prod_settings(cdk_context: dict[str, Any]) -> Settings:
    return load_settings({**cdk_context, "env": "prod"})


CFN_LINT_REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
# cfn-lint warnings reviewed and accepted, by rule id, with the reason.
ACCEPTED_WARNINGS: dict[str, str] = {
    "W3005": "aws-cdk-lib's S3 auto-delete provider (dev only) declares a DependsOn that a GetAtt already "
    "implies; harmless and not ours to change.",
}


def cfn_lint_problems(template: dict[str, Any]) -> list[str]:
    """cfn-lint's errors and unaccepted warnings on `template` in CFN_LINT_REGIONS, one line each."""
    return [
        f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})"
        for m in lint(json.dumps(template), config=ManualArgs(regions=CFN_LINT_REGIONS))
        if m.rule.id.startswith("E") or (m.rule.id.startswith("W") and m.rule.id not in ACCEPTED_WARNINGS)
    ]


def nag_synth(app: cdk.App, outdir: Path) -> tuple[bool, dict[str, Any]]:
    """Synthesize under AwsSolutionsChecks: (synth passed, CDK's validation report)."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
        passed = True
    except Exception:  # jsii raises a generic error carrying the validation report
        passed = False
    [report] = json.loads((outdir / "validation-report.json").read_text())["pluginReports"]
    return passed, report


def new_app(cdk_context: dict[str, Any], outdir: Path) -> cdk.App:
    """An App with cdk.json's context (feature flags as the CLI sees them), writing into `outdir`."""
    return cdk.App(context=cdk_context, outdir=str(outdir))


def environment(settings: Settings) -> cdk.Environment:
    return cdk.Environment(account=settings.account, region=settings.region)


@pytest.fixture
def bare_stack(cdk_context: dict[str, Any], tmp_path: Path) -> BareStack:
    """settings -> an empty Stack in a fresh App, in the environment of those settings."""

    def make(settings: Settings) -> cdk.Stack:
        return cdk.Stack(new_app(cdk_context, tmp_path), "Bare", env=environment(settings))

    return make


def sibling_stack(stack: cdk.Stack, construct_id: str) -> cdk.Stack:
    """Another stack in the App of `stack`, in the same environment (for cross-stack references)."""
    return cdk.Stack(
        cast(cdk.App, stack.node.root), construct_id, env=cdk.Environment(account=stack.account, region=stack.region)
    )


def efa_group_in_imported_vpc(stack: cdk.Stack) -> EfaSecurityGroup:
    """An EfaSecurityGroup in a VPC imported by id (VPC_ID, subnets SUBNET_IDS), as network.mode=existing does."""
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id=VPC_ID, availability_zones=["az-a", "az-b"], isolated_subnet_ids=list(SUBNET_IDS)
    )
    return EfaSecurityGroup(stack, "EfaSecurityGroup", vpc=vpc, subnets=vpc.isolated_subnets)


def grantee(stack: cdk.Stack) -> iam.Role:
    """A role for a construct's grant methods to grant to."""
    return iam.Role(stack, "Grantee", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))


def statements_of(template: Template) -> list[dict[str, Any]]:
    """Every statement of every AWS::IAM::Policy in `template`."""
    return [
        statement
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def logical_id(template: Template, resource_type: str) -> str:
    """The logical id of the one resource of `resource_type`."""
    [found] = template.find_resources(resource_type)
    return found


_PSEUDO = {"<partition>": "AWS::Partition", "<account>": "AWS::AccountId", "<region>": "AWS::Region"}


def joined(text: str) -> dict[str, Any]:
    """How CDK synthesizes `text` with <partition>, <account> and <region> as pseudo parameters."""
    parts: list[Any] = []
    for piece in re.split(f"({'|'.join(_PSEUDO)})", text):
        if piece in _PSEUDO:
            parts.append({"Ref": _PSEUDO[piece]})
        elif piece:
            parts.append(piece)
    return {"Fn::Join": ["", parts]}


def bucket_name(settings: Settings, purpose: BucketPurpose) -> dict[str, Any]:
    """The synthesized deterministic name of a project bucket."""
    return joined(settings.bucket_name(purpose, "<account>", "<region>"))


def bucket_arn(settings: Settings, purpose: BucketPurpose, suffix: str = "") -> dict[str, Any]:
    """The synthesized ARN of a project bucket (plus `suffix`, e.g. a key pattern), built from its name."""
    return joined(f"arn:<partition>:s3:::{settings.bucket_name(purpose, '<account>', '<region>')}{suffix}")
