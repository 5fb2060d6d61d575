"""FineTune: multi-node data-parallel fine-tuning with managed spot training and S3-synced checkpoints,
then the evaluation of the validation set on the same GPUs (no second cold start), network-isolated.

Under EnableNetworkIsolation the container makes no network calls "except for calls between peers within a
training cluster for distributed training" (NCCL/EFA, SMDDP), and SageMaker itself moves what the job
exchanges with S3: input channels, the model artifact, checkpoints (CheckpointConfig) and TensorBoard output
(TensorBoardOutputConfig) are synced by the platform, and metrics are parsed from the job's log by
MetricDefinitions (API_CreateTrainingJob EnableNetworkIsolation:
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateTrainingJob.html; checkpoints:
https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html; metrics:
https://docs.aws.amazon.com/sagemaker/latest/dg/training-metrics.html). The SDK ships the source bundle as a
`code` input channel when isolation is on, since the toolkit cannot download it itself.
"""

from __future__ import annotations

import json
from typing import Any, cast

from qa.outputs import (
    BENCHMARK_CHANNEL,
    BENCHMARK_DATA_CHANNEL,
    BENCHMARK_OUTPUT,
    BENCHMARK_PREFIX,
    CHECKPOINT_DIR,
    CLAIM_INPUT_URI,
    CODE_CHANNEL,
    DATA_CHANNEL,
    EVALUATION_PREFIX,
    MODEL_CHANNEL,
    TENSORBOARD_DIR,
    TRAIN_CHANNEL,
    TRAIN_SPLIT,
    TRAINING_CHANNELS_DIR,
    TRAINING_METRIC_REGEXES,
    VALIDATION_CHANNEL,
    VALIDATION_SPLIT,
    metric_regexes,
)
from sagemaker.debugger import TensorBoardOutputConfig
from sagemaker.huggingface import HuggingFace
from sagemaker.inputs import TrainingInput
from sagemaker.workflow.lambda_step import LambdaStep
from sagemaker.workflow.steps import ProcessingStep, TrainingStep

from config.costs import compile_hyperparameter
from pipeline_steps import names
from pipeline_steps.steps import claim
from pipeline_steps.steps.context import (
    VERIFY_AND_START,
    BuildContext,
    bundle_path,
    job_retry_policies,
    verified_entrypoint,
)


def metric_definitions(ctx: BuildContext) -> list[dict[str, str]]:
    """One regex per value of the line train.py prints every logging interval, then one per metric of the task's
    line after evaluating (FinalMetricDataList['eval:<GATE_METRIC>'] feeds CheckF1) and, with evaluation.benchmark,
    of the benchmark's line (FinalMetricDataList['benchmark:<GATE_METRIC>'], the gate then). Each Name of at most
    255 and Regex of at most 500 characters, at most 40 definitions (API_MetricDefinition,
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_MetricDefinition.html; API_AlgorithmSpecification):
    aws_rules checks the definition against botocore's limits of these shapes."""
    metrics = ctx.settings.task_facts.METRICS
    benchmark = metric_regexes(BENCHMARK_PREFIX, metrics) if ctx.settings.evaluation.benchmark is not None else {}
    regexes = {**TRAINING_METRIC_REGEXES, **metric_regexes(EVALUATION_PREFIX, metrics), **benchmark}
    return [{"Name": name, "Regex": regex} for name, regex in regexes.items()]


DEADLINE_RESERVE_SECONDS = 600
DEADLINE_RESERVE_SHARE = 0.05
DISTRIBUTIONS: dict[str, dict[str, Any]] = {
    "torchrun": {"torch_distributed": {"enabled": True}},
    "smddp": {"smdistributed": {"dataparallel": {"enabled": True}}},
}


# What the training images run: their ENTRYPOINT (`bash -m start_with_right_hostname.sh`, which sets up CUDA
# compatibility and the host name that MPI and NCCL resolve) with SageMaker's `train` argument
# (aws/deep-learning-containers, pytorch/training/docker/build_artifacts/start_with_right_hostname.sh; the Hugging Face
# training images are built FROM those PyTorch images). A custom training image must start the same way.
DLC_TRAINING_START = ("bash", "-m", "start_with_right_hostname.sh", "train")
CODE_CHANNEL_DIR = (
    f"{TRAINING_CHANNELS_DIR}/{CODE_CHANNEL}"  # where the SDK's `code` channel lands under network isolation
)


class IsolatedTrainingStep(TrainingStep):
    """A TrainingStep whose source bundle arrives through the `code` channel. The SDK points the toolkit at
    `<code channel>/sourcedir.tar.gz`, the name its own uploads get; the bundle here is the stacks' asset, so the
    toolkit is pointed at that object's file, the one the entry command verified."""

    def __init__(self, *args: Any, bundle_path: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bundle_path = bundle_path

    @property
    def arguments(self) -> dict[str, Any]:
        request = cast(dict[str, Any], super().arguments)  # the SDK types it as dict | list; a job's is a dict
        request["HyperParameters"]["sagemaker_submit_directory"] = json.dumps(self.bundle_path)
        return request


def hyperparameters(ctx: BuildContext) -> dict[str, Any]:
    """Exactly the flags train.py's parser accepts (checked by a test against the parser itself)."""
    return {**_training_hyperparameters(ctx), **(tokenize_hyperparameters(ctx) if tokenizes(ctx) else {})}


def tokenizes(ctx: BuildContext) -> bool:
    """processing.tokenize_in = "fine_tune": FineTune validates and tokenizes the pinned dataset itself."""
    return ctx.settings.tokenizes_in_fine_tune


def tokenize_hyperparameters(ctx: BuildContext) -> dict[str, Any]:
    """train.py's tokenization flags: ValidateAndTokenize's arguments (pipeline_steps/steps/preprocess.py)."""
    pinned = ctx.settings.evaluation.benchmark
    return {
        "tokenize_data": "true",
        "max_seq_length": ctx.params.max_seq_length,
        "doc_stride": ctx.params.doc_stride,
        "max_windows_per_example": ctx.settings.processing.max_windows_per_example,
        "skip_invalid": ctx.params.skip_invalid_records,
        "manifest_version": ctx.params.manifest_version_id,
        **({"benchmark_sha256": pinned.manifest_sha256} if pinned is not None else {}),
    }


def _training_hyperparameters(ctx: BuildContext) -> dict[str, Any]:
    hps = ctx.settings.hyperparameters
    return {
        "task": ctx.settings.task,
        "epochs": ctx.params.epochs,
        "learning_rate": ctx.params.learning_rate,
        "per_device_train_batch_size": ctx.params.per_device_train_batch_size,
        "eval_batch_size": hps.per_device_eval_batch_size,
        "gradient_accumulation_steps": hps.gradient_accumulation_steps,
        "precision": hps.precision,
        "warmup_ratio": ctx.params.warmup_ratio,  # "auto": train.py picks the recipe's (GPU) or 0.1 (CPU)
        "evaluation_strategy": ctx.params.evaluation_strategy,
        "evaluation_steps": ctx.params.evaluation_steps,
        "early_stopping_patience": ctx.params.early_stopping_patience,
        "stop_after_seconds": stop_after_seconds(ctx.settings.training.max_run_seconds),
        "compile": compile_hyperparameter(ctx.settings),
        "weight_decay": hps.weight_decay,
        "max_grad_norm": hps.max_grad_norm,
        "seed": hps.seed,
        "logging_steps": hps.logging_steps,
        "checkpoint_minutes": hps.checkpoint_minutes,
        "checkpoint_steps": hps.checkpoint_steps,
        "keep_checkpoints": hps.keep_checkpoints,
        "nccl_debug": "true" if hps.nccl_debug else "false",  # train.py takes explicit booleans
    }


def stop_after_seconds(max_run_seconds: int) -> int:
    """When train.py ends training (--stop_after_seconds) so that the final evaluation, the save and SageMaker's
    upload of the model finish inside MaxRuntimeInSeconds: at MaxRuntime SageMaker sends SIGTERM and stops the job
    120 s later (API_StoppingCondition: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StoppingCondition.html),
    and a SIGTERM ends train.py without a model. MaxRuntime is training.max_run_seconds, fixed at deploy: the SDK
    takes max_run as a number, not a pipeline parameter. The reserve: DEADLINE_RESERVE_SHARE of it, at least
    DEADLINE_RESERVE_SECONDS (assumptions, not measured for every size: the demo's evaluation and save take
    seconds, BERT-large's on 10,570 SQuAD examples about a minute on one p4d)."""
    return max(1, max_run_seconds - max(DEADLINE_RESERVE_SECONDS, round(DEADLINE_RESERVE_SHARE * max_run_seconds)))


def feature_channels(ctx: BuildContext, preprocess: ProcessingStep) -> dict[str, TrainingInput]:
    """processing.tokenize_in = "cpu_job": ValidateAndTokenize's features (and the benchmark's)."""
    outputs = preprocess.properties.ProcessingOutputConfig.Outputs
    # The operator's benchmark, tokenized by ValidateAndTokenize from the pinned manifest: the gate.
    benchmark_channel = {BENCHMARK_CHANNEL: TrainingInput(s3_data=outputs[BENCHMARK_OUTPUT].S3Output.S3Uri)}
    return {
        TRAIN_CHANNEL: TrainingInput(s3_data=outputs[TRAIN_SPLIT].S3Output.S3Uri),
        # Evaluated after training (SM_CHANNEL_VALIDATION): features and examples of preprocess.py.
        VALIDATION_CHANNEL: TrainingInput(s3_data=outputs[VALIDATION_SPLIT].S3Output.S3Uri),
        **(benchmark_channel if ctx.settings.evaluation.benchmark is not None else {}),
    }


def data_channels(ctx: BuildContext, claim_step: LambdaStep) -> dict[str, TrainingInput]:
    """processing.tokenize_in = "fine_tune": the pinned dataset (ClaimManifest's InputUri: its files and pinned
    manifest) and, with evaluation.benchmark, the benchmark's folder as staged, which train.py verifies against the
    pinned SHA-256 (an S3DataSource names no object version: API_S3DataSource,
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_S3DataSource.html). SageMaker downloads every
    channel to every node (S3DataDistributionType FullyReplicated, the default), so each node tokenizes its own copy."""
    pinned, prefix = ctx.settings.evaluation.benchmark, ctx.settings.benchmark_prefix
    benchmark = (
        {}
        if pinned is None or prefix is None
        else {BENCHMARK_DATA_CHANNEL: TrainingInput(s3_data=f"s3://{ctx.artifacts_bucket}/{prefix}")}
    )
    return {DATA_CHANNEL: TrainingInput(s3_data=claim.output(claim_step, CLAIM_INPUT_URI)), **benchmark}


def build(ctx: BuildContext, inputs: dict[str, TrainingInput]) -> TrainingStep:
    """FineTune, reading `inputs` (feature_channels or data_channels) and the base model."""
    training = ctx.settings.training
    transformers_version, pytorch_version, py_version = ctx.settings.training_framework_versions
    estimator = HuggingFace(
        entry_point="train.py",
        transformers_version=transformers_version,
        pytorch_version=pytorch_version,
        py_version=py_version,
        source_dir=ctx.values.code_uri,
        image_uri=ctx.training_image,
        role=ctx.values.job_role_arn,
        instance_type=ctx.params.training_instance_type,
        instance_count=ctx.params.training_instance_count,
        distribution=DISTRIBUTIONS[training.distribution],
        hyperparameters=hyperparameters(ctx),
        use_spot_instances=training.use_spot,
        max_run=training.max_run_seconds,
        max_wait=training.max_wait_seconds if training.use_spot else None,
        # ResourceConfig.KeepAlivePeriodInSeconds; omitted when 0 (off), as before the setting existed.
        keep_alive_period_in_seconds=training.keep_alive_seconds or None,
        # Unique per execution (a new execution never resumes another's), stable across step retries.
        checkpoint_s3_uri=ctx.execution_uri(ctx.settings.layout.checkpoints) if training.checkpoints_enabled else None,
        checkpoint_local_path=CHECKPOINT_DIR if training.checkpoints_enabled else None,
        volume_size=training.volume_size_gb,
        # The instance type is a pipeline parameter: the key is omitted when any allowed type has local NVMe.
        volume_kms_key=ctx.volume_kms_key(*ctx.settings.training_instance_types),
        output_kms_key=ctx.values.kms_key_arn,
        output_path=f"s3://{ctx.artifacts_bucket}/{ctx.settings.layout.models}",
        code_location=f"s3://{ctx.artifacts_bucket}/{ctx.settings.layout.pipeline_code}",
        # All nodes in one subnet (one zone): EFA traffic does not cross subnets, and cross-zone traffic is
        # billed per GB (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html#efa-limits).
        subnets=ctx.training_subnet_ids or None,
        security_group_ids=[ctx.values.security_group_id] if ctx.values.security_group_id else None,
        encrypt_inter_container_traffic=training.encrypt_inter_container_traffic,
        metric_definitions=metric_definitions(ctx),
        enable_network_isolation=True,
        tensorboard_output_config=TensorBoardOutputConfig(
            s3_output_path=ctx.execution_uri(ctx.settings.layout.tensorboard),
            container_local_output_path=TENSORBOARD_DIR,
        ),
        environment={"PYTHONUNBUFFERED": "1", "NCCL_DEBUG": "WARN", "TOKENIZERS_PARALLELISM": "false"},
        disable_profiler=True,
        debugger_hook_config=False,
        base_job_name="qa-train",
        # The image's toolkit extracts the bundle and runs train.py from it: the check must come before the toolkit
        # starts, so it is the container's entry point, which then starts the image's own (How Amazon SageMaker Runs
        # Your Training Image: https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-dockerfile.html).
        container_entry_point=list(verified_entrypoint(VERIFY_AND_START, ctx.values, CODE_CHANNEL_DIR)),
        container_arguments=list(DLC_TRAINING_START),
        sagemaker_session=ctx.session,
    )
    benchmarks = {BENCHMARK_CHANNEL, BENCHMARK_DATA_CHANNEL}
    step_args = estimator.fit(
        inputs={
            **{name: channel for name, channel in inputs.items() if name not in benchmarks},
            # Weights come from S3: a private VPC has no route to a model hub.
            MODEL_CHANNEL: TrainingInput(s3_data=ctx.params.base_model_uri),
            **{name: channel for name, channel in inputs.items() if name in benchmarks},  # the benchmark last
        }
    )
    return IsolatedTrainingStep(
        name=names.TRAIN_STEP,
        bundle_path=bundle_path(ctx.values, CODE_CHANNEL_DIR),
        step_args=step_args,
        description="Data-parallel fine-tuning (spot, checkpointed, resumable), then "
        f"{'/'.join(ctx.settings.task_facts.METRICS)} on the validation set",
        retry_policies=job_retry_policies(training.retry_attempts),
    )
