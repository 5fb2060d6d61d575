"""Values only known at deploy time, as CloudFormation `Fn::Sub` placeholders.

The definition is built with these strings in place of ARNs, names and ids; the pipeline stack wraps the
JSON in `Fn::Sub` with a value for each variable below, and the local runner substitutes local values.
`${AWS::Region}`, `${AWS::AccountId}`, `${AWS::Partition}` and `${AWS::URLSuffix}` are pseudo parameters
that `Fn::Sub` resolves by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from config import Settings

PSEUDO_PARAMETERS = ("AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::URLSuffix")
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9:]+)\}")


def var(name: str) -> str:
    return "${" + name + "}"


@dataclass(frozen=True)
class DeployTimeValues:
    """Placeholders for what the stacks create; `subnet_count` 0 means jobs run outside a VPC.

    `training_subnet` is the index of the one subnet that all training nodes share.
    """

    subnet_count: int = 2
    training_subnet: int = 0
    account: str = var("AWS::AccountId")
    region: str = var("AWS::Region")

    job_role_name: str = var("JobRoleName")
    kms_key_arn: str = var("KmsKeyArn")
    code_bucket: str = var("CodeBucket")
    code_key: str = var("CodeKey")
    security_group_id: str = var("SecurityGroupId")

    @property
    def job_role_arn(self) -> str:
        # A full ARN (the SDK calls IAM to expand a bare role name).
        return f"arn:{var('AWS::Partition')}:iam::{self.account}:role/{self.job_role_name}"

    @property
    def subnet_ids(self) -> list[str]:
        return [var(f"Subnet{i}") for i in range(self.subnet_count)]

    @property
    def training_subnet_ids(self) -> list[str]:
        return [var(f"Subnet{self.training_subnet}")] if self.subnet_count else []

    @property
    def code_uri(self) -> str:
        return f"s3://{self.code_bucket}/{self.code_key}"

    @property
    def ecr_domain(self) -> str:
        return f"dkr.ecr.{self.region}.{var('AWS::URLSuffix')}"


def deploy_time_values(settings: Settings) -> DeployTimeValues:
    """The placeholders for `settings`: one subnet variable per subnet the jobs run in."""
    return DeployTimeValues(subnet_count=settings.network.subnet_count, training_subnet=settings.training_subnet_index)


def variables_in(text: str) -> set[str]:
    """Names of every `${...}` placeholder in a definition, pseudo parameters excluded."""
    return {name for name in PLACEHOLDER.findall(text) if name not in PSEUDO_PARAMETERS}
