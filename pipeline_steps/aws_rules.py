"""Rules AWS enforces on a pipeline definition that its API shapes do not encode.

botocore's ParamValidator checks types and required members, not enum values or rules across fields and
instance types. `check_definition` runs on every definition the builder produces, for every instance type a
step can run on (each `EnumValues` entry when the type is a pipeline parameter). Each rule and its page:
- An instance type is in the enum of its job (training, processing, real-time inference, transform):
  botocore's SageMaker model, shapes `TrainingInstanceType`, `ProcessingInstanceType`,
  `ProductionVariantInstanceType`, `TransformInstanceType` (the API's own list of values).
- No `VolumeKmsKeyId` on a type with local NVMe storage:
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceConfig.html and
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ProcessingClusterConfig.html
- Processing: `VolumeSizeInGB` at most the local storage of such a type (API_ProcessingClusterConfig).
- Processing `ContainerEntrypoint` / `ContainerArguments`: at most 100 items of at most 256 characters each
  (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_AppSpecification.html; the limits are read
  from botocore's shapes, which its ParamValidator does not enforce).
- An instance type given by a pipeline parameter lists its `EnumValues` (else an execution may pick a type
  that no rule saw), and each parameter's default is one of them:
  https://docs.aws.amazon.com/sagemaker/latest/dg/build-and-manage-parameters.html
"""

from __future__ import annotations

import functools
from typing import Any

import botocore.session

from config.instance_types import INSTANCE_TYPES
from pipeline_steps.walk import all_steps, is_expression

# (step type, dotted path to the instance type, botocore enum, path to the volume settings)
INSTANCE_TYPE_FIELDS = (
    ("Training", "ResourceConfig.InstanceType", "TrainingInstanceType", "ResourceConfig"),
    (
        "Processing",
        "ProcessingResources.ClusterConfig.InstanceType",
        "ProcessingInstanceType",
        "ProcessingResources.ClusterConfig",
    ),
)
INFERENCE_INSTANCE_FIELDS = (
    ("InferenceSpecification.SupportedRealtimeInferenceInstanceTypes", "ProductionVariantInstanceType"),
    ("InferenceSpecification.SupportedTransformInstanceTypes", "TransformInstanceType"),
)


class AwsRuleViolation(ValueError):
    """A definition that AWS would reject; the message names each step, key and fix."""


@functools.cache
def _sagemaker_model() -> Any:
    """botocore's SageMaker service model, loaded once per process (a fresh session costs ~0.1 s)."""
    return botocore.session.get_session().get_service_model("sagemaker")


@functools.cache
def botocore_enum(shape_name: str) -> frozenset[str]:
    """The values of one enum shape of botocore's SageMaker model."""
    return frozenset(_sagemaker_model().shape_for(shape_name).enum)


def _get(node: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _possible_values(value: Any, parameters: dict[str, dict[str, Any]], where: str) -> tuple[list[str], list[str]]:
    """The values a field can take at run time (literal, or every EnumValues entry of a parameter) and the
    problems found on the way."""
    if not is_expression(value):
        return [value], []
    reference = value.get("Get", "")
    name = reference.removeprefix("Parameters.")
    if not reference.startswith("Parameters.") or name not in parameters:
        return [], [f"{where}: an expression other than a pipeline parameter ({value}) cannot be checked at synth"]
    enum = parameters[name].get("EnumValues")
    if not enum:
        return [], [
            f"{where}: parameter {name} is free-form, so an execution could pick an instance type that no rule "
            "checked; give it EnumValues (training.allowed_instance_types)"
        ]
    return list(enum), []


def _instance_type_problems(step: dict[str, Any], parameters: dict[str, dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    for step_type, type_path, enum_shape, volume_path in INSTANCE_TYPE_FIELDS:
        if step["Type"] != step_type:
            continue
        arguments = step["Arguments"]
        where = f"step {step['Name']}: {type_path}"
        names, found = _possible_values(_get(arguments, type_path), parameters, where)
        problems += found
        volume = _get(arguments, volume_path) or {}
        for name in names:
            if name not in botocore_enum(enum_shape):
                problems.append(f"{where}: {name} is not a valid {enum_shape} (botocore's SageMaker API model)")
                continue
            facts = INSTANCE_TYPES.get(name)
            if facts is None:
                problems.append(f"{where}: {name} has no row in config/instance_types.py, so its rules are unknown")
                continue
            if facts.has_local_storage and volume.get("VolumeKmsKeyId"):
                problems.append(
                    f"{where}: {name} has local NVMe storage, and AWS rejects {volume_path}.VolumeKmsKeyId on such "
                    "types (API_ResourceConfig / API_ProcessingClusterConfig); omit the key"
                )
            size = volume.get("VolumeSizeInGB")
            if (
                step_type == "Processing"
                and facts.has_local_storage
                and isinstance(size, int)
                and size > facts.local_nvme_gb
            ):
                problems.append(
                    f"{where}: {volume_path}.VolumeSizeInGB={size} exceeds the {facts.local_nvme_gb} GB of local "
                    f"storage of {name}, which AWS rejects (API_ProcessingClusterConfig)"
                )
    return problems


def _inference_instance_problems(step: dict[str, Any]) -> list[str]:
    if step["Type"] != "RegisterModel":
        return []
    problems = []
    for path, enum_shape in INFERENCE_INSTANCE_FIELDS:
        for name in _get(step["Arguments"], path) or []:
            if name not in botocore_enum(enum_shape):
                problems.append(f"step {step['Name']}: {path}: {name} is not a valid {enum_shape}")
    return problems


@functools.cache
def _shape_limits(shape_name: str) -> tuple[int, int]:
    """(most items, most characters per item) of a list-of-strings shape of botocore's SageMaker model."""
    shape = _sagemaker_model().shape_for(shape_name)
    return shape.metadata["max"], shape.member.metadata["max"]


def _container_argument_problems(step: dict[str, Any]) -> list[str]:
    if step["Type"] != "Processing":
        return []
    problems = []
    for field in ("ContainerEntrypoint", "ContainerArguments"):
        values = _get(step["Arguments"], f"AppSpecification.{field}") or []
        most_items, most_chars = _shape_limits(field)
        if len(values) > most_items:
            problems.append(f"step {step['Name']}: {field} has {len(values)} items; AWS allows {most_items}")
        problems += [
            f"step {step['Name']}: {field}[{index}] is {len(value)} characters; AWS allows {most_chars} "
            "(API_AppSpecification)"
            for index, value in enumerate(values)
            if isinstance(value, str) and len(value) > most_chars
        ]
    return problems


def _parameter_problems(parameters: dict[str, dict[str, Any]]) -> list[str]:
    return [
        f"parameter {name}: default {spec['DefaultValue']!r} is not one of its EnumValues {spec['EnumValues']}"
        for name, spec in parameters.items()
        if spec.get("EnumValues") and "DefaultValue" in spec and spec["DefaultValue"] not in spec["EnumValues"]
    ]


def violations(definition: dict[str, Any]) -> list[str]:
    """Every rule above that `definition` breaks, as one line each (empty: none)."""
    parameters = {spec["Name"]: spec for spec in definition.get("Parameters", [])}
    problems = _parameter_problems(parameters)
    for step in all_steps(definition["Steps"]):
        problems += _instance_type_problems(step, parameters)
        problems += _inference_instance_problems(step)
        problems += _container_argument_problems(step)
    return problems


def check_definition(definition: dict[str, Any]) -> None:
    """Raise AwsRuleViolation listing every broken rule."""
    problems = violations(definition)
    if problems:
        raise AwsRuleViolation("the pipeline definition breaks AWS rules:\n  - " + "\n  - ".join(problems))
