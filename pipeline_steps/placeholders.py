"""The contract between the pipeline definition and the stacks: values only known at deploy time.

The definition is built with `${Name}` placeholders (`DeployTimeValues.placeholders`); the pipeline stack
wraps the JSON in `Fn::Sub` with `substitutions()` of its CDK tokens, and the local runner with those of
local stand-ins. One object holds the names, so the three cannot drift apart. `${AWS::Region}`,
`${AWS::AccountId}`, `${AWS::Partition}` and `${AWS::URLSuffix}` are pseudo parameters that `Fn::Sub`
resolves by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from config import Settings

PSEUDO_PARAMETERS = ("AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::URLSuffix")
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9:]+)\}")


# The handler of each Lambda step's function (training_code/pipeline_functions.py): the stacks configure the
# functions with them, and the local runner's function ARNs name them.
FUNCTION_HANDLERS = {
    "claim_function_arn": "pipeline_functions.claim_handler",
    "estimate_function_arn": "pipeline_functions.estimate_cost_handler",
    "record_function_arn": "pipeline_functions.record_model_handler",
}


def var(name: str) -> str:
    return "${" + name + "}"


REGION, ACCOUNT, PARTITION, URL_SUFFIX = (var(name) for name in PSEUDO_PARAMETERS)


def variable_name(field_name: str) -> str:
    """The `Fn::Sub` variable of a field: `job_role_name` -> `JobRoleName`."""
    return "".join(part.capitalize() for part in field_name.split("_"))


def subnet_variable(index: int) -> str:
    return f"Subnet{index}"


@dataclass(frozen=True)
class DeployTimeValues:
    """What the stacks create and the definition refers to. No subnets (and no security group): jobs run
    outside a VPC."""

    job_role_name: str
    kms_key_arn: str
    # The account whose registry serves the Deep Learning Containers in the deployment's region (config/images.py;
    # a lookup on AWS::Region when the stacks are environment-agnostic).
    dlc_registry_account: str
    code_bucket: str
    code_key: str
    # The SHA-256 of the code bundle the stacks built: both jobs' entry commands refuse a bundle without it.
    code_sha256: str
    # The pipeline's Lambda functions (training_code/pipeline_functions.py), one per Lambda step.
    claim_function_arn: str
    estimate_function_arn: str
    record_function_arn: str
    security_group_id: str | None = None
    subnet_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.security_group_id is None) != (not self.subnet_ids):
            raise ValueError("jobs in a VPC need both subnets and a security group; outside one, neither")

    @classmethod
    def placeholders(cls, subnet_count: int) -> DeployTimeValues:
        """The `${Name}` placeholders the definition is built with, one subnet variable per subnet."""
        in_vpc = subnet_count > 0
        return cls(
            **{
                field.name: var(variable_name(field.name))
                for field in fields(cls)
                if field.name not in ("security_group_id", "subnet_ids")
            },
            security_group_id=var(variable_name("security_group_id")) if in_vpc else None,
            subnet_ids=tuple(var(subnet_variable(index)) for index in range(subnet_count)),
        )

    def substitutions(self) -> dict[str, str]:
        """`Fn::Sub` variable name -> value, for every placeholder of a definition built for these values."""
        named = {
            variable_name(field.name): getattr(self, field.name)
            for field in fields(self)
            if field.name != "subnet_ids" and getattr(self, field.name) is not None
        }
        named.update({subnet_variable(index): subnet for index, subnet in enumerate(self.subnet_ids)})
        return named

    @property
    def job_role_arn(self) -> str:
        # A full ARN (the SDK calls IAM to expand a bare role name).
        return f"arn:{PARTITION}:iam::{ACCOUNT}:role/{self.job_role_name}"

    @property
    def code_uri(self) -> str:
        return f"s3://{self.code_bucket}/{self.code_key}"


def placeholders(settings: Settings) -> DeployTimeValues:
    """The placeholders of a definition built for `settings`."""
    return DeployTimeValues.placeholders(settings.network.subnet_count)


def variables_in(text: str) -> set[str]:
    """Names of every `${...}` placeholder in a definition, pseudo parameters excluded."""
    return {name for name in PLACEHOLDER.findall(text) if name not in PSEUDO_PARAMETERS}
