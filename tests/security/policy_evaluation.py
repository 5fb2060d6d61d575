"""A small IAM policy evaluator for the statements the stacks synthesize, and the request contexts SageMaker builds
from the definition's job requests: enough to perform an attack against a statement without AWS.

Condition semantics, from IAM's condition-operator page
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html): a key the
request context lacks makes an operator false, except `...IfExists` (true) and `Null` (which tests presence);
several values of one key are ORed, several keys and operators ANDed; a negated operator (`StringNotEquals`, ...) holds
for a request without the key. Set operators on multivalued keys
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html):
`ForAllValues:` holds when every value of the request matches one of the policy's (and when the key is missing),
`ForAnyValue:` when one does (never for a missing key). Operators this module does not know raise, so a statement it
cannot judge fails its test instead of passing it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from pipeline_steps import names
from pipeline_steps.walk import find_step
from stacks.assembly import synthesized_definition
from tests.conftest import as_list, resources_of_type
from tests.stacks.iam_reference import ACCOUNT, PARTITION, REGION, Stacks

Context = dict[str, Any]  # condition key -> a string, or a list of strings for a multivalued key
Templates = dict[str, dict[str, Any]]  # "data", "network", "pipeline" -> the template of one environment
JOB_ACTIONS = {names.TRAIN_STEP: "sagemaker:CreateTrainingJob", names.PREPROCESS_STEP: "sagemaker:CreateProcessingJob"}
JOB_ARNS = {
    names.TRAIN_STEP: f"arn:{PARTITION}:sagemaker:{REGION}:{ACCOUNT}:training-job/pipelines-abc123-finetune",
    names.PREPROCESS_STEP: f"arn:{PARTITION}:sagemaker:{REGION}:{ACCOUNT}:processing-job/pipelines-abc-validate",
}


def _glob(pattern: str) -> re.Pattern[str]:
    """IAM's wildcards: * any characters, ? one character."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)


def _arn_like(pattern: str, value: str) -> bool:
    """ArnLike: each of the six colon-separated parts matched on its own (the sixth keeps its colons)."""
    wanted, given = pattern.split(":", 5), value.split(":", 5)
    return len(wanted) == len(given) == 6 and all(_glob(w).fullmatch(g) for w, g in zip(wanted, given, strict=True))


_MATCHERS = {
    "StringEquals": lambda policy, value: policy == value,
    "StringLike": lambda policy, value: bool(_glob(policy).fullmatch(value)),
    "ArnEquals": lambda policy, value: policy == value,
    "ArnLike": _arn_like,
    "Bool": lambda policy, value: policy.lower() == str(value).lower(),
}


# Negated operators hold where their positive form does not, and where the request lacks the key.
_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
}


def _operator_holds(operator: str, key: str, policy_values: list[str], context: Context) -> bool:
    present = key in context and context[key] not in (None, [])
    if operator == "Null":
        [wanted] = policy_values
        return (not present) == (wanted.lower() == "true")
    if operator in _NEGATED:
        return not present or not _operator_holds(_NEGATED[operator], key, policy_values, context)
    if operator == "NumericLessThan":
        [bound] = policy_values
        return present and float(context[key]) < float(bound)
    qualifier, _, base = operator.rpartition(":")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    if base not in _MATCHERS or qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise NotImplementedError(f"condition operator {operator}: teach tests/security/policy_evaluation.py it")
    match = _MATCHERS[base]
    if not present:
        return qualifier == "ForAllValues" or if_exists
    values = as_list(context[key])
    if qualifier == "":
        if len(values) != 1:
            raise ValueError(f"{key} is multivalued in the request: a single-valued operator ({operator}) on it")
        values_match = [any(match(policy, values[0]) for policy in policy_values)]
    else:
        values_match = [any(match(policy, value) for policy in policy_values) for value in values]
    return all(values_match) if qualifier in ("", "ForAllValues") else any(values_match)


def condition_holds(condition: dict[str, dict[str, Any]] | None, context: Context) -> bool:
    """Whether a statement's Condition block holds for a request context."""
    return all(
        _operator_holds(operator, key, [str(v) for v in as_list(values)], context)
        for operator, keys in (condition or {}).items()
        for key, values in keys.items()
    )


def _action_matches(pattern: str, action: str) -> bool:
    return bool(_glob(pattern.lower()).fullmatch(action.lower()))


def allowed(statements: Iterable[dict[str, Any]], action: str, resource: str, context: Context) -> bool:
    """Whether the (concrete) statements allow `action` on `resource` in `context`: some Allow matches it and no
    Deny does. NotAction and NotResource are not modelled (no statement here uses them)."""

    def applies(statement: dict[str, Any]) -> bool:
        if "NotAction" in statement or "NotResource" in statement:
            raise NotImplementedError("NotAction/NotResource: teach tests/security/policy_evaluation.py them")
        return (
            any(_action_matches(pattern, action) for pattern in as_list(statement["Action"]))
            and any(_glob(pattern).fullmatch(resource) for pattern in as_list(statement.get("Resource", "*")))
            and condition_holds(statement.get("Condition"), context)
        )

    matching = [statement for statement in statements if applies(statement)]
    return any(s["Effect"] == "Allow" for s in matching) and not any(s["Effect"] == "Deny" for s in matching)


# ------------------------------------------------------------------------------------ SageMaker's request context


def _dig(request: dict[str, Any], *path: str) -> Any:
    value: Any = request
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def job_request_context(action: str, request: dict[str, Any]) -> Context:
    """The SageMaker condition keys of one CreateTrainingJob or CreateProcessingJob request, each read from the
    request field the key's description in the Service Authorization Reference names ("... associated with the
    resource in the request", https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html).
    A field the request lacks leaves its key out of the context."""
    if action == "sagemaker:CreateTrainingJob":
        resources, network, vpc = request.get("ResourceConfig", {}), request, request.get("VpcConfig")
        output_key = _dig(request, "OutputDataConfig", "KmsKeyId")
        instance_types = [resources.get("InstanceType")] + [
            g["InstanceType"] for g in resources.get("InstanceGroups", [])
        ]
    elif action == "sagemaker:CreateProcessingJob":
        resources = _dig(request, "ProcessingResources", "ClusterConfig") or {}
        network = request.get("NetworkConfig", {})
        vpc = network.get("VpcConfig")
        output_key = _dig(request, "ProcessingOutputConfig", "KmsKeyId")
        instance_types = [resources.get("InstanceType")]
    else:
        raise ValueError(f"{action}: not a job request this module models")
    context: Context = {
        "sagemaker:InstanceTypes": [t for t in instance_types if t],
        "sagemaker:NetworkIsolation": network.get("EnableNetworkIsolation"),
        "sagemaker:VpcSubnets": (vpc or {}).get("Subnets"),
        "sagemaker:VpcSecurityGroupIds": (vpc or {}).get("SecurityGroupIds"),
        "sagemaker:VolumeKmsKey": resources.get("VolumeKmsKeyId"),
        "sagemaker:OutputKmsKey": output_key,
    }
    return {key: value for key, value in context.items() if value not in (None, [])}


# ------------------------------------------------------------------ the synthesized statements and requests


def role_statements(templates: Templates, which: str, role_prefix: str) -> list[dict[str, Any]]:
    """The statements of the role whose logical id starts with `role_prefix`, with concrete values."""
    template = templates[which]
    [role_id] = [k for k in resources_of_type(template, "AWS::IAM::Role") if k.startswith(role_prefix)]
    stacks = Stacks(templates)
    return [
        stacks.concrete(statement, template)
        for policy in resources_of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def resolved_definition(templates: Templates) -> dict[str, Any]:
    """The definition as CloudFormation's Fn::Sub gives it to SageMaker (deploy-time values concrete)."""
    template = templates["pipeline"]
    text, variables = synthesized_definition(template)
    return json.loads(Stacks(templates).concrete({"Fn::Sub": [text, variables]}, template))


def with_parameters(node: Any, values: dict[str, Any]) -> Any:
    """`node` with every {"Get": "Parameters.<name>"} replaced by the execution's value of that parameter."""
    if isinstance(node, dict):
        get = node.get("Get")
        if len(node) == 1 and isinstance(get, str) and get.startswith("Parameters."):
            return values[get.removeprefix("Parameters.")]
        return {key: with_parameters(value, values) for key, value in node.items()}
    if isinstance(node, list):
        return [with_parameters(value, values) for value in node]
    return node


def defaults(definition: dict[str, Any]) -> dict[str, Any]:
    return {parameter["Name"]: parameter.get("DefaultValue") for parameter in definition["Parameters"]}


def job_request(definition: dict[str, Any], step: str, **parameters: Any) -> dict[str, Any]:
    """The Create*Job request of `step` in an execution started with `parameters` (the rest at their defaults)."""
    return with_parameters(find_step(definition, step)["Arguments"], {**defaults(definition), **parameters})


def may_create(statements: list[dict[str, Any]], step: str, request: dict[str, Any]) -> bool:
    action = JOB_ACTIONS[step]
    return allowed(statements, action, JOB_ARNS[step], job_request_context(action, request))
