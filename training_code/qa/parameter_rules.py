"""The rules an execution's parameters must meet before anything is billed, in one home for the two places that
check them: ClaimManifest, the pipeline's first step (pipeline_functions.claim_handler, no instance), and
`make start` / `make retry` (tools/executions.py), which refuse the same values before StartPipelineExecution.

`parameter_error(event)` takes the claim step's event: its Lambda inputs (qa/outputs.py names them), which
the tools rebuild from the deployed definition. Each problem is one line naming the parameter, its value (at most
ECHO_PREFIX characters of it) and the rule: the line becomes the claim step's ParameterError output, and a Lambda
step output value holds at most 1,024 characters (OutputParameter Value:
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_OutputParameter.html).

`execution_limit_error(bounds, start, earlier)` applies the settings' limits on executions per day and at once:
the claim to the executions that started before its own, `make start` to those started before now.

Standard library only: the Lambda runtime loads it as it is (stacks/functions.py FUNCTION_FILES).
"""

from __future__ import annotations

import collections
import datetime
import json
import math
import unicodedata
from typing import Any

from qa.cost import ModelShape
from qa.memory import batch_fit_error
from qa.outputs import (
    AUTO,
    BASE_MODEL_URI,
    BOUND_ACTIVATION_BYTES,
    BOUND_GPU_MEMORY_GIB,
    BOUND_MAX_CONCURRENT_EXECUTIONS,
    BOUND_MAX_EPOCHS,
    BOUND_MAX_EXECUTIONS_PER_DAY,
    BOUND_MAX_INSTANCE_COUNT,
    BOUND_MAX_LEARNING_RATE,
    BOUND_MAX_TRAINING_COST,
    BOUND_MIN_F1_THRESHOLD,
    BOUND_MODEL_SHAPE,
    BOUND_SHAPE_MODEL_URI,
    DATASET_BUCKET,
    DOC_STRIDE,
    EARLY_STOPPING_PATIENCE,
    EPOCHS,
    EVALUATION_STEPS,
    EVALUATION_STRATEGIES,
    EVALUATION_STRATEGY,
    F1_THRESHOLD,
    INPUT_BASE_MODELS_URI,
    INPUT_BOUNDS,
    LEARNING_RATE,
    MANIFEST_VERSION_ID,
    MANIFEST_VERSION_UNSET,
    MAX_SEQ_LENGTH,
    MAX_TRAINING_COST,
    PER_DEVICE_TRAIN_BATCH_SIZE,
    TRAINING_INSTANCE_COUNT,
    TRAINING_INSTANCE_TYPE,
    UPLOADED_BY,
    WARMUP_RATIO,
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
# The execution limits' window, and the PipelineExecutionStatus values of an execution still running (of Executing,
# Stopping, Stopped, Failed, Succeeded and CompletedWithFailures in botocore's SageMaker model:
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_PipelineExecutionSummary.html).
DAY_SECONDS = 24 * 3600
RUNNING_STATUSES = ("Executing", "Stopping")
# How far back a still-running execution may have started: a pipeline execution times out after 672 hours
# ("Pipeline execution timeout", https://docs.aws.amazon.com/sagemaker/latest/dg/feature-store-feature-processor-quotas.html).
EXECUTION_TIMEOUT_SECONDS = 672 * 3600
# The per-run training controls (FineTune's hyperparameters), each bounded by _control_error: with the parameters of
# the numeric rules, what a run may set without touching the image, role or outputs.
CONTROL_PARAMETERS = (
    PER_DEVICE_TRAIN_BATCH_SIZE,
    MAX_SEQ_LENGTH,
    DOC_STRIDE,
    WARMUP_RATIO,
    EVALUATION_STRATEGY,
    EVALUATION_STEPS,
    EARLY_STOPPING_PATIENCE,
)
# hyperparameters.max_seq_length's range (config/settings.py), and at most the model's max_position_embeddings where
# its shape is known; DocStride below half of MaxSeqLength, as hyperparameters.doc_stride (the question and the
# windows' overlap must fit one window).
MIN_SEQ_LENGTH, MAX_SEQ_LENGTH_LIMIT = 32, 4096
# WarmupRatio: a share of the steps; the recipe's is 0.2 (qa/recipe.py). Above half, most of a run would warm up.
MAX_WARMUP_RATIO = 0.5


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


def number_rules(bounds: Any) -> list[tuple[str, type, float, bool, float, str]]:
    """The numeric parameters' rules under the deployed `bounds` (INPUT_BOUNDS): (parameter, type, lowest, whether
    the lowest is allowed, highest, the setting that holds the highest)."""
    return [
        (EPOCHS, float, 0, False, bounds[BOUND_MAX_EPOCHS], "limits.max_epochs"),
        (LEARNING_RATE, float, 0, False, bounds[BOUND_MAX_LEARNING_RATE], "limits.max_learning_rate"),
        (
            TRAINING_INSTANCE_COUNT,
            int,
            1,
            True,
            bounds[BOUND_MAX_INSTANCE_COUNT],
            "training.max_instance_count",
        ),
        (F1_THRESHOLD, float, bounds[BOUND_MIN_F1_THRESHOLD], True, 100, ""),
        (
            MAX_TRAINING_COST,
            float,
            0,
            True,
            bounds[BOUND_MAX_TRAINING_COST],
            "limits.max_training_cost_usd, or limits.max_cost_multiple x the estimate of make estimate",
        ),
    ]


def _number_error(event: dict[str, Any]) -> str:
    for name, kind, low, low_allowed, high, setting in number_rules(json_input(event[INPUT_BOUNDS])):
        value, problem = _number(event, name, kind)
        if problem:
            return f"Parameter {problem}."
        assert value is not None
        if value < low or (value == low and not low_allowed) or value > high:
            allowed = f"between {low:g} and {high:g}" if low_allowed else f"> {low:g} and at most {high:g}"
            return f"Parameter {name}={shown(event[name])} must be {allowed}{f' ({setting})' if setting else ''}."
    return ""


def _integer(event: dict[str, Any], name: str, low: int, high: float, why: str = "") -> tuple[int, str]:
    """(value, "") for an integer parameter within [low, high], else (0, the one line naming it)."""
    value, problem = _number(event, name, int)
    if problem:
        return 0, f"Parameter {problem}."
    assert value is not None
    if not low <= value <= high:
        allowed = f"at least {low}" if high == math.inf else f"between {low} and {high:g}"
        return 0, f"Parameter {name}={shown(event[name])} must be {allowed}{why}."
    return int(value), ""


def _control_error(event: dict[str, Any]) -> str:
    """The per-run training controls: sequence length and stride within the model, warm-up, evaluation cadence and
    early stopping, and an explicit per-device batch within the GPU memory model for the run's instance type."""
    bounds = json_input(event[INPUT_BOUNDS])
    shape_fields = bounds.get(BOUND_MODEL_SHAPE)
    # The shape is the default base model's: another BaseModelUri is checked by FineTune itself against its config.
    shape = (
        ModelShape(**shape_fields)
        if shape_fields and event.get(BASE_MODEL_URI) == bounds[BOUND_SHAPE_MODEL_URI]
        else None
    )
    longest = min(MAX_SEQ_LENGTH_LIMIT, shape.max_positions) if shape else MAX_SEQ_LENGTH_LIMIT
    why = " (the base model's max_position_embeddings)" if longest < MAX_SEQ_LENGTH_LIMIT else ""
    length, problem = _integer(event, MAX_SEQ_LENGTH, MIN_SEQ_LENGTH, longest, why)
    if problem:
        return problem
    _, problem = _integer(event, DOC_STRIDE, 1, length // 2 - 1, f" (below half of {MAX_SEQ_LENGTH})")
    if problem:
        return problem
    warmup = str(event.get(WARMUP_RATIO))
    if warmup != AUTO:
        value, problem = _number(event, WARMUP_RATIO, float)
        if problem or not 0 <= float(value or 0) <= MAX_WARMUP_RATIO:
            return f"Parameter {WARMUP_RATIO}={short(warmup)} must be {AUTO!r} or between 0 and {MAX_WARMUP_RATIO:g}."
    strategy = str(event.get(EVALUATION_STRATEGY))
    if strategy not in EVALUATION_STRATEGIES:
        return f"Parameter {EVALUATION_STRATEGY}={short(strategy)} must be one of {', '.join(EVALUATION_STRATEGIES)}."
    _, problem = _integer(event, EVALUATION_STEPS, 1, math.inf)
    patience, problem = (0, problem) if problem else _integer(event, EARLY_STOPPING_PATIENCE, 0, math.inf)
    if problem:
        return problem
    if patience and strategy == "no":
        return (
            f"Parameter {EARLY_STOPPING_PATIENCE}={patience} needs evaluations during training: set "
            f"{EVALUATION_STRATEGY} to steps or epoch."
        )
    return _batch_error(event, bounds, shape, length)


def _batch_error(event: dict[str, Any], bounds: dict[str, Any], shape: ModelShape | None, length: int) -> str:
    batch = str(event.get(PER_DEVICE_TRAIN_BATCH_SIZE))
    if batch == AUTO:
        return ""
    value, problem = _number(event, PER_DEVICE_TRAIN_BATCH_SIZE, int)
    if problem or int(value or 0) < 1:
        return f"Parameter {PER_DEVICE_TRAIN_BATCH_SIZE}={short(batch)} must be {AUTO!r} or an integer of at least 1."
    memory = bounds[BOUND_GPU_MEMORY_GIB].get(str(event.get(TRAINING_INSTANCE_TYPE)))
    if shape is None or memory is None:  # no model shape or GPU known offline: FineTune checks on its GPU
        return ""
    problem = batch_fit_error(shape, memory, length, int(value or 0), bounds[BOUND_ACTIVATION_BYTES])
    if problem:
        return f"Parameter {PER_DEVICE_TRAIN_BATCH_SIZE}={batch} on {event[TRAINING_INSTANCE_TYPE]}: {problem}."
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


def execution_limit_error(bounds: Any, start: float, earlier: list[tuple[float, str]]) -> str:
    """ "" when an execution that starts at `start` (epoch seconds) is within the settings' execution limits,
    given every execution of the pipeline that started before it ((start, PipelineExecutionStatus) each); else one
    line naming the limit and the fix. Every earlier execution counts (duplicates, refused ones): each started."""
    bounds = json_input(bounds)
    per_day, at_once = bounds[BOUND_MAX_EXECUTIONS_PER_DAY], bounds[BOUND_MAX_CONCURRENT_EXECUTIONS]
    today = sum(1 for started, _ in earlier if start - DAY_SECONDS < started <= start)
    if today >= per_day:
        return (
            f"{today} executions of this pipeline started in the 24 hours before this one, and "
            f"limits.max_executions_per_day allows {per_day}: start it later, or raise the limit (cdk.json) and deploy."
        )
    running = sum(1 for _, status in earlier if status in RUNNING_STATUSES)
    if running >= at_once:
        return (
            f"{running} earlier executions of this pipeline are still running, and limits.max_concurrent_executions "
            f"allows {at_once} at once: start it when one has ended, or raise the limit (cdk.json) and deploy."
        )
    return ""


def recent_executions(sagemaker: Any, pipeline: str, now: float) -> list[tuple[float, str, str]]:
    """(start, PipelineExecutionStatus, ARN) of every execution of `pipeline` (its name or ARN) created within the
    execution timeout before `now`: what the execution limits count. `sagemaker` is a boto3 SageMaker client
    (ListPipelineExecutions: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ListPipelineExecutions.html)."""
    since = datetime.datetime.fromtimestamp(now - EXECUTION_TIMEOUT_SECONDS, tz=datetime.UTC)
    pages = sagemaker.get_paginator("list_pipeline_executions").paginate(PipelineName=pipeline, CreatedAfter=since)
    return [
        (summary["StartTime"].timestamp(), str(summary["PipelineExecutionStatus"]), summary["PipelineExecutionArn"])
        for page in pages
        for summary in page["PipelineExecutionSummaries"]
    ]


# The per-run parameters whose every value parameter_error bounds: the ones an upload may carry
# (`make upload-dataset PARAMS=`, tools/upload_dataset.py). A rule added to number_rules or CONTROL_PARAMETERS joins
# them; the image, the roles and the outputs are no parameters, and BaseModelUri must lie under base-models/
# (_location_error).
RUN_PARAMETERS = (
    *(rule[0] for rule in number_rules(collections.defaultdict(float))),
    *CONTROL_PARAMETERS,
    BASE_MODEL_URI,
)


def parameter_error(event: dict[str, Any]) -> str:
    """ "" when the execution's parameters are usable, else one line naming the parameter, value and rule."""
    return _number_error(event) or _location_error(event) or _control_error(event)
