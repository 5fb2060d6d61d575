"""The settings schema: one pydantic model per concern, cross-field rules on the root.

Every model forbids unknown keys, so a typo in `cdk.json` or `-c key=value` fails at synth instead of
being silently ignored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property
from types import ModuleType
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.json_schema import JsonDict
from qa import benchmark as benchmark_files
from qa.features import DEFAULT_MAX_WINDOWS_PER_EXAMPLE
from qa.outputs import DATASET_NAME_CHARACTER, DATASET_NAME_FIRST, DATASET_NAME_MAX_LENGTH
from tasks import DEFAULT_TASK, TASK_NAMES
from tasks import task as task_module

from config.costs import (
    KNOWN_SHAPES,
    default_learning_rate,
    hardware_facts,
    reference_training_usd,
    training_usd_per_hour,
    young_daly_minutes,
)
from config.images import (
    DEFAULT_PROCESSING_IMAGE,
    DEFAULT_TRAINING_IMAGES,
    VOLTA_TRAINING_IMAGE,
    TrainingImage,
    no_registry_problem,
)
from config.instance_types import (
    DEFAULT_TRAINING_CANDIDATES,
    INSTANCE_TYPES,
    InstanceType,
    instance_type,
    names_where,
)
from config.layout import ArtifactLayout, DatasetLayout

# SageMaker's own upper bound for MaxRuntimeInSeconds / MaxWaitTimeInSeconds (28 days).
MAX_JOB_SECONDS = 28 * 24 * 3600

# The stacks of one environment, in deployment order.
StackPurpose = Literal["data", "network", "pipeline"]
STACK_PURPOSES: tuple[StackPurpose, ...] = get_args(StackPurpose)
# The project's buckets (stacks/data.py creates them; Settings.bucket_name names them for everyone else).
BucketPurpose = Literal["access-logs", "datasets", "artifacts"]
BUCKET_PURPOSES: tuple[BucketPurpose, ...] = get_args(BucketPurpose)
APPROVAL_STATUSES = ("PendingManualApproval", "Approved", "Rejected")

INSTANCE_TYPE_PATTERN = r"^ml\.[a-z0-9-]+\.[0-9]*x?large$"
# The fine-tuning task (training_code/tasks/): a Literal of the registry's names, so the schema lists them.
TaskName = Literal[TASK_NAMES]  # type: ignore[valid-type]
# What network.interface_endpoints may name (stacks/network.py maps each to its VPC endpoints).
InterfaceEndpoint = Literal["ecr", "logs", "monitoring", "sts", "sagemaker"]


# The folder, under Settings.log_group_root, of the Lambda functions' log groups (plus the task's RESOURCE_INFIX).
FUNCTION_LOG_FOLDER = "functions"
# What the pipelines of one environment share: its stacks' storage, network and lifetimes. A pipeline of
# Settings.pipelines sets everything else for itself (the task is its key).
SHARED_KEYS = (
    "env_name",
    "name_prefix",
    "account",
    "region",
    "removal_policy",
    "production",
    "checkpoint_retention_days",
    "log_retention_days",
    "network",
    "pipelines",
    "task",
)
# Sections a pipeline of Settings.pipelines starts from their defaults rather than from the environment's values:
# the gate's threshold and benchmark are about the task's metric and data.
NOT_INHERITED = ("evaluation",)
# IAM role names are at most 64 characters (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html);
# RecordModel's role name ends with the region, 14 characters at most in the commercial partition (ap-southeast-5).
MAX_ROLE_NAME_LENGTH = 64
LONGEST_REGION_NAME = "ap-southeast-5"


# Where a setting takes effect beyond synth (which validates every one), for the README's settings table
# (tools/settings_table.py): a section's ENFORCED_BY, or a field's own `Field(json_schema_extra=enforced_by(...))`.
ENFORCED_BY_KEY = "enforced_by"


def enforced_by(where: str) -> JsonDict:
    """A field's metadata naming where it is enforced (overrides its section's ENFORCED_BY)."""
    return {ENFORCED_BY_KEY: where}


class StrictModel(BaseModel):
    """Base for every settings section: immutable, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ENFORCED_BY: ClassVar[str] = "synth"


class NetworkSettings(StrictModel):
    """Where the jobs run: a VPC created here, an existing one, or SageMaker's own network."""

    ENFORCED_BY: ClassVar[str] = "synth: network stack, job VpcConfig"

    mode: Literal["create", "existing", "none"] = "create"
    max_azs: int = Field(2, ge=1, le=6)
    existing_vpc_id: str | None = Field(None, pattern=r"^vpc-[0-9a-f]{8,17}$")
    existing_subnet_ids: tuple[str, ...] = ()
    existing_availability_zones: tuple[str, ...] = ()
    interface_endpoints: tuple[InterfaceEndpoint, ...] = Field(
        ("logs",),
        description="Interface endpoints, each billed per zone-hour while idle (about 0.01 USD per zone-hour, "
        "https://aws.amazon.com/privatelink/pricing/: 2 zones ~15 USD a month each). SageMaker pulls ECR images "
        "itself and S3 goes through the free gateway endpoint. `logs` is required with mode=create: AWS sources "
        "disagree on whether job logs reach CloudWatch from a VPC without it, and the F1 gate reads a metric "
        "SageMaker parses from those logs, so a job must never run blind. Add others when your own code in the "
        "jobs calls those AWS APIs.",
    )
    availability_zones: tuple[str, ...] = Field(
        (),
        description="mode=create: the VPC's zones, in order (default: the region's first max_azs zones). "
        "Pin them where the training instance type is offered (p4d is in some zones only).",
    )

    @property
    def zones(self) -> tuple[str, ...]:
        """The job subnets' zones, in subnet order, where known at synth (else empty)."""
        return self.existing_availability_zones if self.mode == "existing" else self.availability_zones

    @property
    def subnet_count(self) -> int:
        """How many job subnets there are (0: jobs run outside a VPC)."""
        if self.mode == "none":
            return 0
        if self.mode == "existing":
            return len(self.existing_subnet_ids)
        return len(self.availability_zones) or self.max_azs

    @model_validator(mode="after")
    def _existing_vpc_is_complete(self) -> NetworkSettings:
        if self.mode == "create" and "logs" not in self.interface_endpoints:
            raise ValueError(
                "network.interface_endpoints must include 'logs' with network.mode=create: the VPC has no route to "
                "CloudWatch Logs otherwise, and AWS does not promise that job logs (and the F1 metric parsed from "
                "them) arrive without it. About 0.01 USD per zone-hour; or run the jobs outside a VPC with "
                "network.mode=none"
            )
        if self.availability_zones and self.mode != "create":
            raise ValueError("network.availability_zones is only used with network.mode=create")
        if self.mode == "existing":
            if not self.existing_vpc_id or not self.existing_subnet_ids:
                raise ValueError(
                    "network.mode=existing needs network.existing_vpc_id and network.existing_subnet_ids "
                    "(private subnets with routes to S3 and the SageMaker/ECR/STS/Logs endpoints)"
                )
            if len(self.existing_availability_zones) != len(self.existing_subnet_ids):
                raise ValueError(
                    "network.existing_availability_zones must list one zone per entry of "
                    "network.existing_subnet_ids, in the same order"
                )
        elif self.existing_vpc_id or self.existing_subnet_ids:
            raise ValueError("network.existing_vpc_id/existing_subnet_ids are only used with network.mode=existing")
        return self


class ModelSettings(StrictModel):
    """The pretrained encoder to fine-tune."""

    ENFORCED_BY: ClassVar[str] = "synth: BaseModelUri default"

    base_model: str = Field("bert-large-uncased-whole-word-masking", min_length=1)
    base_model_s3_uri: str | None = Field(
        None,
        pattern=r"^s3://[a-z0-9.-]{3,63}/.+/$",
        description="Weights + tokenizer staged in S3 (a folder URI ending in '/'). Default: "
        "s3://<artifacts bucket>/base-models/<base_model>/, filled by `make stage-model`.",
    )


class HyperParameters(StrictModel):
    """What the training script receives (names match its command-line flags)."""

    ENFORCED_BY: ClassVar[str] = "FineTune (train.py)"

    epochs: float = Field(2.0, gt=0)
    # "auto" (issue 31): batch per GPU from the memory model of the job's GPU (training_code/qa/memory.py, up to
    # the recipe's 32; 8 on CPU), learning rate and warm-up of NVIDIA's published SQuAD recipe for the global
    # batch (training_code/qa/recipe.py; CPU runs keep 3e-5 and 0.1). A number overrides.
    learning_rate: Annotated[float, Field(gt=0, lt=1)] | Literal["auto"] = "auto"
    per_device_train_batch_size: Annotated[int, Field(gt=0)] | Literal["auto"] = "auto"
    per_device_eval_batch_size: int = Field(32, gt=0)
    gradient_accumulation_steps: int = Field(1, gt=0)
    max_seq_length: int = Field(384, ge=32, le=4096)
    doc_stride: int = Field(128, gt=0)
    precision: Literal["bf16", "fp16", "no"] = "bf16"
    warmup_ratio: Annotated[float, Field(ge=0, lt=1)] | Literal["auto"] = "auto"
    # torch.compile in FineTune; "auto": on when the estimate's compute time pays for the compile
    # (config/costs.py compile_hyperparameter).
    compile: bool | Literal["auto"] = "auto"
    weight_decay: float = Field(0.01, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    seed: int = 42
    logging_steps: int = Field(50, gt=0)
    # Wall-clock interval: Young's sqrt(2 x checkpoint cost x MTBF) for one spot instance (config/costs.py:
    # 24.2 s per 4 GB BERT-large checkpoint, 0.2 interruptions per instance-month): 420 min. The reference
    # workload trains for ~2 min, so no checkpoint fires; long jobs checkpoint on this timer. bench/RESULTS.md
    # section 6 has the reasoning; a step interval (0: off) can be added.
    checkpoint_minutes: float = Field(round(young_daly_minutes(1)), ge=0)
    checkpoint_steps: int = Field(0, ge=0)
    # NCCL_DEBUG=INFO in the job: the log then names NCCL's network plugin (EFA or sockets). For a first run.
    nccl_debug: bool = False
    keep_checkpoints: int = Field(2, gt=0)

    @model_validator(mode="after")
    def _stride_fits_window(self) -> HyperParameters:
        if self.doc_stride >= self.max_seq_length // 2:
            raise ValueError(
                f"hyperparameters.doc_stride ({self.doc_stride}) must be below half of max_seq_length "
                f"({self.max_seq_length}) so that question + window overlap still fits"
            )
        return self


class TrainingSettings(StrictModel):
    """The distributed training job."""

    ENFORCED_BY: ClassVar[str] = "FineTune job"

    # dev (cdk.json): ml.g5.2xlarge with training.deadline_minutes=90. One A10G (24 GB) needs no p4d quota (a new
    # account's is usually 0); for the default model on SQuAD `make estimate` marks it the cheapest single GPU and
    # the cheapest choice within 90 min (1 h 10 min, $1.72 on demand) among the types with a list price in
    # config/costs.py (g6 and g6e have none there yet; the p3.2xlarge's V100 takes longer, costs more and needs
    # the older Volta image). prod keeps this default, 1 x p4d.
    instance_type: str = Field("ml.p4d.24xlarge", pattern=INSTANCE_TYPE_PATTERN)
    usd_per_hour: float | None = Field(
        None,
        gt=0,
        description="On-demand price per instance-hour of training.instance_type that the cost guard and `make "
        "estimate` use instead of config/costs.py's list price: your region's price, or one the table lacks "
        "(e.g. ml.p5.48xlarge, ml.g6.*, ml.g6e.*; https://aws.amazon.com/sagemaker/pricing/, Training tab).",
        json_schema_extra=enforced_by("EstimateTrainingCost, make estimate"),
    )
    # 1 x p4d: what `make estimate` recommends for the reference workload (the cheapest choice within
    # deadline_minutes; 2 nodes finish 0.7 min sooner at 1.8x the cost). Multi-node: -c training.instance_count=2.
    instance_count: int = Field(1, gt=0, le=64)
    max_instance_count: int = Field(
        8,
        gt=0,
        le=64,
        json_schema_extra=enforced_by("claim step, make start"),
        description="The largest TrainingInstanceCount an execution may pass (ClaimManifest checks).",
    )
    distribution: Literal["torchrun", "smddp"] = "torchrun"
    use_spot: bool = True
    max_run_seconds: int = Field(24 * 3600, gt=0, le=MAX_JOB_SECONDS)
    max_wait_seconds: int = Field(36 * 3600, gt=0, le=MAX_JOB_SECONDS)
    checkpoint_prefix: str = Field(
        ArtifactLayout().checkpoints,
        pattern=r"^([a-z0-9][a-z0-9._-]*)?$",
        description="Where checkpoints go in the artifacts bucket (read it as Settings.layout.checkpoints); "
        "empty: the job writes no checkpoints.",
    )
    allowed_instance_types: tuple[str, ...] | None = Field(
        None,
        json_schema_extra=enforced_by("synth: TrainingInstanceType values"),
        description="Values the TrainingInstanceType pipeline parameter accepts (its EnumValues); every rule "
        "is checked on each. Default: instance_type plus those of p4d, p4de, p3dn that pass every rule.",
    )
    availability_zone: str | None = Field(
        None,
        description="Zone of the one subnet the training nodes share (EFA traffic stays in a subnet; cross-zone "
        "traffic is billed). One of the network's zones; default: the first job subnet.",
    )
    volume_size_gb: int = Field(200, gt=0, le=16384)
    image_uri: str | None = Field(None, min_length=1, description="Overrides the backend's default image.")
    encrypt_inter_container_traffic: bool = True
    # ResourceConfig.KeepAlivePeriodInSeconds (https://docs.aws.amazon.com/sagemaker/latest/APIReference/
    # API_ResourceConfig.html), at most 3600 as the warm pools guide says (botocore's model allows 21600): keeps the
    # instances for a matching FineTune job started within it (same role, instance type and count, volume and its
    # key, subnets, security groups, encryption, network isolation), billed while kept; not with spot
    # (https://docs.aws.amazon.com/sagemaker/latest/dg/train-warm-pools.html, "Considerations").
    keep_alive_seconds: int = Field(
        0,
        ge=0,
        le=3600,
        description="Seconds FineTune's instances stay in a SageMaker warm pool after the job for the next matching "
        "execution (0: off). Needs training.use_spot=false and a warm pool quota for the type (its AWS default is "
        "0: the job then keeps no pool); `make estimate` prints the second run and what the keep-alive bills.",
    )
    retry_attempts: int = Field(3, ge=0, le=20, json_schema_extra=enforced_by("every job step's retry policy"))
    deadline_minutes: float = Field(
        12.0,
        gt=0,
        le=MAX_JOB_SECONDS / 60,
        json_schema_extra=enforced_by("make estimate (planned only)"),
        description="Wall time from the manifest upload to the registered model that `make estimate` plans for: "
        "it marks the cheapest instance choice whose modelled pipeline (tokenization not cached) finishes within it.",
    )
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        json_schema_extra=enforced_by("EstimateTrainingCost"),
        description="Default of the MaxTrainingCostUSD pipeline parameter: executions whose estimated on-demand "
        "training cost (list prices, config/costs.py) exceeds it stop before FineTune. Default: "
        "limits.default_cost_multiple x the estimate of the configured choice for SQuAD v1.1 (Settings."
        "default_max_cost_usd; `make estimate` prints that estimate).",
    )

    @property
    def checkpoints_enabled(self) -> bool:
        """Whether the training job writes checkpoints (under Settings.layout.checkpoints)."""
        return bool(self.checkpoint_prefix)


class ProcessingSettings(StrictModel):
    """Where the dataset is validated and tokenized, and the CPU preprocessing job (ValidateAndTokenize)."""

    ENFORCED_BY: ClassVar[str] = "ValidateAndTokenize job"

    tokenize_in: Literal["fine_tune", "cpu_job"] = Field(
        "fine_tune",
        json_schema_extra=enforced_by("synth: pipeline graph"),
        description="fine_tune: ClaimManifest validates every record (a Lambda function, no instance) and FineTune "
        "tokenizes on its own vCPUs: one instance cold start. cpu_job: ValidateAndTokenize, a cached CPU job, "
        "validates and tokenizes before FineTune (for datasets above what the claim step validates in time; "
        "`make estimate DATASET=...` says which pays).",
    )
    preprocess_instance_type: str = Field("ml.m5.4xlarge", pattern=INSTANCE_TYPE_PATTERN)
    image_uri: str | None = Field(None, min_length=1, description="Overrides the default CPU image.")
    volume_size_gb: int = Field(50, gt=0, le=16384)
    max_runtime_seconds: int = Field(4 * 3600, gt=0, le=5 * 24 * 3600)
    max_windows_per_example: int = Field(
        DEFAULT_MAX_WINDOWS_PER_EXAMPLE,
        gt=0,
        json_schema_extra=enforced_by("claim step or ValidateAndTokenize"),
        description="The most windows (max_seq_length tokens, doc_stride overlap) one record's context may make: "
        "ValidateAndTokenize refuses a record over it, naming its file, line, id and field (SkipInvalidRecords=true "
        "drops it), before any GPU is billed. 100 windows at 384/128 are a context of about 24,000 tokens.",
    )


DATASET_NAME_PATTERN = f"^{DATASET_NAME_FIRST}{DATASET_NAME_CHARACTER}{{0,{DATASET_NAME_MAX_LENGTH - 1}}}$"


class BenchmarkSettings(StrictModel):
    """The operator's benchmark that CheckF1 gates on: staged by `make stage-benchmark`, which prints these values."""

    ENFORCED_BY: ClassVar[str] = "the scoring job's SHA-256 check, RegisterModel metadata"

    name: str = Field(pattern=DATASET_NAME_PATTERN)
    version: str = Field(pattern=DATASET_NAME_PATTERN)
    manifest_version_id: str = Field(
        pattern=r"^[A-Za-z0-9._-]{1,256}$",
        description="The S3 version id of benchmarks/<name>/<version>/manifest.json, recorded in every package. "
        "At most 256 characters (a model package metadata value). SageMaker inputs cannot name a version "
        "(ProcessingS3Input has no VersionId): manifest_sha256 is what the job checks.",
    )
    manifest_sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 of the manifest's bytes; the manifest records each file's SHA-256, so this pins every "
        "file too. ValidateAndTokenize refuses a benchmark that differs.",
    )
    label_names: tuple[str, ...] | None = Field(
        None,
        json_schema_extra=enforced_by("claim step"),
        description="The label names the benchmark's manifest declares, in index order (a task whose records need "
        "them: text and token classification; none for question answering). The claim step refuses, before any "
        "job, an upload that declares other names: the gate would score the model's classes against other ones.",
    )
    writers: tuple[str, ...] = Field(
        min_length=1,
        json_schema_extra=enforced_by("data stack: bucket policy"),
        description="IAM principal ARN patterns (aws:PrincipalArn: a role's ARN, not its sessions') that may write "
        "under benchmarks/ of the artifacts bucket; its bucket policy denies s3:PutObject there to every other "
        "principal, the project's own roles included. The release role that runs `make stage-benchmark`.",
    )

    @field_validator("writers")
    @classmethod
    def _writers_are_arns(cls, writers: tuple[str, ...]) -> tuple[str, ...]:
        bad = [arn for arn in writers if not arn.startswith("arn:") or ":iam::" not in arn]
        if bad:
            raise ValueError(f"evaluation.benchmark.writers: {bad} are not IAM ARNs (arn:aws:iam::<account>:role/...)")
        return writers


class EvaluationSettings(StrictModel):
    """The quality gate before registration: the F1 on the operator's benchmark, or without one (dev only) on the
    uploader's own validation split."""

    ENFORCED_BY: ClassVar[str] = "CheckF1"

    f1_threshold: float = Field(88.0, ge=0, le=100)
    min_f1_threshold: float = Field(
        0.0,
        ge=0,
        le=100,
        json_schema_extra=enforced_by("claim step, make start"),
        description="The lowest F1Threshold an execution may pass (the claim step refuses lower values before "
        "anything is billed); production environments must set one.",
    )
    benchmark: BenchmarkSettings | None = Field(
        None,
        description="The operator's benchmark CheckF1 gates on. None (dev only): the gate is the uploader's own "
        "validation split, which the registered package then says.",
    )

    @model_validator(mode="after")
    def _threshold_above_floor(self) -> EvaluationSettings:
        if self.f1_threshold < self.min_f1_threshold:
            raise ValueError(
                f"evaluation.f1_threshold ({self.f1_threshold}) is below evaluation.min_f1_threshold "
                f"({self.min_f1_threshold}); raise the threshold or lower the floor"
            )
        return self


class LimitsSettings(StrictModel):
    """What one execution may ask for, and how many may run: ClaimManifest refuses an execution past these before
    anything is billed, and `make start` refuses to start it (qa/parameter_rules.py, one home for both). The
    values reach the claim through the definition (its Bounds input). training.max_instance_count and
    evaluation.min_f1_threshold are the bounds of TrainingInstanceCount and F1Threshold."""

    ENFORCED_BY: ClassVar[str] = "claim step, make start"

    default_cost_multiple: float = Field(
        3.0,
        ge=1,
        json_schema_extra=enforced_by("EstimateTrainingCost (the default)"),
        description="The default MaxTrainingCostUSD (unless training.max_cost_usd is set): this multiple of the "
        "estimated on-demand FineTune cost of the configured choice on SQuAD v1.1 (config/costs.py "
        "reference_training_usd; `make estimate` prints it).",
    )
    max_cost_multiple: float = Field(
        10.0,
        ge=1,
        description="The largest MaxTrainingCostUSD an execution may pass (unless max_training_cost_usd is set): "
        "this multiple of the same estimate.",
    )
    max_training_cost_usd: float | None = Field(
        None, gt=0, description="The largest MaxTrainingCostUSD an execution may pass, in USD."
    )
    max_epochs: float = Field(10.0, gt=0, description="The largest Epochs an execution may pass.")
    max_learning_rate: float = Field(1e-3, gt=0, lt=1, description="The largest LearningRate an execution may pass.")
    max_executions_per_day: int = Field(
        10,
        gt=0,
        description="How many executions of the pipeline may start in 24 hours: the claim refuses one that has this "
        "many started in the 24 hours before it (every execution counts: duplicates, refused ones).",
    )
    max_concurrent_executions: int = Field(
        2,
        gt=0,
        description="How many executions may run at once: the claim refuses one that started while this many "
        "earlier ones are still executing.",
    )


class RegistrySettings(StrictModel):
    """How trained models are registered."""

    ENFORCED_BY: ClassVar[str] = "RegisterModel"

    approval_status: Literal["PendingManualApproval", "Approved", "Rejected"] = "PendingManualApproval"
    allow_approved_registration: bool = Field(
        False,
        json_schema_extra=enforced_by("synth: ModelApprovalStatus values"),
        description="Whether an execution may register a model as Approved (ModelApprovalStatus=Approved) and "
        "skip the manual approval. Never in production; dev may opt in.",
    )
    inference_image_uri: str | None = Field(None, min_length=1)
    inference_instance_types: tuple[str, ...] = ("ml.g5.xlarge", "ml.g5.2xlarge")

    @model_validator(mode="after")
    def _approved_only_when_allowed(self) -> RegistrySettings:
        if self.approval_status == "Approved" and not self.allow_approved_registration:
            raise ValueError(
                "registry.approval_status=Approved skips the manual approval: it needs "
                "registry.allow_approved_registration=true (never in production)"
            )
        return self

    @property
    def approval_statuses(self) -> tuple[str, ...]:
        """What the ModelApprovalStatus pipeline parameter accepts (its EnumValues)."""
        return tuple(s for s in APPROVAL_STATUSES if s != "Approved" or self.allow_approved_registration)


class TrackingSettings(StrictModel):
    """Experiment tracking (MLflow): where the local runner and `make report` record each execution.

    The jobs never log: they run network-isolated. Recording happens where the network is allowed: at the
    end of a local run (local_runner) and in `make report` for an AWS execution (tools/report.py).
    """

    ENFORCED_BY: ClassVar[str] = "local runner, make report"

    # None: a local SQLite store, .local-runs/mlflow.db (artifacts beside it); else any MLflow tracking URI
    # (http(s)://..., sqlite:///..., or a SageMaker tracking-server ARN, which needs the sagemaker-mlflow plugin).
    mlflow_tracking_uri: str | None = Field(None, min_length=1)
    experiment_name: str | None = Field(None, pattern=r"^[a-zA-Z0-9\-_./]{1,256}$")
    # AWS::SageMaker::MlflowTrackingServer in the pipeline stack; `make report` then records AWS executions
    # there (it bills by the hour while it exists: see the synth summary's idle cost).
    managed_server: bool = Field(False, json_schema_extra=enforced_by("synth: pipeline stack"))
    server_size: Literal["Small", "Medium", "Large"] = Field(
        "Small", json_schema_extra=enforced_by("synth: pipeline stack")
    )
    # CreateMlflowTrackingServer MlflowVersion (pattern ^\d+(\.\d+)+$); None: SageMaker's default version.
    mlflow_version: str | None = Field(
        None, pattern=r"^\d+(\.\d+)+$", json_schema_extra=enforced_by("synth: pipeline stack")
    )

    @model_validator(mode="after")
    def _one_destination(self) -> TrackingSettings:
        if self.managed_server and self.mlflow_tracking_uri:
            raise ValueError(
                "tracking.managed_server=true and tracking.mlflow_tracking_uri both name where AWS executions are "
                "recorded: set only one"
            )
        return self


class Settings(StrictModel):
    """Everything one deployment needs, validated once at synth."""

    ENFORCED_BY: ClassVar[str] = "synth: stacks"

    env_name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,15}$")
    name_prefix: str = Field("hf-qa", pattern=r"^[a-z][a-z0-9-]{1,19}$")
    task: TaskName = Field(
        DEFAULT_TASK,
        json_schema_extra=enforced_by("synth: every job's --task, metric definitions, gate, model package group"),
        description="What the pipeline fine-tunes, a Hugging Face pipeline name: its records, head, metrics and the "
        "one the gate compares with F1Threshold (training_code/tasks/).",
    )
    pipelines: dict[TaskName, dict[str, Any]] = Field(
        default_factory=dict,
        json_schema_extra=enforced_by("synth: one pipeline stack per task, its own names and dataset root"),
        description="More pipelines in this environment, one per task besides `task`: task -> what it sets otherwise "
        "than the environment (deep-merged; `evaluation` starts from its defaults). Each has its own model package "
        "group, gate, benchmark, notifications and dataset root (datasets-<task>/); storage and network are shared.",
    )
    account: str | None = Field(None, pattern=r"^[0-9]{12}$")
    region: str | None = Field(None, pattern=r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$")
    removal_policy: Literal["destroy", "retain"] = "retain"
    production: bool = Field(
        False,
        description="A production environment: termination protection, every stateful resource retained, no "
        "Approved registration by parameter, an F1 floor. The environment named prod must set it.",
    )
    notification_email: str | None = Field(None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    checkpoint_retention_days: int = Field(30, gt=0)
    log_retention_days: int = Field(365, gt=0)
    network: NetworkSettings = NetworkSettings()
    model: ModelSettings = ModelSettings()
    training: TrainingSettings = TrainingSettings()
    hyperparameters: HyperParameters = HyperParameters()
    processing: ProcessingSettings = ProcessingSettings()
    evaluation: EvaluationSettings = EvaluationSettings()
    registry: RegistrySettings = RegistrySettings()
    tracking: TrackingSettings = TrackingSettings()
    limits: LimitsSettings = LimitsSettings()

    @field_validator("task", mode="before")
    @classmethod
    def _known_task(cls, name: Any) -> Any:
        """An unknown task fails with the registry's one line and its did-you-mean."""
        task_module(str(name))
        return name

    @property
    def task_facts(self) -> ModuleType:
        """The task's module: the facts it declares (NAME, RESOURCE_NAME, METRICS, GATE_METRIC, ...)."""
        return task_module(self.task)

    @model_validator(mode="after")
    def _pipelines_are_valid(self) -> Settings:
        """Each pipeline of `pipelines` holds on its own (every rule of a Settings), sets no shared key, and is of
        another task than the environment's; its names fit AWS's limits (checked by its own validation)."""
        problems = []
        for name, overrides in self.pipelines.items():
            shared = sorted(set(overrides) & set(SHARED_KEYS))
            if name == self.task:
                problems.append(f"pipelines.{name}: the environment's own task (task={self.task}) has its pipeline")
            elif shared:
                problems.append(
                    f"pipelines.{name}: {', '.join(shared)} is shared by the environment's pipelines: set it for the "
                    "environment"
                )
            else:
                try:
                    pipeline = self._pipeline(name)
                except ValidationError as err:
                    problems += [f"pipelines.{name}{problem}" for problem in _problems(err)]
                    continue
                if pipeline.training.checkpoint_prefix != self.training.checkpoint_prefix:
                    problems.append(
                        f"pipelines.{name}.training.checkpoint_prefix: the checkpoint prefix is the environment's "
                        "(each pipeline's checkpoints lie under it and the task's infix): set it for the environment"
                    )
        if problems:
            raise ValueError("\n  - ".join(problems))
        return self

    def _pipeline(self, name: str) -> Settings:
        """The settings of the environment's pipeline of task `name` (of `pipelines`)."""
        values = self.model_dump(exclude={"pipelines", *NOT_INHERITED})
        return Settings.model_validate(_deep_merge(values, {**self.pipelines[name], "task": name}))

    @cached_property
    def deployed_pipelines(self) -> tuple[Settings, ...]:
        """The settings of each pipeline this environment deploys: its own task's first, then those of `pipelines`."""
        return (self, *(self._pipeline(name) for name in self.pipelines))

    def pipeline_of(self, task: str) -> Settings:
        """The settings of the environment's pipeline that trains `task`; ValueError naming the deployed ones."""
        for pipeline in self.deployed_pipelines:
            if pipeline.task == task:
                return pipeline
        deployed = ", ".join(p.task for p in self.deployed_pipelines)
        raise ValueError(
            f"environment {self.env_name} has no pipeline of task {task} (it deploys: {deployed}); add it to "
            f"environments.{self.env_name}.pipelines in cdk.json"
        )

    @property
    def pipeline_prefix(self) -> str:
        """The start of the pipeline stack's own resource names: name_prefix and the task's RESOURCE_INFIX
        (question answering's none, as before tasks existed), so two pipelines of one environment never share one."""
        return self.name_prefix + self.task_facts.RESOURCE_INFIX

    @property
    def datasets(self) -> DatasetLayout:
        """Where this pipeline's uploads live in the datasets bucket (qa.outputs.datasets_root)."""
        return DatasetLayout.of_task(self.task_facts)

    @field_validator("region")
    @classmethod
    def _region_serves_the_images(cls, region: str | None) -> str | None:
        """A region known at synth must have a Deep Learning Containers registry (an environment-agnostic stack
        looks the account up on AWS::Region at deploy: stacks/registry.py). No per-region facts on instance types
        are kept, so whether the training types are offered there is not checked."""
        problem = None if region is None else no_registry_problem(region)
        if problem is not None:
            raise ValueError(problem)
        return region

    @model_validator(mode="after")
    def _cross_field_rules(self) -> Settings:
        training = self.training
        problems = [
            *self._job_instance_type_problems(),
            *self._placement_problems(),
            *self._production_problems(),
            *self._benchmark_problems(),
        ]
        for name in self.training_instance_types:
            problems += self._training_type_problems(name)
        if training.use_spot and training.max_wait_seconds < training.max_run_seconds:
            problems.append(
                f"training.max_wait_seconds ({training.max_wait_seconds}) must be >= training.max_run_seconds "
                f"({training.max_run_seconds}) with spot training: it is the run time plus the time spent "
                "waiting for spot capacity"
            )
        if training.use_spot and training.keep_alive_seconds:
            # "SageMaker Managed Warm Pools cannot be used with spot instances":
            # https://docs.aws.amazon.com/sagemaker/latest/dg/train-warm-pools.html (Considerations)
            problems.append(
                f"training.keep_alive_seconds={training.keep_alive_seconds} needs training.use_spot=false: SageMaker "
                "warm pools cannot be used with spot instances; set training.use_spot=false or "
                "training.keep_alive_seconds=0 (https://docs.aws.amazon.com/sagemaker/latest/dg/train-warm-pools.html)"
            )
        if training.use_spot and not training.checkpoints_enabled:
            problems.append(
                "training.use_spot=true needs training.checkpoint_prefix: without checkpoints every spot "
                "interruption restarts training from scratch"
            )
        role = self.record_model_role_name(LONGEST_REGION_NAME)
        if len(role) > MAX_ROLE_NAME_LENGTH:
            problems.append(
                f"name_prefix {self.name_prefix} is too long for the {self.task} pipeline: its RecordModel role "
                f"{role} has {len(role)} characters, IAM allows {MAX_ROLE_NAME_LENGTH}; shorten name_prefix"
            )
        problems += self._bound_problems(priced=not problems)
        if problems:
            raise ValueError("\n  - ".join(dict.fromkeys(problems)))
        return self

    def _bound_problems(self, priced: bool) -> list[str]:
        """The defaults within the limits an execution must meet (`priced`: the cost ceilings can be computed)."""
        limits, training, hps = self.limits, self.training, self.hyperparameters
        problems = [
            f"{key} ({value:g}) is above {bound_key} ({bound:g}): every execution with the default would be refused; "
            f"lower the one or raise the other"
            for key, value, bound_key, bound in (
                ("training.instance_count", training.instance_count, "training.max_instance_count",
                 training.max_instance_count),
                ("hyperparameters.epochs", hps.epochs, "limits.max_epochs", limits.max_epochs),
                ("hyperparameters.learning_rate", default_learning_rate(self), "limits.max_learning_rate",
                 limits.max_learning_rate),
            )
            if value > bound
        ]  # fmt: skip
        if not priced:
            return problems
        if (training.max_cost_usd is None or limits.max_training_cost_usd is None) and (
            self.model.base_model not in KNOWN_SHAPES
        ):
            return [
                *problems,
                f"the shape of model.base_model {self.model.base_model} is not known offline, so the default cost "
                "ceilings cannot be estimated: set training.max_cost_usd and limits.max_training_cost_usd (USD)",
            ]
        if self.default_max_cost_usd > self.max_training_cost_usd:
            problems.append(
                f"the default MaxTrainingCostUSD ({self.default_max_cost_usd:g}, training.max_cost_usd or "
                f"limits.default_cost_multiple) is above its upper bound ({self.max_training_cost_usd:g}, "
                "limits.max_training_cost_usd or limits.max_cost_multiple): lower the one or raise the other"
            )
        return problems

    @property
    def tokenizes_in_fine_tune(self) -> bool:
        """processing.tokenize_in "fine_tune": ClaimManifest validates the records, FineTune tokenizes them, and no
        ValidateAndTokenize job runs (one instance cold start)."""
        return self.processing.tokenize_in == "fine_tune"

    @property
    def reference_training_usd(self) -> float:
        """The estimated on-demand FineTune cost of the configured choice on SQuAD v1.1 (config/costs.py)."""
        return reference_training_usd(self)

    @property
    def default_max_cost_usd(self) -> float:
        """MaxTrainingCostUSD's default: training.max_cost_usd, else limits.default_cost_multiple x the reference
        estimate, rounded up to the dollar."""
        if self.training.max_cost_usd is not None:
            return self.training.max_cost_usd
        return float(math.ceil(self.limits.default_cost_multiple * self.reference_training_usd))

    @property
    def max_training_cost_usd(self) -> float:
        """The largest MaxTrainingCostUSD an execution may pass: limits.max_training_cost_usd, else
        limits.max_cost_multiple x the reference estimate, rounded up to the dollar."""
        if self.limits.max_training_cost_usd is not None:
            return self.limits.max_training_cost_usd
        return float(math.ceil(self.limits.max_cost_multiple * self.reference_training_usd))

    def _production_problems(self) -> list[str]:
        """What a production environment must hold: the manual approval gate and its F1 floor."""
        if self.env_name == "prod" and not self.production:
            return ["the environment named prod must set production=true"]
        if not self.production:
            return []
        problems = []
        if self.registry.allow_approved_registration:
            problems.append(
                "registry.allow_approved_registration=true is not allowed in production: every model there waits "
                "for a person's approval"
            )
        if self.evaluation.min_f1_threshold <= 0:
            problems.append(
                "production needs evaluation.min_f1_threshold > 0: otherwise F1Threshold=0 registers any model"
            )
        if self.removal_policy != "retain":
            problems.append("production needs removal_policy=retain: its data and models outlive the stacks")
        if self.evaluation.benchmark is None:
            problems.append(
                "production needs evaluation.benchmark: without it the F1 gate scores the uploader's own validation "
                "split; run `make stage-benchmark BENCHMARK=<dir> NAME=<name> ENV=<env>` and pin what it prints"
            )
        return problems

    def _benchmark_problems(self) -> list[str]:
        """A pinned benchmark names label names exactly when the pipeline's task needs them."""
        pinned, facts = self.evaluation.benchmark, self.task_facts
        if pinned is None or (pinned.label_names is not None) == facts.USES_LABEL_NAMES:
            return []
        if pinned.label_names is None:
            return [
                f"evaluation.benchmark.label_names: the {self.task} benchmark needs its label names in index order, "
                "as `make stage-benchmark` prints them"
            ]
        return [f"evaluation.benchmark.label_names: {self.task} has no labels; remove them"]

    def _job_instance_type_problems(self) -> list[str]:
        """Every configured type is in the facts table and valid for its kind of job."""
        training, processing = self.training, self.processing
        checks = [
            ("training.instance_type", training.instance_type, "training"),
            *(("training.allowed_instance_types", name, "training") for name in training.allowed_instance_types or ()),
            ("processing.preprocess_instance_type", processing.preprocess_instance_type, "processing"),
        ]
        problems = []
        for key, name, job in checks:
            try:
                facts = instance_type(name)
            except KeyError as err:
                problems.append(f"{key}: {err.args[0]}")
                continue
            if not getattr(facts, job):
                valid = names_where(lambda row, job=job: getattr(row, job))
                problems.append(f"{key}: SageMaker does not offer {name} for {job} jobs; use one of {', '.join(valid)}")
        if not problems:
            preprocess = instance_type(processing.preprocess_instance_type)
            if preprocess.has_local_storage and processing.volume_size_gb > preprocess.local_nvme_gb:
                problems.append(_volume_too_large("processing.volume_size_gb", processing.volume_size_gb, preprocess))
        allowed = training.allowed_instance_types
        if allowed is not None and training.instance_type not in allowed:
            problems.append(
                f"training.allowed_instance_types must include training.instance_type ({training.instance_type})"
            )
        return problems

    def _training_type_problems(self, name: str) -> list[str]:
        """The rules FineTune must pass on `name` (checked for every allowed training type)."""
        training, hps = self.training, self.hyperparameters
        if name not in INSTANCE_TYPES:
            return []  # reported by _job_instance_type_problems
        facts = instance_type(name)
        problems = []
        if training.distribution == "smddp" and not facts.smddp:
            problems.append(
                f"training.distribution=smddp does not run on {name}; SMDDP supports "
                f"{', '.join(names_where(lambda row: row.smddp))}. Use one of those or training.distribution=torchrun"
            )
        if training.instance_count > 1 and not facts.efa:
            problems.append(
                f"training.instance_count={training.instance_count} on {name}: multi-node data parallel needs an "
                f"EFA-capable instance type ({', '.join(names_where(lambda row: row.efa))}); use one of those or "
                "set training.instance_count=1"
            )
        if (cost_problem := _cost_estimate_problem(name, training_usd_per_hour(self, name))) is not None:
            problems.append(cost_problem)
        if hps.precision == "bf16" and not facts.bf16:
            problems.append(
                f"hyperparameters.precision=bf16 is not supported by the GPUs of {name}; use "
                "hyperparameters.precision=fp16"
            )
        return problems

    def _placement_problems(self) -> list[str]:
        zone, network = self.training.availability_zone, self.network
        problems = []
        if self.region and any(not name.startswith(self.region) for name in network.zones):
            problems.append(f"network zones {list(network.zones)} must be in region {self.region}")
        if zone is None:
            return problems
        if not network.zones:
            problems.append(
                "training.availability_zone needs the zones to be known at synth: set network.availability_zones "
                "(mode=create) or network.existing_availability_zones (mode=existing)"
            )
        elif zone not in network.zones:
            problems.append(
                f"training.availability_zone {zone} is not one of the network's zones {list(network.zones)}"
            )
        return problems

    @property
    def training_instance_types(self) -> tuple[str, ...]:
        """What the TrainingInstanceType parameter accepts: the allowed list, or the configured type plus the
        default candidates that pass every rule for these settings."""
        if self.training.allowed_instance_types is not None:
            return self.training.allowed_instance_types
        candidates = (name for name in DEFAULT_TRAINING_CANDIDATES if name != self.training.instance_type)
        passing = [name for name in candidates if not self._training_type_problems(name)]
        return (self.training.instance_type, *passing)

    @property
    def training_subnet_index(self) -> int:
        """Which job subnet (in subnet order) the training nodes share."""
        zone = self.training.availability_zone
        return self.network.zones.index(zone) if zone else 0

    def training_subnets(self, subnet_ids: Sequence[str]) -> list[str]:
        """Of the job subnets (in subnet order), the one every training node shares; none outside a VPC. The
        definition's training job and the pipeline role's condition on it (sagemaker:VpcSubnets) both use it."""
        return [subnet_ids[self.training_subnet_index]] if subnet_ids else []

    @property
    def layout(self) -> ArtifactLayout:
        """Artifact-bucket prefixes of this pipeline (its own, ArtifactLayout.of_pipeline), with the configured
        checkpoint prefix."""
        return ArtifactLayout.of_pipeline(
            self.task_facts.RESOURCE_INFIX, self.training.checkpoint_prefix or ArtifactLayout().checkpoints
        )

    @property
    def benchmark_prefix(self) -> str | None:
        """The pinned benchmark's folder in the artifacts bucket, benchmarks/<name>/<version>/ (None without one)."""
        pinned = self.evaluation.benchmark
        return None if pinned is None else benchmark_files.prefix(pinned.name, pinned.version)

    def stack_name(self, purpose: StackPurpose) -> str:
        """The CloudFormation stack of `purpose` (stacks/app_builder.py creates them, the tools look them up); the
        pipeline stack's is its pipeline's (pipeline_prefix)."""
        return f"{self.pipeline_prefix if purpose == 'pipeline' else self.name_prefix}-{purpose}"

    @property
    def log_group_root(self) -> str:
        """The folder every log group of the project is named under (`/<name_prefix>/`): the project key's policy
        lets CloudWatch Logs use the key for these log groups only."""
        return f"/{self.name_prefix}/"

    @property
    def function_log_folder(self) -> str:
        """The folder, under log_group_root, of this pipeline's Lambda functions' log groups."""
        return FUNCTION_LOG_FOLDER + self.task_facts.RESOURCE_INFIX

    def function_log_group(self, function: str) -> str:
        """The log group of the pipeline's Lambda function `function` (its construct id: the pipeline step it serves,
        e.g. ClaimManifest, or NotifyTopic); the stacks name it, `make runs` and `make logs` read it."""
        return f"{self.log_group_root}{self.function_log_folder}/{function}"

    def bucket_name(self, purpose: BucketPurpose, account: str, region: str) -> str:
        """Deterministic bucket names, so IAM policies, the pipeline definition and the upload tools can
        name a bucket without cross-stack lookups. `account`/`region` are CloudFormation placeholders at
        synth time and real values elsewhere."""
        return f"{self.name_prefix}-{purpose}-{account}-{region}"

    def base_model_uri(self, artifacts_bucket: str) -> str:
        """The pipeline's default BaseModelUri: the configured S3 folder, else where `make stage-model` copies
        the configured base model."""
        return (
            self.model.base_model_s3_uri
            or f"s3://{artifacts_bucket}/{self.layout.base_models}/{self.model.base_model}/"
        )

    def record_model_role_name(self, region: str) -> str:
        """RecordModel's function role, named so that the data stack's bucket policy can let it alone write the
        artifacts bucket's registry/ prefix without an export (IAM role names are per account: the region keeps
        two regions' deployments apart; checked against IAM's 64 characters with the longest region name)."""
        return f"{self.pipeline_prefix}-record-model-{region}"

    @property
    def model_package_group_name(self) -> str:
        """<prefix>-<the task's RESOURCE_NAME>-models (question answering's stays <prefix>-qa-models); pattern and
        length checked by pipeline_steps/aws_rules.py."""
        return f"{self.name_prefix}-{self.task_facts.RESOURCE_NAME}-models"

    @property
    def pipeline_name(self) -> str:
        """<prefix>-<the task's RESOURCE_NAME>-fine-tuning (question answering's stays <prefix>-qa-fine-tuning)."""
        return f"{self.name_prefix}-{self.task_facts.RESOURCE_NAME}-fine-tuning"

    @property
    def notification_topic_name(self) -> str:
        """Fixed, so the key policy (data stack) can name the topic of the pipeline stack without an export."""
        return f"{self.pipeline_prefix}-notifications"

    @property
    def trigger_dead_letter_queue_name(self) -> str:
        """Fixed, like the topic's name: the key policy names the queue."""
        return f"{self.pipeline_prefix}-trigger-dead-letters"

    @property
    def training_image(self) -> TrainingImage:
        """The backend's newest image, unless an allowed training type is Volta (ml.p3dn.24xlarge): then the
        newest one whose CUDA build still has Volta kernels."""
        image = DEFAULT_TRAINING_IMAGES[self.training.distribution]
        volta = any(
            name in INSTANCE_TYPES and instance_type(name).gpu_architecture == "volta"
            for name in self.training_instance_types
        )
        return VOLTA_TRAINING_IMAGE if volta and not image.has_volta_kernels else image

    @property
    def mlflow_server_name(self) -> str:
        """The managed MLflow tracking server's name (tracking.managed_server)."""
        return f"{self.pipeline_prefix}-mlflow"

    @property
    def experiment_name(self) -> str:
        """The MLflow experiment that holds this environment's executions."""
        return self.tracking.experiment_name or self.pipeline_name

    @property
    def processing_image_repository(self) -> str:
        """`repository:tag` of ValidateAndTokenize's CPU image in the deep-learning-containers registry."""
        return DEFAULT_PROCESSING_IMAGE

    @property
    def training_image_repository(self) -> str:
        """`repository:tag` of the training image in the deep-learning-containers registry."""
        return self.training_image.repository

    @property
    def training_framework_versions(self) -> tuple[str, str, str]:
        """(transformers, PyTorch, Python) of the training image, which the SageMaker SDK wants beside its URI."""
        return self.training_image.framework_versions

    @property
    def inference_image_repository(self) -> str:
        """`repository:tag` of the image that serves what the training image saves."""
        return self.training_image.inference_repository


def _volume_too_large(key: str, size_gb: int, facts: InstanceType) -> str:
    # API_ProcessingClusterConfig: on types with local storage "You can't request a VolumeSizeInGB greater
    # than the total size of the local instance storage".
    return (
        f"{key}={size_gb} exceeds the {facts.local_nvme_gb} GB of local NVMe storage of {facts.name}, which "
        f"SageMaker uses instead of EBS; set {key} <= {facts.local_nvme_gb}"
    )


def _cost_estimate_problem(name: str, usd_per_hour: float | None) -> str | None:
    """Why the cost guard (MaxTrainingCostUSD) could not price training on `name` at `usd_per_hour`, or None."""
    if usd_per_hour is None:
        return (
            f"{name} has no list price in config/costs.py, so the cost guard cannot price a run on it: add its "
            "SageMaker training price (with source and date), set training.usd_per_hour (your price, when it is "
            "training.instance_type), or leave it out of training.allowed_instance_types"
        )
    try:
        hardware_facts(name)
    except KeyError as err:
        return f"{err.args[0]} (the cost guard, MaxTrainingCostUSD, needs it)"
    return None


def _deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`base` with `overrides` applied: sections merged key by key, anything else replaced."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _problems(err: ValidationError) -> list[str]:
    """ ".<dotted key>: <message>" (or ": <message>" for a rule across keys) for each problem `err` holds."""
    found = []
    for error in err.errors():
        where = "".join(f".{part}" for part in error["loc"])
        if error["type"] == "extra_forbidden":
            found.append(f"{where}: unknown key (check the spelling against config/settings.py)")
        else:
            found += [f"{where}: {line}" for line in error["msg"].removeprefix("Value error, ").split("\n  - ")]
    return found
