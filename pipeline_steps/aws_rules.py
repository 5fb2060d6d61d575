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
- Every literal string of a job or registration step's Arguments has at most its botocore shape's `max`
  characters, every list and map at most its `max` items: botocore's ParamValidator checks `min` only. E.g.
  `ContainerArguments`, at most 100 items of at most 256 characters
  (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_AppSpecification.html), and
  `ModelPackageDescription`, at most 1,024 characters, built from `model.base_model`
  (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModelPackage.html). Values that only
  exist at run time (parameters, step outputs) are ClaimManifest's to check (training_code/qa/parameter_rules.py).
- A Fail step's ErrorMessage can hold at most 3,072 characters (FailStepMetadata:
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_FailStepMetadata.html), counting each run-time
  value in it at its maximum, 1,024 (API_Parameter, API_OutputParameter).
- A training job's `ResourceConfig.KeepAlivePeriodInSeconds` (a warm pool) is within its botocore shape's range
  (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceConfig.html; botocore checks only the
  minimum; its model says 0-21600 where the warm pools guide still says at most 3600, which
  training.keep_alive_seconds keeps to), and never with `EnableManagedSpotTraining`: warm pools cannot be used
  with spot instances (https://docs.aws.amazon.com/sagemaker/latest/dg/train-warm-pools.html, "Considerations").
- A registration's `ModelPackageGroupName` (`<prefix>-<task RESOURCE_NAME>-models`) matches
  `^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`, 1-63 characters (botocore checks neither pattern nor maximum):
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModelPackageGroup.html
- An instance type given by a pipeline parameter lists its `EnumValues` (else an execution may pick a type
  that no rule saw), and each parameter's default is one of them:
  https://docs.aws.amazon.com/sagemaker/latest/dg/build-and-manage-parameters.html
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
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


# API_CreateModelPackageGroup's ModelPackageGroupName (which also bounds it to 63 characters).
MODEL_PACKAGE_GROUP_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


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


# The API each job or registration step calls with its Arguments.
STEP_OPERATIONS = {
    "Training": "CreateTrainingJob",
    "Processing": "CreateProcessingJob",
    "RegisterModel": "CreateModelPackage",
}


def _over_limits(value: Any, shape: Any, path: str) -> Iterator[str]:
    """Where a literal value holds more than its botocore shape's `max` (characters of a string, items of a list,
    entries of a map); expressions, resolved only at run time, are skipped."""
    if is_expression(value):
        return
    most = shape.metadata.get("max")
    if shape.type_name == "string" and isinstance(value, str):
        if most is not None and len(value) > most:
            yield f"{path} is {len(value)} characters; AWS allows {most} ({shape.name})"
    elif shape.type_name == "structure" and isinstance(value, dict):
        for key, member in value.items():
            if key in shape.members:
                yield from _over_limits(member, shape.members[key], f"{path}.{key}" if path else key)
    elif shape.type_name in ("list", "map") and isinstance(value, list | dict):
        if most is not None and len(value) > most:
            yield f"{path} has {len(value)} {'items' if shape.type_name == 'list' else 'entries'}; AWS allows {most}"
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield from _over_limits(item, shape.member, f"{path}[{index}]")
        else:
            for key, item in value.items():
                yield from _over_limits(key, shape.key, f"{path} key {key[:20]!r}")
                yield from _over_limits(item, shape.value, f"{path}[{key!r}]")


def _limit_problems(step: dict[str, Any]) -> list[str]:
    operation = STEP_OPERATIONS.get(step["Type"])
    if operation is None:
        return []
    shape = _sagemaker_model().operation_model(operation).input_shape
    return [f"step {step['Name']}: {problem}" for problem in _over_limits(step["Arguments"], shape, "")]


@functools.cache
def _run_time_value_max() -> int:
    """The most characters a run-time value holds: a parameter value (API_Parameter) or a step's output
    (API_OutputParameter), both 1,024 in botocore's SageMaker model; a metric value is a number."""
    model = _sagemaker_model()
    return max(model.shape_for(name).members["Value"].metadata["max"] for name in ("Parameter", "OutputParameter"))


def _most_characters(value: Any) -> int:
    """The most characters `value` can hold at run time: a literal its own, a Std:Join its parts and separators,
    any other expression a run-time value's maximum."""
    if isinstance(value, dict) and "Std:Join" in value:
        join = value["Std:Join"]
        parts = join["Values"]
        return sum(_most_characters(part) for part in parts) + len(join["On"]) * max(len(parts) - 1, 0)
    return _run_time_value_max() if is_expression(value) else len(str(value))


def _fail_message_problems(step: dict[str, Any]) -> list[str]:
    if step["Type"] != "Fail":
        return []
    most = _sagemaker_model().shape_for("FailStepMetadata").members["ErrorMessage"].metadata["max"]
    length = _most_characters(step["Arguments"].get("ErrorMessage", ""))
    if length <= most:
        return []
    return [f"step {step['Name']}: ErrorMessage can reach {length} characters; AWS allows {most} (FailStepMetadata)"]


def _warm_pool_problems(step: dict[str, Any]) -> list[str]:
    if step["Type"] != "Training":
        return []
    arguments = step["Arguments"]
    keep_alive = _get(arguments, "ResourceConfig.KeepAlivePeriodInSeconds")
    if keep_alive is None or is_expression(keep_alive):
        return []
    most = _sagemaker_model().shape_for("KeepAlivePeriodInSeconds").metadata["max"]
    problems = []
    if not 0 <= keep_alive <= most:
        problems.append(
            f"step {step['Name']}: ResourceConfig.KeepAlivePeriodInSeconds is {keep_alive}; AWS allows 0-{most}"
        )
    if keep_alive and arguments.get("EnableManagedSpotTraining") is True:
        problems.append(
            f"step {step['Name']}: ResourceConfig.KeepAlivePeriodInSeconds ({keep_alive}) with "
            "EnableManagedSpotTraining: warm pools cannot be used with spot instances "
            "(https://docs.aws.amazon.com/sagemaker/latest/dg/train-warm-pools.html)"
        )
    return problems


def _model_package_group_problems(step: dict[str, Any]) -> list[str]:
    if step["Type"] != "RegisterModel":
        return []
    group = step["Arguments"].get("ModelPackageGroupName")
    if group is None or is_expression(group) or MODEL_PACKAGE_GROUP_NAME.fullmatch(group):
        return []
    return [
        f"step {step['Name']}: ModelPackageGroupName {group!r} is not 1-63 letters, digits and inner hyphens "
        "(API_CreateModelPackageGroup); shorten name_prefix"
    ]


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
        problems += _limit_problems(step)
        problems += _fail_message_problems(step)
        problems += _warm_pool_problems(step)
        problems += _model_package_group_problems(step)
    return problems


def check_definition(definition: dict[str, Any]) -> None:
    """Raise AwsRuleViolation listing every broken rule."""
    problems = violations(definition)
    if problems:
        raise AwsRuleViolation("the pipeline definition breaks AWS rules:\n  - " + "\n  - ".join(problems))
