"""The rules an execution's parameters must meet before anything is billed, in one home for the two places that
check them: ClaimManifest, the pipeline's first step (pipeline_functions.claim_handler, no instance), and
`make start` / `make retry` (tools/executions.py), which refuse the same values before StartPipelineExecution.

`parameter_error(event)` takes the claim step's event: its Lambda inputs (qa/outputs.py names them), which
the tools rebuild from the deployed definition. Each problem is one line naming the parameter, its value (at most
ECHO_PREFIX characters of it) and the rule: the line becomes the claim step's ParameterError output, and a Lambda
step output value holds at most 1,024 characters (OutputParameter Value:
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_OutputParameter.html).

Standard library only: the Lambda runtime loads it as it is (stacks/functions.py FUNCTION_FILES).
"""

from __future__ import annotations

import json
import math
import unicodedata
from typing import Any

from qa.outputs import (
    BASE_MODEL_URI,
    BOUND_MAX_INSTANCE_COUNT,
    BOUND_MIN_F1_THRESHOLD,
    DATASET_BUCKET,
    EPOCHS,
    F1_THRESHOLD,
    INPUT_BASE_MODELS_URI,
    INPUT_BOUNDS,
    LEARNING_RATE,
    MANIFEST_VERSION_ID,
    MANIFEST_VERSION_UNSET,
    MAX_TRAINING_COST,
    TRAINING_INSTANCE_COUNT,
    UPLOADED_BY,
)

ECHO_PREFIX = 20  # characters of a bad value echoed back in an error
# CustomerMetadataProperties values (RegisterModel records ManifestVersionId and DatasetBucket there): 1-256
# characters of letters, separators, numbers and `_.:/=+-@` (API_CreateModelPackage, botocore's shape
# CustomerMetadataValue: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModelPackage.html).
# ManifestVersionId is also one ContainerArguments item of ValidateAndTokenize, at most 256 characters
# (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_AppSpecification.html).
METADATA_VALUE_MAX_LENGTH = 256
METADATA_VALUE_CATEGORIES = ("L", "Z", "N")  # \p{L}, \p{Z}, \p{N}: Unicode general categories
METADATA_VALUE_SYMBOLS = "_.:/=+-@"
# S3 bucket names: 3-63 characters of lowercase letters, digits, '.' and '-', starting and ending with a letter or
# a digit (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
BUCKET_NAME_MAX_LENGTH = 63
BUCKET_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")
# An S3 object key holds at most 1,024 bytes of UTF-8, its prefixes included
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html). ClaimManifest copies each dataset file
# to <inputs prefix>/<claim digest>/<its key below the manifest's folder>, the digest a SHA-256 in hex.
S3_KEY_MAX_BYTES = 1024
CLAIM_DIGEST_CHARACTERS = 64


def short(value: str) -> str:
    """`value` for an error message: at most ECHO_PREFIX characters, quoted."""
    return repr(value[:ECHO_PREFIX]) + ("..." if len(value) > ECHO_PREFIX else "")


def shown(value: object) -> str:
    """A parameter value as a message quotes it: text shortened, a number as it is (a number's repr is short)."""
    return short(value) if isinstance(value, str) else repr(value)


def metadata_value_problem(value: str) -> str:
    """ "" when `value` is a valid CustomerMetadataProperties value, else the rule it breaks."""
    if not 1 <= len(value) <= METADATA_VALUE_MAX_LENGTH:
        return f"has {len(value)} characters: at most {METADATA_VALUE_MAX_LENGTH} are allowed"
    allowed = (c in METADATA_VALUE_SYMBOLS or unicodedata.category(c)[0] in METADATA_VALUE_CATEGORIES for c in value)
    bad = next((c for c, ok in zip(value, allowed, strict=True) if not ok), None)
    return f"contains {bad!r}: only letters, numbers, spaces and {METADATA_VALUE_SYMBOLS} are allowed" if bad else ""


def bucket_name_problem(name: str) -> str:
    """ "" when `name` is a valid S3 bucket name, else the rule it breaks."""
    if not 3 <= len(name) <= BUCKET_NAME_MAX_LENGTH or not set(name) <= BUCKET_NAME_CHARACTERS:
        return f"must be 3 to {BUCKET_NAME_MAX_LENGTH} lowercase letters, digits, '.' or '-' (an S3 bucket name)"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "must start and end with a letter or a digit (an S3 bucket name)"
    return ""


def data_key_problem(key: str, inputs_prefix: str, relative: str) -> str:
    """ "" when a dataset file's key (`key`, ending in `relative`, its key below the manifest's folder) and the key
    of its pinned copy both fit S3's key limit, else one line naming the file and the fix."""
    pinned = f"{inputs_prefix.strip('/')}/{'0' * CLAIM_DIGEST_CHARACTERS}/{relative}"
    size = max(len(key.encode()), len(pinned.encode()))
    if size <= S3_KEY_MAX_BYTES:
        return ""
    return (
        f"{short(relative)}: its S3 key would have {size} bytes (at {key.removesuffix(relative)} or in the pinned "
        f"copy {inputs_prefix.strip('/')}/<claim digest>/); S3 allows {S3_KEY_MAX_BYTES}: shorten its path"
    )


def json_input(value: Any) -> Any:
    """A structured input: the definition passes it as JSON text (Lambda step inputs are flat values)."""
    return json.loads(value) if isinstance(value, str) else value


def _number(event: dict[str, Any], name: str, kind: type) -> tuple[float | None, str]:
    raw = event.get(name)
    try:
        value = kind(float(raw)) if kind is int and float(raw).is_integer() else kind(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None, f"{name}={shown(raw)} is not {'an integer' if kind is int else 'a number'}"
    if isinstance(value, float) and not math.isfinite(value):
        return None, f"{name}={shown(raw)} is not a finite number"
    return value, ""


def _number_error(event: dict[str, Any]) -> str:
    bounds = json_input(event[INPUT_BOUNDS])
    rules: list[tuple[str, type, Any, str]] = [
        (EPOCHS, float, lambda v: v > 0, "must be > 0"),
        (LEARNING_RATE, float, lambda v: v > 0, "must be > 0"),
        (
            TRAINING_INSTANCE_COUNT,
            int,
            lambda v: 1 <= v <= bounds[BOUND_MAX_INSTANCE_COUNT],
            f"must be between 1 and {bounds[BOUND_MAX_INSTANCE_COUNT]} (training.max_instance_count)",
        ),
        (
            F1_THRESHOLD,
            float,
            lambda v: bounds[BOUND_MIN_F1_THRESHOLD] <= v <= 100,
            f"must be between {bounds[BOUND_MIN_F1_THRESHOLD]:g} and 100",
        ),
        (MAX_TRAINING_COST, float, lambda v: v >= 0, "must be >= 0"),
    ]
    for name, kind, valid, rule in rules:
        value, problem = _number(event, name, kind)
        if problem:
            return f"Parameter {problem}."
        if not valid(value):
            return f"Parameter {name}={shown(event[name])} {rule}."
    return ""


def _location_error(event: dict[str, Any]) -> str:
    bucket = str(event.get(DATASET_BUCKET, ""))
    problem = bucket_name_problem(bucket)
    if problem:
        return f"Parameter {DATASET_BUCKET}={short(bucket)} {problem}."
    version = event.get(MANIFEST_VERSION_ID)
    if version in (None, "", MANIFEST_VERSION_UNSET):
        return (
            f"Parameter {MANIFEST_VERSION_ID} is not set: pass the manifest's S3 version id "
            "(aws s3api head-object --query VersionId), or start runs by uploading the manifest."
        )
    problem = metadata_value_problem(str(version))
    if problem:
        return f"Parameter {MANIFEST_VERSION_ID}={short(str(version))} {problem} (the model registry records it)."
    uploader = str(event.get(UPLOADED_BY, ""))
    problem = metadata_value_problem(uploader)
    if problem:
        return f"Parameter {UPLOADED_BY}={short(uploader)} {problem} (the model registry records it)."
    # The jobs' role reads base models only there (stacks/roles.py), where `make stage-model` stages them.
    models = str(event[INPUT_BASE_MODELS_URI])
    uri = str(event.get(BASE_MODEL_URI, ""))
    if not uri.startswith(models) or not uri.removeprefix(models).strip("/"):
        return (
            f"Parameter {BASE_MODEL_URI}={short(uri)} must be a folder under {models} (make stage-model stages "
            "models there, and the jobs may read only there)."
        )
    return ""


def parameter_error(event: dict[str, Any]) -> str:
    """ "" when the execution's parameters are usable, else one line naming the parameter, value and rule."""
    return _number_error(event) or _location_error(event)
