"""The settings schema: one pydantic model per concern, cross-field rules on the root.

Every model forbids unknown keys, so a typo in `cdk.json` or `-c key=value` fails at synth instead of
being silently ignored.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from config.layout import ArtifactLayout

# SageMaker distributed data parallel (SMDDP) runs only on these instance types.
SMDDP_INSTANCE_TYPES = frozenset({"ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p3dn.24xlarge"})

# Training instance types with Elastic Fabric Adapter, which multi-node data parallel needs to be
# worth paying for (without it, gradient all-reduce crawls over plain TCP).
EFA_INSTANCE_TYPES = frozenset(
    {
        "ml.p3dn.24xlarge",
        "ml.p4d.24xlarge",
        "ml.p4de.24xlarge",
        "ml.p5.48xlarge",
        "ml.p5e.48xlarge",
        "ml.p5en.48xlarge",
        "ml.g5.48xlarge",
        "ml.g6e.48xlarge",
        "ml.trn1.32xlarge",
        "ml.trn1n.32xlarge",
    }
)

# GPUs without bfloat16 support (Volta and older).
NO_BF16_INSTANCE_PREFIXES = ("ml.p3.", "ml.p3dn.", "ml.p2.", "ml.g4dn.")

# SageMaker's own upper bound for MaxRuntimeInSeconds / MaxWaitTimeInSeconds (28 days).
MAX_JOB_SECONDS = 28 * 24 * 3600

DLC_REGISTRY_ACCOUNT = "763104351884"
# Hugging Face training images, per distribution backend. SMDDP ships only up to PyTorch 2.5.1.
DEFAULT_TRAINING_IMAGES = {
    "torchrun": "huggingface-pytorch-training:2.9.0-transformers5.3.0-gpu-py312-cu130-ubuntu22.04",
    "smddp": "huggingface-pytorch-training:2.5.1-transformers4.49.0-gpu-py311-cu124-ubuntu22.04",
}
# (transformers, PyTorch, Python) of those images, which the SageMaker SDK wants alongside an image URI.
TRAINING_FRAMEWORK_VERSIONS = {"torchrun": ("5.3.0", "2.9.0", "py312"), "smddp": ("4.49.0", "2.5.1", "py311")}
DEFAULT_INFERENCE_IMAGE = "huggingface-pytorch-inference:2.6.0-transformers4.49.0-gpu-py312-cu124-ubuntu22.04"

INSTANCE_TYPE_PATTERN = r"^ml\.[a-z0-9-]+\.[0-9]*x?large$"


class StrictModel(BaseModel):
    """Base for every settings section: immutable, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NetworkSettings(StrictModel):
    """Where the jobs run: a VPC created here, an existing one, or SageMaker's own network."""

    mode: Literal["create", "existing", "none"] = "create"
    max_azs: int = Field(2, ge=1, le=6)
    existing_vpc_id: str | None = Field(None, pattern=r"^vpc-[0-9a-f]{8,17}$")
    existing_subnet_ids: tuple[str, ...] = ()
    existing_availability_zones: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _existing_vpc_is_complete(self) -> NetworkSettings:
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

    base_model: str = Field("bert-large-uncased-whole-word-masking", min_length=1)
    base_model_s3_uri: str | None = Field(
        None,
        pattern=r"^s3://[a-z0-9.-]{3,63}/.+/$",
        description="Weights + tokenizer staged in S3 (a folder URI ending in '/'). Default: "
        "s3://<artifacts bucket>/base-models/<base_model>/, filled by `make stage-model`.",
    )


class HyperParameters(StrictModel):
    """What the training script receives (names match its command-line flags)."""

    epochs: float = Field(2.0, gt=0)
    learning_rate: float = Field(3e-5, gt=0, lt=1)
    per_device_train_batch_size: int = Field(8, gt=0)
    per_device_eval_batch_size: int = Field(32, gt=0)
    gradient_accumulation_steps: int = Field(1, gt=0)
    max_seq_length: int = Field(384, ge=32, le=4096)
    doc_stride: int = Field(128, gt=0)
    precision: Literal["bf16", "fp16", "no"] = "bf16"
    warmup_ratio: float = Field(0.1, ge=0, lt=1)
    weight_decay: float = Field(0.01, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    seed: int = 42
    logging_steps: int = Field(50, gt=0)
    # Wall-clock interval: 15 min keeps BERT-large checkpoints (4 GB, 24 s measured) under 3 % of training time
    # (bench/RESULTS.md section 6); a step interval (0: off) can be added.
    checkpoint_minutes: float = Field(15.0, ge=0)
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

    instance_type: str = Field("ml.p4d.24xlarge", pattern=INSTANCE_TYPE_PATTERN)
    instance_count: int = Field(2, gt=0, le=64)
    distribution: Literal["torchrun", "smddp"] = "torchrun"
    use_spot: bool = True
    max_run_seconds: int = Field(24 * 3600, gt=0, le=MAX_JOB_SECONDS)
    max_wait_seconds: int = Field(36 * 3600, gt=0, le=MAX_JOB_SECONDS)
    checkpoint_prefix: str = Field(ArtifactLayout().checkpoints, pattern=r"^([a-z0-9][a-z0-9._-]*)?$")
    volume_size_gb: int = Field(200, gt=0, le=16384)
    image_uri: str | None = Field(None, min_length=1, description="Overrides the backend's default image.")
    encrypt_inter_container_traffic: bool = True
    retry_attempts: int = Field(3, ge=0, le=20)


class ProcessingSettings(StrictModel):
    """The CPU preprocessing and the evaluation jobs."""

    preprocess_instance_type: str = Field("ml.m5.4xlarge", pattern=INSTANCE_TYPE_PATTERN)
    evaluate_instance_type: str = Field("ml.g5.2xlarge", pattern=INSTANCE_TYPE_PATTERN)
    volume_size_gb: int = Field(50, gt=0, le=16384)
    max_runtime_seconds: int = Field(4 * 3600, gt=0, le=5 * 24 * 3600)


class EvaluationSettings(StrictModel):
    """The quality gate before registration."""

    f1_threshold: float = Field(88.0, ge=0, le=100)


class RegistrySettings(StrictModel):
    """How trained models are registered."""

    approval_status: Literal["PendingManualApproval", "Approved", "Rejected"] = "PendingManualApproval"
    inference_image_uri: str | None = Field(None, min_length=1)
    inference_instance_types: tuple[str, ...] = ("ml.g5.xlarge", "ml.g5.2xlarge")


class Settings(StrictModel):
    """Everything one deployment needs, validated once at synth."""

    env_name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,15}$")
    name_prefix: str = Field("hf-qa", pattern=r"^[a-z][a-z0-9-]{1,19}$")
    account: str | None = Field(None, pattern=r"^[0-9]{12}$")
    region: str | None = Field(None, pattern=r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$")
    removal_policy: Literal["destroy", "retain"] = "retain"
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

    @model_validator(mode="after")
    def _cross_field_rules(self) -> Settings:
        training, hps = self.training, self.hyperparameters
        if training.distribution == "smddp" and training.instance_type not in SMDDP_INSTANCE_TYPES:
            raise ValueError(
                f"training.distribution=smddp does not run on {training.instance_type}; SMDDP supports "
                f"{', '.join(sorted(SMDDP_INSTANCE_TYPES))}. Use one of those or training.distribution=torchrun"
            )
        if training.instance_count > 1 and training.instance_type not in EFA_INSTANCE_TYPES:
            raise ValueError(
                f"training.instance_count={training.instance_count} on {training.instance_type}: multi-node "
                f"data parallel needs an EFA-capable instance type ({', '.join(sorted(EFA_INSTANCE_TYPES))}); "
                "use one of those or set training.instance_count=1"
            )
        if training.use_spot and training.max_wait_seconds < training.max_run_seconds:
            raise ValueError(
                f"training.max_wait_seconds ({training.max_wait_seconds}) must be >= training.max_run_seconds "
                f"({training.max_run_seconds}) with spot training: it is the run time plus the time spent "
                "waiting for spot capacity"
            )
        if training.use_spot and not training.checkpoint_prefix:
            raise ValueError(
                "training.use_spot=true needs training.checkpoint_prefix: without checkpoints every spot "
                "interruption restarts training from scratch"
            )
        if hps.precision == "bf16" and training.instance_type.startswith(NO_BF16_INSTANCE_PREFIXES):
            raise ValueError(
                f"hyperparameters.precision=bf16 is not supported by the GPUs of {training.instance_type}; "
                "use hyperparameters.precision=fp16"
            )
        return self

    @property
    def layout(self) -> ArtifactLayout:
        """Artifact-bucket prefixes, with the configured checkpoint prefix."""
        return ArtifactLayout(checkpoints=self.training.checkpoint_prefix or ArtifactLayout().checkpoints)

    def bucket_name(self, purpose: str, account: str, region: str) -> str:
        """Deterministic bucket names, so IAM policies, the pipeline definition and the upload tools can
        name a bucket without cross-stack lookups. `account`/`region` are CloudFormation placeholders at
        synth time and real values elsewhere."""
        return f"{self.name_prefix}-{purpose}-{account}-{region}"

    @property
    def model_package_group_name(self) -> str:
        return f"{self.name_prefix}-qa-models"

    @property
    def pipeline_name(self) -> str:
        return f"{self.name_prefix}-qa-fine-tuning"

    @property
    def training_image_repository(self) -> str:
        """`repository:tag` of the training image in the deep-learning-containers registry."""
        return DEFAULT_TRAINING_IMAGES[self.training.distribution]
