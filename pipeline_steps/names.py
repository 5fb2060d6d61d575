"""Names in the pipeline definition that other rooms match, set or quote: pipeline parameters (the trigger, the
tools, the local runner), step names (notifications, tools, the runner) and model-package metadata keys. No
SageMaker SDK here: the stacks and the tools import this on every run."""

# Pipeline parameters (parameters.py builds them; an execution or the S3 trigger sets them by these names), re-
# exported: their one home is qa/outputs.py, as the pipeline's Lambda functions, which cannot import this package,
# read them too.
from qa.outputs import (
    BASE_MODEL_URI,
    DATASET_BUCKET,
    DOC_STRIDE,
    EARLY_STOPPING_PATIENCE,
    EPOCHS,
    EVALUATION_STEPS,
    EVALUATION_STRATEGY,
    F1_THRESHOLD,
    LEARNING_RATE,
    MANIFEST_KEY,
    MANIFEST_VERSION_ID,
    MAX_SEQ_LENGTH,
    MAX_TRAINING_COST,
    MODEL_APPROVAL_STATUS,
    PER_DEVICE_TRAIN_BATCH_SIZE,
    SKIP_INVALID_RECORDS,
    TRAINING_INSTANCE_COUNT,
    TRAINING_INSTANCE_TYPE,
    UPLOADED_BY,
    WARMUP_RATIO,
)

# Steps, in the order of the graph (README "Step graph"; steps/*.py build them).
CLAIM_STEP = "ClaimManifest"
PARAMETERS_STEP = "ParametersValid"
PARAMETERS_FAIL_STEP = "InvalidParameter"
FIRST_DELIVERY_STEP = "FirstDelivery"  # its False outcome is a duplicate delivery
DATASET_VALID_STEP = "DatasetValid"  # processing.tokenize_in "fine_tune": the claim's validation of the records
DATASET_FAIL_STEP = "DatasetRejected"
PREPROCESS_STEP = "ValidateAndTokenize"
ESTIMATE_STEP = "EstimateTrainingCost"
COST_CONDITION_STEP = "CheckTrainingCost"
COST_FAIL_STEP = "TrainingCostAboveLimit"
TRAIN_STEP = "FineTune"
RECORD_STEP = "RecordModel"
F1_CONDITION_STEP = "CheckF1"
REGISTER_STEP = "RegisterModel"
F1_FAIL_STEP = "F1BelowThreshold"

# CustomerMetadataProperties keys of a registered model package (steps/register.py; string values) that the
# model-package notifications quote.
MODEL_METADATA_DATASET_BUCKET = "dataset_bucket"  # the datasets bucket of the manifest
MODEL_METADATA_DATASET_MANIFEST = "dataset_manifest"  # its key there: datasets/<name>/<version>/manifest.json
MODEL_METADATA_DATASET_MANIFEST_VERSION = "dataset_manifest_version_id"


def evaluation_key(gate_metric: str) -> str:
    """The key of the gate's score, evaluation_<the task's GATE_METRIC> (evaluation_f1 for question answering), which
    the model-package notifications quote."""
    return f"evaluation_{gate_metric}"


# The registry copy's SHA-256 and S3 version id (from RecordModel), which `make verify-model` checks the archive
# (the package's ModelDataUrl, registry/<sha256>/model.tar.gz) against, and the execution that registered it.
MODEL_METADATA_ARCHIVE_SHA256 = "model_archive_sha256"
MODEL_METADATA_ARCHIVE_VERSION_ID = "model_archive_version_id"
MODEL_METADATA_EXECUTION_ARN = "pipeline_execution_arn"
# What the gate measured (steps/register.py). Keys and values are CustomerMetadataProperties: at most 50 entries,
# keys of 1-128 and values of 1-256 characters of letters, numbers, spaces and `_.:/=+-@`
# (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModelPackage.html). So the gate's label is
# "uploader validation", not "uploader's validation": the pattern has no apostrophe.
MODEL_METADATA_GATE = "gate"
GATE_BENCHMARK = "benchmark"  # evaluation.benchmark: the F1 of the operator's benchmark
GATE_UPLOADER_VALIDATION = "uploader validation"  # no benchmark (dev only): the upload's own validation split


def uploader_validation_key(gate_metric: str) -> str:
    """The key of the uploader's validation score of the gate metric, reported beside a benchmark's."""
    return f"uploader_validation_{gate_metric}"


MODEL_METADATA_BENCHMARK_NAME = "benchmark_name"
MODEL_METADATA_BENCHMARK_VERSION = "benchmark_version"
MODEL_METADATA_BENCHMARK_MANIFEST_VERSION = "benchmark_manifest_version_id"
MODEL_METADATA_BENCHMARK_MANIFEST_SHA256 = "benchmark_manifest_sha256"
MODEL_METADATA_DATASET_MANIFEST_SHA256 = "dataset_manifest_sha256"  # ClaimManifest's ManifestSha256
MODEL_METADATA_UPLOADED_BY = "uploaded_by"  # the UploadedBy parameter: the S3 event's detail.requester
