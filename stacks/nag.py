"""cdk-nag (AwsSolutions) acknowledgments, recorded beside what they excuse: one exact finding id at a time, each
with its reason. The wildcards acknowledged are the narrowest form the AWS APIs allow; all else must pass cdk-nag.

cdk-nag reports a finding on a CloudFormation resource; an acknowledgment counts on that resource or any construct
above it (cdk-nag's NagPack.isAcknowledged walks up the scopes; CDK's validation report takes the closest one). So a
statement's wildcards are acknowledged on the role whose policy holds it, a rule on the construct that breaks it.
"""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

RULE_PACK = "AwsSolutions"


def finding_id(rule: str, finding: str | None = None) -> str:
    """The id CDK's validation report gives a cdk-nag finding: `AwsSolutions::AwsSolutions-<rule>[<finding>]`."""
    return f"{RULE_PACK}::{RULE_PACK}-{rule}" + (f"[{finding}]" if finding else "")


def nag_name(scope: IConstruct, value: str) -> str:
    """`value` (tokens allowed) as cdk-nag writes it in a finding: resolved in the stack of `scope`, then flattened
    like cdk-nag's flattenCfnReference (`Ref` -> `<Name>`, `Fn::GetAtt` -> `<Name.Attr>`, `Fn::Join` joined,
    `Fn::FindInMap` as compact JSON)."""
    return _flattened(cdk.Stack.of(scope).resolve(value))


def _flattened(node: Any) -> str:
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, dict) and len(node) == 1:
        [(function, argument)] = node.items()
        if function == "Fn::Join":
            delimiter, parts = argument
            return delimiter.join(_flattened(part) for part in parts)
        if function == "Ref":
            return f"<{_flattened(argument)}>"
        if function == "Fn::GetAtt":
            resource, attribute = argument
            return f"<{_flattened(resource)}.{_flattened(attribute)}>"
        if function in ("Fn::Sub", "Fn::ImportValue"):
            return _flattened(argument)
        if function == "Fn::FindInMap":
            return json.dumps(node, separators=(",", ":"))  # flattenCfnReference's fallback: JSON.stringify
    raise ValueError(f"cdk-nag's finding name for {node!r} is not known here: acknowledge it by its exact id")


def acknowledge(scope: IConstruct, rule: str, reason: str, finding: str | None = None) -> None:
    """Acknowledge cdk-nag `rule` (one `finding` of it, if given) on `scope` and the resources below it."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=finding_id(rule, finding), reason=reason))


def add_reviewed_statement(grantee: iam.IGrantable, statement: iam.PolicyStatement, reason: str) -> None:
    """Add `statement` to the grantee's policy and acknowledge, with `reason`, each of its resources that cdk-nag
    names with a wildcard (AwsSolutions-IAM5): on the grantee's principal, above the policy the finding is on."""
    principal = grantee.grant_principal
    if not isinstance(principal, Construct):
        raise TypeError(f"{principal}: a wildcard acknowledgment needs the construct that holds the policy")
    principal.add_to_principal_policy(statement)
    for resource in statement.resources:
        name = nag_name(principal, resource)
        if "*" in name:
            acknowledge(principal, "IAM5", reason, finding=f"Resource::{name}")
