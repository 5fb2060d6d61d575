"""The contract between the code that runs in AWS (training job, processing job, pipeline Lambda functions)
and the pipeline definition that reads what it writes: file names, container paths, metric lines, JSON paths.

One home for each of these facts: `pipeline_steps/`, `stacks/`, `local_runner/`, `tools/`, `config/` and `bench/`
import them from here (downward);
this module imports only the standard library, so the containers and the Lambda runtime can load it as it is.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

# Container paths that SageMaker defines (training jobs).
CHECKPOINT_DIR = "/opt/ml/checkpoints"  # synced both ways with CheckpointConfig.S3Uri
TENSORBOARD_DIR = "/opt/ml/output/tensorboard"  # TensorBoardOutputConfig.LocalPath (SageMaker's default)
MODEL_DIR = "/opt/ml/model"  # uploaded as model.tar.gz at the end of the job
OUTPUT_DATA_DIR = "/opt/ml/output/data"  # SM_OUTPUT_DATA_DIR: uploaded as output.tar.gz beside model.tar.gz
CODE_DIR = "/opt/ml/code"  # where the entry point and its source bundle run (the DLCs' working directory)

# Uploaded datasets: s3://<datasets bucket>/<datasets_root>/<name>/<version>/<split>/..., DATASET_MANIFEST_FILE last
# (config/layout.py builds the keys, the S3 trigger matches them, ClaimManifest checks them). Names and versions:
# 1 to DATASET_NAME_MAX_LENGTH characters of DATASET_NAME_CHARACTER, the first a letter or a digit - S3 "safe
# characters", so an S3 event carries the key as written
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
DATASETS_ROOT = "datasets"


def datasets_root(resource_infix: str) -> str:
    """The dataset root of a task's pipeline: DATASETS_ROOT plus the task's RESOURCE_INFIX (question answering's is
    DATASETS_ROOT itself, as before tasks existed; text classification's datasets-text-classification). One root per
    task, side by side: the trigger's `*` also spans `/`, so question answering's datasets/*/*/manifest.json would
    match a nested datasets/<task>/<name>/<version>/manifest.json."""
    return DATASETS_ROOT + resource_infix


DATASET_MANIFEST_FILE = "manifest.json"
# A held upload's manifest (`make upload-dataset PARAMS=... | NO_RUN=1`), beside where DATASET_MANIFEST_FILE would be:
# the trigger's wildcard `datasets/*/*/manifest.json` (stacks/trigger.py), whose `*` matches any characters but whose
# literal end `/manifest.json` must match as written
# (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html#eb-filtering-wildcard-matching),
# never matches it, so only `make start` (or the upload with PARAMS) starts its one execution; ClaimManifest claims
# it like the other.
HELD_MANIFEST_FILE = "held-manifest.json"
DATASET_NAME_MAX_LENGTH = 100
DATASET_NAME_FIRST = "[A-Za-z0-9]"
DATASET_NAME_CHARACTER = "[A-Za-z0-9._-]"
# The dataset's splits: its folders, ValidateAndTokenize's feature outputs and FineTune's data channels.
TRAIN_SPLIT = "train"
VALIDATION_SPLIT = "validation"
SPLITS = (TRAIN_SPLIT, VALIDATION_SPLIT)
# The operator's benchmark (evaluation.benchmark): a dataset in the uploads' format, staged by `make stage-benchmark`
# under s3://<artifacts>/BENCHMARKS_ROOT/<name>/<version>/ (BENCHMARK_SPLIT files, DATASET_MANIFEST_FILE last).
# ValidateAndTokenize tokenizes its BENCHMARK_SPLIT into the BENCHMARK_OUTPUT features, FineTune scores them.
BENCHMARKS_ROOT = "benchmarks"
BENCHMARK_SPLIT = VALIDATION_SPLIT
BENCHMARK_OUTPUT = "benchmark"


def manifest_key_split(key: object) -> str | None:
    """The split a dataset manifest's key belongs to: its first path segment, a folder in SPLITS
    ("train/part-1.jsonl" -> "train"); None for any other key ("train.jsonl", "test/x.jsonl"). The rule of
    ValidateAndTokenize's manifest reader (qa/data.py), which ClaimManifest applies before any job starts."""
    if not isinstance(key, str) or "/" not in key:
        return None
    split = key.split("/", 1)[0]
    return split if split in SPLITS else None


# ValidateAndTokenize (processing job): where its inputs land and its outputs are read from (ProcessingInput /
# ProcessingOutput LocalPath); one output folder, and ProcessingOutput, per name in PREPROCESS_OUTPUTS.
PROCESSING_INPUT_DIR = "/opt/ml/processing/input"
PROCESSING_OUTPUT_DIR = "/opt/ml/processing/output"
PROCESSING_CODE_INPUT = "code"  # <input>/code: the source bundle, unpacked into CODE_DIR before the entry point runs
PROCESSING_DATA_INPUT = "data"  # <input>/data: ClaimManifest's pinned folder (PINNED_MANIFEST_FILE and the files)
PROCESSING_TOKENIZER_INPUT = "model"  # <input>/model: the base model's tokenizer files
STATS_OUTPUT = "stats"  # <output>/stats/STATS_FILE
PROCESSING_BENCHMARK_INPUT = "benchmark"  # <input>/benchmark: the pinned benchmark's manifest and files
PREPROCESS_OUTPUTS = (*SPLITS, STATS_OUTPUT)

# Variables the SageMaker training toolkit sets in a training container for the two folders it uploads (the local
# runner sets the same, pointing into the job's folder).
MODEL_DIR_ENV = "SM_MODEL_DIR"  # MODEL_DIR
OUTPUT_DATA_DIR_ENV = "SM_OUTPUT_DATA_DIR"  # OUTPUT_DATA_DIR


def channel_env(channel: str) -> str:
    """The toolkit's variable holding input channel `channel`'s folder: SM_CHANNEL_<NAME>."""
    return f"SM_CHANNEL_{channel.upper()}"


# Input channels of the training job (InputDataConfig ChannelName -> SM_CHANNEL_<NAME>, TRAINING_CHANNELS_DIR/<name>).
TRAINING_CHANNELS_DIR = "/opt/ml/input/data"
TRAIN_CHANNEL = TRAIN_SPLIT  # preprocess.py's train features
VALIDATION_CHANNEL = VALIDATION_SPLIT  # preprocess.py's validation features and examples (qa/feature_files.py)
MODEL_CHANNEL = "model"  # the base model (weights, config, tokenizer)
BENCHMARK_CHANNEL = BENCHMARK_OUTPUT  # preprocess.py's benchmark features and examples (evaluation.benchmark only)
CODE_CHANNEL = "code"  # the source bundle, under network isolation (pipeline_steps/steps/train.py)
# processing.tokenize_in = "fine_tune": FineTune tokenizes itself, from these two channels (no feature channels).
DATA_CHANNEL = "data"  # ClaimManifest's InputUri folder: PINNED_MANIFEST_FILE and the files it pins
BENCHMARK_DATA_CHANNEL = "benchmark_data"  # the pinned benchmark's folder (manifest and files), as staged
# Where one process per node writes the features it tokenized, then TOKENIZED_DONE or TOKENIZED_FAILED for the
# node's other processes; the local runner moves it into the job's folder. Beside the downloaded channels (File mode
# puts them on the ML storage volume, which algorithms may also use as scratch space; on NVMe instances such as
# ml.p4d SageMaker puts the training paths on the instance storage: API_ResourceConfig VolumeSizeInGB,
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceConfig.html); assumption: a folder of
# /opt/ml/input outside data/ is on that storage too. Not uploaded: only the model, output and checkpoint folders are.
TOKENIZED_DIR = "/opt/ml/input/tokenized"
LOCAL_TOKENIZED_DIR_ENV = "QA_TOKENIZED_DIR"
TOKENIZED_DONE = "tokenized.done"
TOKENIZED_FAILED = "tokenized.failed"
# The line FineTune prints once it has tokenized (the local runner's test reads it).
TOKENIZED_LINE = "tokenized {examples} examples -> {features} features in {seconds:.1f} s on {processes} processes"

# Seams of the local runner: environment variables that move a container path on this machine.
LOCAL_S3_ROOT_ENV = "LOCAL_S3_ROOT"  # s3://bucket/key -> <root>/bucket/key
LOCAL_CHECKPOINT_DIR_ENV = "QA_CHECKPOINT_DIR"
LOCAL_TENSORBOARD_DIR_ENV = "QA_TENSORBOARD_DIR"

# ManifestVersionId's default: code that reads a manifest refuses it, so a run started by hand without the
# manifest's S3 version id fails before any instance instead of reading whatever version is current.
MANIFEST_VERSION_UNSET = "unset"

# Serving: the model archive carries the entry point and the `qa` package in <model dir>/MODEL_CODE_DIR, where the
# Hugging Face inference toolkit imports the module the container's SAGEMAKER_PROGRAM_ENV names (sagemaker-inference
# environment.py; the registered model sets it, the local runner's endpoint reads it).
MODEL_CODE_DIR = "code"
SERVING_PROGRAM = "inference.py"
SAGEMAKER_PROGRAM_ENV = "SAGEMAKER_PROGRAM"

# Files the training job writes into the model directory (so into model.tar.gz), beside the weights.
EVALUATION_FILE = "evaluation.json"  # the task's METRICS on the validation set (SageMaker model-quality shape)
LOG_HISTORY_FILE = "log_history.json"  # one entry per logging step and per evaluation, Trainer-like
# LOG_HISTORY_FILE is a JSON list of {LOG_STEP, LOG_EPOCH, LOG_TIME, *TRAIN_LOG_KEYS} per logging step and
# {LOG_STEP, LOG_EPOCH, LOG_TIME, *eval_log_keys(<the task's METRICS>)} per evaluation (during training per
# --evaluation_strategy, then of the saved model, at the step it was taken; LOG_TIME: the wall time it was logged,
# Unix seconds; the experiment tracker stamps each curve point with it). The same values go to TensorBoard as scalars
# tagged "train/<key>" and "eval/<key without eval_>" (TENSORBOARD_RUN's event files under TENSORBOARD_DIR).
LOG_STEP, LOG_EPOCH, LOG_TIME = "step", "epoch", "time"
LOG_LOSS, LOG_LEARNING_RATE, LOG_GRAD_NORM = "loss", "learning_rate", "grad_norm"
LOG_SAMPLES_PER_SECOND = "samples_per_second"
TRAIN_LOG_KEYS = (LOG_LOSS, LOG_LEARNING_RATE, LOG_GRAD_NORM, LOG_SAMPLES_PER_SECOND)
EVAL_LOG_PREFIX = "eval_"  # an evaluation's task metric <name> (a task's METRICS): eval_<name>
LOG_EVAL_LOSS = "eval_loss"  # the task's training loss on the validation split (for QA: start and end cross-entropy)


def eval_log_keys(metrics: tuple[str, ...]) -> tuple[str, ...]:
    """An evaluation entry's keys besides step, epoch and time: eval_<metric> for each of a task's METRICS, then
    LOG_EVAL_LOSS."""
    return (*(EVAL_LOG_PREFIX + name for name in metrics), LOG_EVAL_LOSS)


TENSORBOARD_RUN = "fine-tune"
PREDICTIONS_FILE = "predictions.json"  # example id -> the task's prediction (QA: the answer text), in OUTPUT_DATA_DIR


def evaluation_metric_path(metric: str) -> str:
    """The JSON path of a task metric's value in evaluation.json (model_quality_metrics): metrics.<metric>.value."""
    return f"metrics.{metric}.value"


def model_quality_metrics(metrics: Mapping[str, float]) -> dict[str, Any]:
    """SageMaker's model-quality statistics shape, {"metrics": {name: {"value": value}}} in the given order (each at
    evaluation_metric_path(name)): what the training job writes into evaluation.json and RecordModel into the report
    that the registered package links."""
    return {"metrics": {name: {"value": value} for name, value in metrics.items()}}


# The line the training job prints every logging interval (a log-history train entry, keyed as above); the
# metric definitions parse it into train:* (DescribeTrainingJob FinalMetricDataList, CloudWatch metrics), the
# local runner's spot reclaim and bench read it. TRAINING_STEP matches its start and captures the step.
TRAINING_LINE = (
    "step={step} epoch={epoch:.3f} loss={loss:.4f} learning_rate={learning_rate:.3e} "
    "samples_per_second={samples_per_second:.2f}"
)
TRAINING_METRIC_REGEXES = {
    "train:loss": r"step=\d+ epoch=[0-9.]+ loss=([0-9.eE+-]+)",
    "train:learning_rate": r"learning_rate=([0-9.eE+-]+)",
    "train:samples_per_second": r"samples_per_second=([0-9.eE+-]+)",
    "train:epoch": r"step=\d+ epoch=([0-9.]+)",
    "train:step": r"step=(\d+) epoch=",
}
TRAINING_STEP = TRAINING_METRIC_REGEXES["train:step"]
# The job's checkpoint log lines (logging formats and the patterns that read them: the local runner's
# mid-checkpoint reclaim, bench's checkpoint time).
CHECKPOINT_WRITING_LOG = "writing checkpoint %s"  # the step folder, step-NNNNNNNN
CHECKPOINT_WRITING = r"writing checkpoint step-(\d+)"
CHECKPOINT_SAVED_LOG = "checkpoint saved: step %d in %.1f s"
CHECKPOINT_SAVED = r"checkpoint saved: step \d+ in ([0-9.]+) s"

# The one line the training job prints after evaluating, its task's METRICS in order (evaluation_line), e.g.
#   evaluation: exact_match=80.1234 f1=88.5678
# The metric definitions (metric_regexes) parse it, and the pipeline reads the values back as
# FineTune.properties.FinalMetricDataList['eval:<metric>'].Value. The same line for the operator's benchmark
# (BENCHMARK_CHANNEL), printed after it, starts with BENCHMARK_PREFIX: the gate's line when evaluation.benchmark is set
# (the uploader's validation split is then reported, not gated on).
# Line prefix -> the metric definitions' name prefix (eval:<metric>, benchmark:<metric>).
EVALUATION_PREFIX = "evaluation"
BENCHMARK_PREFIX = "benchmark"
METRIC_NAME_PREFIXES = {EVALUATION_PREFIX: "eval", BENCHMARK_PREFIX: "benchmark"}


def metric_name(prefix: str, metric: str) -> str:
    """The metric definition's name of `metric` on the line of `prefix`: eval:f1, benchmark:f1."""
    return f"{METRIC_NAME_PREFIXES[prefix]}:{metric}"


def metric_values(metrics: Mapping[str, float]) -> str:
    """Each metric as name=value, four decimals, in the given order (a task's METRICS)."""
    return " ".join(f"{name}={value:.4f}" for name, value in metrics.items())


def evaluation_line(prefix: str, metrics: Mapping[str, float]) -> str:
    """The line of an evaluation (`prefix` EVALUATION_PREFIX or BENCHMARK_PREFIX), as metric_regexes reads it."""
    return f"{prefix}: {metric_values(metrics)}"


def metric_regexes(prefix: str, names: tuple[str, ...]) -> dict[str, str]:
    """The metric definitions (name -> regex with one group) that read each of `names` from evaluation_line's line
    of `prefix`, anchored at the line's start and the metrics before it, so no other line matches."""
    regexes = {}
    for index, name in enumerate(names):
        before = "".join(f"{earlier}=[0-9.]+ " for earlier in names[:index])
        regexes[metric_name(prefix, name)] = rf"{prefix}: {before}{name}=([0-9.]+)"
    return regexes


# The dataset manifest (datasets/<name>/<version>/manifest.json) the upload tool writes last:
# {"format": MANIFEST_V2_FORMAT, "dataset": name, "version": version,
#  "files": [{"key": "train/train.jsonl", "version_id": S3 VersionId, "sha256": hex, "size": bytes}, ...]}
# keys relative to the manifest's folder. Readers also accept the older SageMaker ManifestFile list (no pins).
MANIFEST_V2_FORMAT = "hfqa-dataset-manifest/2"
# In an older ManifestFile list, a prefix bucket that stands for "the bucket the manifest is in" (the bundled
# sample's manifest, written before any bucket exists).
ANY_DATASETS_BUCKET = "<datasets-bucket>"
# Local runner seams of the pipeline's Lambda functions (training_code/pipeline_functions.py).
# A JSON file {execution ARN: {"status": status, "start": epoch seconds}} standing in for SageMaker, in start order
# (a bare status string: started now).
LOCAL_EXECUTIONS_ENV = "QA_LOCAL_EXECUTIONS"
LOCAL_VERSIONS_DIR = ".versions"  # <LOCAL_S3_ROOT>/.versions/<bucket>/<key>/<version id>: kept object versions


def content_version(body: bytes) -> str:
    """The local stand-in for an S3 version id (the runner's store and the functions' agree on it): the content's
    SHA-256 prefix."""
    return hashlib.sha256(body).hexdigest()[:32]


def sha256_checksum(hex_digest: str) -> str:
    """A SHA-256 (hex, as manifests record it) in the form S3 reports a full-object ChecksumSHA256: base64 of the
    digest (https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity-upload.html)."""
    return base64.b64encode(bytes.fromhex(hex_digest)).decode()


def same_s3_checksum(stored: str | None, expected: str) -> bool:
    """Whether an S3 ChecksumSHA256 is `expected`, either full-object (base64) or composite ("<base64>-<parts>",
    a multipart upload's checksum of its part checksums): the digests compared, and the part count where S3 gives
    one (moto 5.2.5 reports a composite without its -<parts>; the digest of the part digests depends on how many
    there are anyway)."""
    if not stored:
        return False
    digest, _, parts = stored.partition("-")
    want_digest, _, want_parts = expected.partition("-")
    return digest == want_digest and (not parts or parts == want_parts)


# ClaimManifest copies the manifest's files at their versions under s3://<artifacts>/inputs/<claim digest>/ and
# writes this file there last (SageMaker's ManifestFile format, prefix = that folder): what preprocess.py reads.
PINNED_MANIFEST_FILE = "manifest.json"
# Beside the pinned manifest, in each feature split and in the model folder: {"task", "label_names"} (qa/task_file.py).
TASK_FILE = "task.json"
STATS_FILE = "stats.json"  # ValidateAndTokenize's dataset statistics (its `stats` output), read by the estimate
# ClaimManifest's estimated statistics (fine_tune mode): <inputs>/CLAIM_STATS_FOLDER/<claim digest>/STATS_FILE, beside
# the pinned folders (<inputs>/<claim digest>/, 64 hex digits: never this name), outside FineTune's data channel.
CLAIM_STATS_FOLDER = "claim-stats"

# Pipeline parameters (pipeline_steps/parameters.py builds them; the S3 trigger and the tools set them by name).
# Their home is here rather than pipeline_steps/names.py (which re-exports them) because the pipeline's Lambda
# functions receive them under these names and name them in their messages.
DATASET_BUCKET = "DatasetBucket"
MANIFEST_KEY = "ManifestKey"
MANIFEST_VERSION_ID = "ManifestVersionId"
BASE_MODEL_URI = "BaseModelUri"
TRAINING_INSTANCE_TYPE = "TrainingInstanceType"
TRAINING_INSTANCE_COUNT = "TrainingInstanceCount"
EPOCHS = "Epochs"
LEARNING_RATE = "LearningRate"
F1_THRESHOLD = "F1Threshold"
MODEL_APPROVAL_STATUS = "ModelApprovalStatus"
SKIP_INVALID_RECORDS = "SkipInvalidRecords"
MAX_TRAINING_COST = "MaxTrainingCostUSD"
UPLOADED_BY = "UploadedBy"  # the S3 event's detail.requester: who uploaded the manifest
UPLOADED_BY_UNSET = "unknown: not started by an upload event"  # its default (a valid metadata value)
# Per-run training controls (FineTune's hyperparameters; in fine_tune mode also the claim's windowing, in cpu_job mode
# ValidateAndTokenize's arguments). Strings where "auto" is allowed.
PER_DEVICE_TRAIN_BATCH_SIZE = "PerDeviceTrainBatchSize"  # "auto" or an integer
MAX_SEQ_LENGTH = "MaxSeqLength"
DOC_STRIDE = "DocStride"
WARMUP_RATIO = "WarmupRatio"  # "auto" or a number
EVALUATION_STRATEGY = "EvaluationStrategy"
EVALUATION_STRATEGIES = ("no", "steps", "epoch")  # train.py's --evaluation_strategy choices
EVALUATION_STEPS = "EvaluationSteps"
EARLY_STOPPING_PATIENCE = "EarlyStoppingPatience"  # 0: off
AUTO = "auto"

# Inputs of the pipeline's Lambda functions (the Lambda steps' `inputs`: flat values, structures as JSON text),
# besides the parameters above, which pass through under their own names.
INPUT_EXECUTION_ARN = "ExecutionArn"  # ClaimManifest: the execution that claims
INPUT_ARTIFACTS_BUCKET = "ArtifactsBucket"  # ClaimManifest: where claims and pinned inputs go
INPUT_CLAIMS_PREFIX = "ClaimsPrefix"
INPUT_INPUTS_PREFIX = "InputsPrefix"
INPUT_BOUNDS = "Bounds"  # ClaimManifest: {BOUND_*: number}, the settings' limits (qa/parameter_rules.py applies them)
INPUT_BASE_MODELS_URI = "BaseModelsUri"  # ClaimManifest: s3://<artifacts>/base-models/, where BaseModelUri must lie
BOUND_MAX_INSTANCE_COUNT = "MaxInstanceCount"
BOUND_MIN_F1_THRESHOLD = "MinF1Threshold"
BOUND_MAX_EPOCHS = "MaxEpochs"
BOUND_MAX_LEARNING_RATE = "MaxLearningRate"
BOUND_MAX_TRAINING_COST = "MaxTrainingCostUSD"
BOUND_MAX_EXECUTIONS_PER_DAY = "MaxExecutionsPerDay"
BOUND_MAX_CONCURRENT_EXECUTIONS = "MaxConcurrentExecutions"
# The GPU memory model's inputs for PerDeviceTrainBatchSize (qa/memory.py): each allowed type's GPU memory in GiB,
# and the shape (qa.cost.ModelShape fields) of the default base model at BOUND_SHAPE_MODEL_URI, when known offline.
BOUND_GPU_MEMORY_GIB = "GpuMemoryGiB"
BOUND_MODEL_SHAPE = "ModelShape"
BOUND_SHAPE_MODEL_URI = "ShapeModelUri"
BOUND_ACTIVATION_BYTES = "ActivationBytes"
INPUT_STATS_URI = "StatsUri"  # EstimateTrainingCost: s3://.../STATS_FILE
INPUT_COST_MODEL = "CostModel"  # EstimateTrainingCost: qa/cost.py's cost model
INPUT_MODEL_ARCHIVE_URI = "ModelArchiveUri"  # RecordModel: FineTune's model.tar.gz
INPUT_REGISTRY_URI = "RegistryUri"  # RecordModel: s3://<artifacts>/registry/, where it copies the archive
# ClaimManifest, RecordModel: the pipeline's task (a tasks.TASK_NAMES name, a constant of the definition).
INPUT_TASK = "Task"
# ClaimManifest, with a pinned benchmark of a task with labels: JSON text of its label names (index order); an upload
# that declares other label names is refused before any job.
INPUT_BENCHMARK_LABEL_NAMES = "BenchmarkLabelNames"
# RecordModel: JSON text {metric: value} of the task's METRICS, each FineTune's FinalMetricDataList['eval:<metric>']
# (the step joins them: pipeline_steps).
INPUT_METRICS = "Metrics"
# ClaimManifest in processing.tokenize_in "fine_tune" mode (qa/claim_validation.py): validate every record before
# any instance starts, with the windowing of FineTune's tokenization (the MaxSeqLength and DocStride parameters;
# "true" / "false" for INPUT_VALIDATE).
INPUT_VALIDATE = "ValidateRecords"
INPUT_MAX_WINDOWS_PER_EXAMPLE = "MaxWindowsPerExample"

# Outputs of the pipeline's Lambda functions (pipeline_functions.py handlers), read by the Lambda steps'
# OutputParameters and the steps after them.
CLAIM_PARAMETER_ERROR = "ParameterError"  # "" or one line naming the bad parameter
CLAIM_IGNORED = "Ignored"  # "" or why the key is no manifest key
CLAIM_DUPLICATE = "Duplicate"  # DUPLICATE_YES / DUPLICATE_NO (the step compares the string)
DUPLICATE_YES, DUPLICATE_NO = "true", "false"
CLAIM_CLAIMED_BY = "ClaimedBy"  # the owner execution
CLAIM_INPUT_URI = "InputUri"  # s3://<artifacts>/inputs/<claim digest>/
CLAIM_MANIFEST_SHA256 = "ManifestSha256"  # SHA-256 of the claimed manifest version's bytes ("" when not claimed)
CLAIM_DUPLICATE_REASON = "DuplicateReason"  # "" or one line: what the duplicate repeats (version or content)
# fine_tune mode only (CLAIM_VALIDATION_OUTPUTS, declared by the step only then: cpu_job's definition is unchanged):
CLAIM_DATASET_ERROR = "DatasetError"  # "" or the refusal lines of the dataset (qa/claim_validation.py)
CLAIM_STATS_URI = "StatsUri"  # s3://<artifacts>/<inputs>/CLAIM_STATS_FOLDER/<claim digest>/STATS_FILE (estimated)
CLAIM_VALIDATION_OUTPUTS = (CLAIM_DATASET_ERROR, CLAIM_STATS_URI)
CLAIM_OUTPUTS = (
    CLAIM_PARAMETER_ERROR,
    CLAIM_IGNORED,
    CLAIM_DUPLICATE,
    CLAIM_CLAIMED_BY,
    CLAIM_INPUT_URI,
    CLAIM_MANIFEST_SHA256,
    CLAIM_DUPLICATE_REASON,
    *CLAIM_VALIDATION_OUTPUTS,
)
# Claims by content (ClaimManifest): <claims prefix>/CONTENT_CLAIMS/<digest of the content and the run's
# parameters>.json, beside the claims by manifest version (<claims prefix>/<claim digest>.json).
CONTENT_CLAIMS = "content"
ESTIMATED_COST_OUTPUT = "EstimatedCostUSD"  # EstimateTrainingCost: on-demand USD
RECORD_MODEL_SHA256 = "ModelSha256"
RECORD_MODEL_URI = "ModelUri"  # the registry copy, registry_archive_uri(RegistryUri, ModelSha256): what is registered
RECORD_MODEL_VERSION_ID = "ModelVersionId"  # the registry copy's S3 version id
RECORD_TRAINED_VERSION_ID = "TrainedVersionId"  # the version of FineTune's model.tar.gz that was hashed and copied
RECORD_REPORT_URI = "ReportUri"  # also RecordModel's input: where it writes EVALUATION_FILE
RECORD_OUTPUTS = (
    RECORD_MODEL_SHA256,
    RECORD_MODEL_URI,
    RECORD_MODEL_VERSION_ID,
    RECORD_TRAINED_VERSION_ID,
    RECORD_REPORT_URI,
)
REGISTRY_ARCHIVE = "model.tar.gz"


def registry_archive_uri(registry_uri: str, sha256: str) -> str:
    """The content-addressed copy of a model archive: <registry uri><sha256>/model.tar.gz (RecordModel writes it,
    `make verify-model` checks a package's ModelDataUrl has this form)."""
    return f"{registry_uri.rstrip('/')}/{sha256}/{REGISTRY_ARCHIVE}"
