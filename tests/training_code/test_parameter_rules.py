"""qa/parameter_rules.py, the one home of the start-parameter rules (ClaimManifest and `make start` / `make retry`),
at each AWS limit: the longest allowed value passes, one character more is refused before any instance starts."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import botocore.session
import pytest
from qa.cost import BERT_LARGE, ModelShape
from qa.memory import largest_batch
from qa.parameter_rules import (
    BUCKET_NAME_MAX_LENGTH,
    CONTROL_PARAMETERS,
    METADATA_VALUE_MAX_LENGTH,
    METADATA_VALUE_SYMBOLS,
    RUN_PARAMETERS,
    S3_KEY_MAX_BYTES,
    data_key_problem,
    execution_limit_error,
    parameter_error,
)

from tests.training_code.claim_inputs import CONTROLS

MODELS = "s3://artifacts/base-models/"
DEFAULT_MODEL = f"{MODELS}bert-large-uncased-whole-word-masking/"
BOUNDS: dict[str, Any] = {
    "MaxInstanceCount": 8,
    "MinF1Threshold": 0.0,
    "MaxEpochs": 10.0,
    "MaxLearningRate": 1e-3,
    "MaxTrainingCostUSD": 200.0,
    "MaxExecutionsPerDay": 10,
    "MaxConcurrentExecutions": 2,
    "GpuMemoryGiB": {"ml.p4d.24xlarge": 40, "ml.g5.2xlarge": 24},
    "ModelShape": asdict(ModelShape.from_config(BERT_LARGE)),
    "ShapeModelUri": DEFAULT_MODEL,
    "ActivationBytes": 2,
}
# An S3 version id as S3's pages show one.
S3_VERSION_ID = "3sL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY+MTRCxf3vjVBH40Nr8X8gdRQBpUMLUo"


def start_event(**values: object) -> dict[str, object]:
    """A claim event (the claim step's inputs) whose parameters are all usable, with `values` replaced."""
    return {
        "DatasetBucket": "datasets",
        "ManifestKey": "datasets/squad/v1/manifest.json",
        "ManifestVersionId": S3_VERSION_ID,
        "Epochs": 2.0,
        "LearningRate": 3e-5,
        "TrainingInstanceCount": 1,
        "F1Threshold": 80.0,
        "MaxTrainingCostUSD": 100.0,
        "Bounds": json.dumps(BOUNDS),
        "BaseModelUri": DEFAULT_MODEL,
        "BaseModelsUri": MODELS,
        "UploadedBy": "111122223333",
        **CONTROLS,
        **values,
    }


def sagemaker_shape(name: str):
    return botocore.session.get_session().get_service_model("sagemaker").shape_for(name)


def test_a_usable_start_passes():
    assert parameter_error(start_event()) == ""


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"Epochs": "0"}, "Parameter Epochs='0' must be > 0 and at most"),
        ({"F1Threshold": "150"}, "Parameter F1Threshold='150' must be between 0 and 100."),
        ({"TrainingInstanceCount": "100"}, "TrainingInstanceCount='100' must be between 1 and 8"),
        ({"BaseModelUri": "s3://nope/x/"}, f"Parameter BaseModelUri='s3://nope/x/' must be a folder under {MODELS}"),
        ({"BaseModelUri": MODELS}, "Parameter BaseModelUri="),
        ({"BaseModelUri": "s3://artifacts/base-models-other/m/"}, "must be a folder under"),
    ],
)
def test_the_values_make_start_sent_are_refused_naming_the_parameter_and_the_range(values, says):
    """The values issue 29 saw `make start` send, which the pipeline's first step then rejected."""
    assert says in parameter_error(start_event(**values))


def test_every_parameter_an_upload_may_carry_is_bounded_by_the_claim():
    """RUN_PARAMETERS (make upload-dataset PARAMS=) are exactly those parameter_error refuses a bad value of; the
    dataset's own parameters, which the upload sets, are not among them."""
    for name in RUN_PARAMETERS:
        bad = "s3://artifacts/registry/m/" if name == "BaseModelUri" else "-1e9"
        assert parameter_error(start_event(**{name: bad})).startswith(f"Parameter {name}="), name
    assert not {"DatasetBucket", "ManifestKey", "ManifestVersionId", "UploadedBy"} & set(RUN_PARAMETERS)


def test_the_manifest_version_id_is_refused_past_the_metadata_and_container_argument_limits():
    """ManifestVersionId becomes a CustomerMetadataProperties value (1-256 characters of letters, separators,
    numbers and _.:/=+-@: API_CreateModelPackage, https://docs.aws.amazon.com/sagemaker/latest/APIReference/
    API_CreateModelPackage.html) and a ContainerArguments item (at most 256: API_AppSpecification). S3 version
    ids may be up to 1,024 bytes, so RegisterModel could fail after FineTune was billed."""
    value = sagemaker_shape("CustomerMetadataValue")
    assert value.metadata["max"] == METADATA_VALUE_MAX_LENGTH == sagemaker_shape("ContainerArgument").metadata["max"]
    # The character class the rule implements (Unicode categories L, Z, N and these symbols).
    assert value.metadata["pattern"] == "([\\p{L}\\p{Z}\\p{N}_.:\\/=+\\-@]*)${1,256}"
    assert METADATA_VALUE_SYMBOLS == "_.:/=+-@"
    longest = "a" * (METADATA_VALUE_MAX_LENGTH - len(METADATA_VALUE_SYMBOLS) - 1) + " " + METADATA_VALUE_SYMBOLS
    assert len(longest) == METADATA_VALUE_MAX_LENGTH
    assert parameter_error(start_event(ManifestVersionId=longest)) == ""
    assert "has 257 characters: at most 256" in parameter_error(start_event(ManifestVersionId=longest + "a"))
    assert "contains '~'" in parameter_error(start_event(ManifestVersionId="abc~def"))


def test_the_dataset_bucket_is_an_s3_bucket_name():
    """It is recorded as a CustomerMetadataProperties value; a bucket name has 3-63 characters
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html)."""
    longest = "b" * BUCKET_NAME_MAX_LENGTH
    assert parameter_error(start_event(DatasetBucket=longest)) == ""
    assert "must be 3 to 63 lowercase" in parameter_error(start_event(DatasetBucket=longest + "b"))
    assert "must start and end" in parameter_error(start_event(DatasetBucket="-datasets"))


def test_every_message_fits_a_lambda_step_output():
    """Each message is ClaimManifest's ParameterError output: at most 1,024 characters (API_OutputParameter:
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_OutputParameter.html), whatever the values, which
    may each be 1,024 characters long (API_Parameter Value)."""
    most = sagemaker_shape("OutputParameter").members["Value"].metadata["max"]
    assert sagemaker_shape("Parameter").members["Value"].metadata["max"] == most
    huge = "9" * (most - 1) + "x"
    for name in ("Epochs", "LearningRate", "TrainingInstanceCount", "F1Threshold", "MaxTrainingCostUSD"):
        assert 0 < len(parameter_error(start_event(**{name: huge}))) <= most
    for name in ("DatasetBucket", "ManifestVersionId", "BaseModelUri"):
        assert 0 < len(parameter_error(start_event(**{name: "~" * most}))) <= most
    for name in CONTROL_PARAMETERS:
        assert 0 < len(parameter_error(start_event(**{name: huge}))) <= most


def test_a_data_key_and_its_pinned_copy_must_fit_an_s3_key_in_bytes():
    """S3 object keys: at most 1,024 bytes of UTF-8 (https://docs.aws.amazon.com/AmazonS3/latest/userguide/
    object-keys.html); the pinned copy adds inputs/<64-hex digest>/ (72 bytes), a character may take 2 bytes."""
    assert S3_KEY_MAX_BYTES == 1024
    longest = "train/" + "x" * (S3_KEY_MAX_BYTES - 72 - len("train/"))
    assert data_key_problem(f"datasets/a/v1/{longest}", "inputs", longest) == ""
    assert "would have 1025 bytes" in data_key_problem(f"datasets/a/v1/{longest}y", "inputs", longest + "y")
    assert "would have 1025 bytes" in data_key_problem(f"datasets/a/v1/{longest[:-1]}é", "inputs", longest[:-1] + "é")
    uploaded = "datasets/" + "n" * 100 + "/" + "v" * 100 + "/" + longest  # longer where it was uploaded
    assert f"would have {len(uploaded)} bytes" in data_key_problem(uploaded, "inputs", longest)


@pytest.mark.parametrize(
    ("name", "highest", "above", "lowest_refused", "setting"),
    [
        ("Epochs", BOUNDS["MaxEpochs"], 10.000001, 0, "limits.max_epochs"),
        ("LearningRate", BOUNDS["MaxLearningRate"], 0.0010001, 0, "limits.max_learning_rate"),
        ("TrainingInstanceCount", BOUNDS["MaxInstanceCount"], 9, 0, "training.max_instance_count"),
        ("MaxTrainingCostUSD", BOUNDS["MaxTrainingCostUSD"], 200.01, -0.01, "limits.max_training_cost_usd"),
        ("F1Threshold", 100, 100.01, -0.01, None),
    ],
)
def test_each_numeric_parameter_passes_at_its_bound_and_is_refused_past_it(
    name, highest, above, lowest_refused, setting
):
    """Issue 30, attack 7: every numeric parameter has an upper bound from the settings (the claim's Bounds)."""
    assert parameter_error(start_event(**{name: highest})) == ""
    for value in (above, lowest_refused):
        problem = parameter_error(start_event(**{name: value}))
        assert problem.startswith(f"Parameter {name}={value!r} must be "), problem
        assert setting is None or f"({setting}" in problem
    assert parameter_error(start_event(**{name: 1e12})) != ""


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"MaxSeqLength": 31}, "Parameter MaxSeqLength=31 must be between 32 and 512 (the base model's max_position"),
        ({"MaxSeqLength": 513}, "Parameter MaxSeqLength=513 must be between 32 and 512 (the base model's max_position"),
        ({"MaxSeqLength": "long"}, "Parameter MaxSeqLength='long' is not an integer."),
        ({"DocStride": 192}, "Parameter DocStride=192 must be between 1 and 191 (below half of MaxSeqLength)."),
        ({"DocStride": 0}, "Parameter DocStride=0 must be between 1 and 191"),
        ({"MaxSeqLength": 256, "DocStride": 128}, "Parameter DocStride=128 must be between 1 and 127"),
        ({"WarmupRatio": "0.51"}, "Parameter WarmupRatio='0.51' must be 'auto' or between 0 and 0.5."),
        ({"WarmupRatio": "-0.1"}, "Parameter WarmupRatio='-0.1' must be 'auto' or between 0 and 0.5."),
        ({"WarmupRatio": "some"}, "Parameter WarmupRatio='some' must be 'auto' or between 0 and 0.5."),
        ({"EvaluationStrategy": "daily"}, "Parameter EvaluationStrategy='daily' must be one of no, steps, epoch."),
        ({"EvaluationSteps": 0}, "Parameter EvaluationSteps=0 must be at least 1."),
        ({"EarlyStoppingPatience": -1}, "Parameter EarlyStoppingPatience=-1 must be at least 0."),
        ({"EarlyStoppingPatience": 2}, "Parameter EarlyStoppingPatience=2 needs evaluations during training: set"),
        ({"PerDeviceTrainBatchSize": "0"}, "Parameter PerDeviceTrainBatchSize='0' must be 'auto' or an integer of"),
        ({"PerDeviceTrainBatchSize": "big"}, "Parameter PerDeviceTrainBatchSize='big' must be 'auto' or an integer"),
    ],
)
def test_the_per_run_controls_are_refused_with_one_line_naming_the_parameter_value_and_rule(values, says):
    problem = parameter_error(start_event(**values))
    assert problem.startswith(says) and "\n" not in problem, problem


def test_the_per_run_controls_pass_within_their_rules():
    usable = {"WarmupRatio": "0.5", "EvaluationStrategy": "steps", "EvaluationSteps": 1, "EarlyStoppingPatience": 3}
    assert parameter_error(start_event(**usable, MaxSeqLength=512, DocStride=255, PerDeviceTrainBatchSize="8")) == ""
    # Another model's shape is not known here: only the generic limit applies, FineTune checks its config.
    assert parameter_error(start_event(BaseModelUri=f"{MODELS}mine/", MaxSeqLength=4096, DocStride=2047)) == ""
    assert "between 32 and 4096." in parameter_error(start_event(BaseModelUri=f"{MODELS}mine/", MaxSeqLength=4097))


@pytest.mark.parametrize(("instance_type", "memory"), [("ml.p4d.24xlarge", 40), ("ml.g5.2xlarge", 24)])
def test_an_explicit_batch_must_fit_the_gpu_memory_model_of_the_runs_instance_type(instance_type, memory):
    """qa/memory.py for BERT-large at MaxSeqLength: the largest batch that fits passes, one more is refused naming
    it; a longer MaxSeqLength fits fewer. Another model (shape unknown offline) is left to FineTune's check."""
    model = ModelShape.from_config(BERT_LARGE)
    fits = largest_batch(model, memory, 384)
    assert fits >= 1 and largest_batch(model, memory, 512) < fits
    run = {"TrainingInstanceType": instance_type}
    assert parameter_error(start_event(**run, PerDeviceTrainBatchSize=str(fits))) == ""
    problem = parameter_error(start_event(**run, PerDeviceTrainBatchSize=str(fits + 1)))
    assert problem.startswith(f"Parameter PerDeviceTrainBatchSize={fits + 1} on {instance_type}: "), problem
    assert problem.endswith(f"the largest that fits is {fits}."), problem
    assert "the largest that fits" in parameter_error(
        start_event(**run, MaxSeqLength=512, PerDeviceTrainBatchSize=str(fits))
    )
    assert parameter_error(start_event(**run, BaseModelUri=f"{MODELS}mine/", PerDeviceTrainBatchSize="4096")) == ""


DAY = 24 * 3600


def test_the_nth_execution_of_the_day_starts_and_the_next_is_refused():
    """limits.max_executions_per_day: the executions started in the 24 hours before this one, whatever they did."""
    start = 1_000_000.0
    limit = int(BOUNDS["MaxExecutionsPerDay"])
    earlier = [(start - DAY + 1 + n, "Succeeded") for n in range(limit - 1)] + [(start - DAY, "Failed")]
    assert execution_limit_error(json.dumps(BOUNDS), start, earlier) == ""  # one exactly 24 h before: outside
    refused = execution_limit_error(json.dumps(BOUNDS), start, [*earlier, (start, "Succeeded")])
    assert refused.startswith(f"{limit} executions of this pipeline started in the 24 hours before this one")
    assert "limits.max_executions_per_day" in refused


def test_executions_at_once_count_the_running_ones_only():
    start, limit = 1_000_000.0, int(BOUNDS["MaxConcurrentExecutions"])
    running = [(start - 30 * DAY + n, "Executing") for n in range(limit - 1)]
    ended = [(start - 60, status) for status in ("Succeeded", "Failed", "Stopped", "CompletedWithFailures")]
    assert execution_limit_error(BOUNDS, start, running + ended) == ""
    refused = execution_limit_error(BOUNDS, start, [*running, (start - 1, "Stopping")])
    assert refused.startswith(f"{limit} earlier executions of this pipeline are still running")
    assert "limits.max_concurrent_executions" in refused


def test_every_execution_limit_message_fits_a_lambda_step_output():
    most = sagemaker_shape("OutputParameter").members["Value"].metadata["max"]
    huge = {**BOUNDS, "MaxExecutionsPerDay": 10**12, "MaxConcurrentExecutions": 10**12}
    for earlier in ([(0.0, "Succeeded")] * 11, [(0.0, "Executing")] * 3):
        assert 0 < len(execution_limit_error(BOUNDS, 1.0, earlier)) <= most
    assert execution_limit_error(huge, 1.0, [(0.0, "Executing")] * 3) == ""
