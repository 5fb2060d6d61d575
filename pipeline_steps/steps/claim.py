"""ClaimManifest, a Lambda step (no instance): check the parameters against the settings' limits, claim the
manifest version and its content for this execution (S3 conditional writes), check the execution limits, pin its
data. Then ParametersValid (a bad parameter fails here, before any
cost) and FirstDelivery (a duplicate delivery, or a key that is no manifest, ends here, succeeded).

processing.tokenize_in "fine_tune": the claim also validates every record of the pinned data (qa/claim_validation.py)
and estimates its stats.json; DatasetValid, after FirstDelivery, fails a refused dataset with the claim's
DatasetError (DatasetRejected) before any instance starts. "cpu_job": ValidateAndTokenize does both, as before.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from qa.cost import ModelShape
from qa.outputs import (
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
    CLAIM_DATASET_ERROR,
    CLAIM_DUPLICATE,
    CLAIM_IGNORED,
    CLAIM_OUTPUTS,
    CLAIM_PARAMETER_ERROR,
    CLAIM_STATS_URI,
    CLAIM_VALIDATION_OUTPUTS,
    DUPLICATE_NO,
    INPUT_ARTIFACTS_BUCKET,
    INPUT_BASE_MODELS_URI,
    INPUT_BENCHMARK_LABEL_NAMES,
    INPUT_BOUNDS,
    INPUT_CLAIMS_PREFIX,
    INPUT_EXECUTION_ARN,
    INPUT_INPUTS_PREFIX,
    INPUT_MAX_WINDOWS_PER_EXAMPLE,
    INPUT_TASK,
    INPUT_VALIDATE,
)
from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionEquals
from sagemaker.workflow.execution_variables import ExecutionVariables
from sagemaker.workflow.fail_step import FailStep
from sagemaker.workflow.lambda_step import LambdaOutput, LambdaOutputTypeEnum, LambdaStep
from sagemaker.workflow.step_collections import StepCollection
from sagemaker.workflow.steps import Step

from config.costs import KNOWN_SHAPES, gradient_bytes
from config.instance_types import INSTANCE_TYPES
from pipeline_steps import names
from pipeline_steps.steps.context import BuildContext


def validates(ctx: BuildContext) -> bool:
    """Whether the claim validates the dataset (processing.tokenize_in "fine_tune")."""
    return ctx.settings.tokenizes_in_fine_tune


def build(ctx: BuildContext) -> LambdaStep:
    params, settings = ctx.params, ctx.settings
    limits = settings.limits
    bounds = {
        BOUND_MAX_INSTANCE_COUNT: settings.training.max_instance_count,
        BOUND_MIN_F1_THRESHOLD: settings.evaluation.min_f1_threshold,
        BOUND_MAX_EPOCHS: limits.max_epochs,
        BOUND_MAX_LEARNING_RATE: limits.max_learning_rate,
        BOUND_MAX_TRAINING_COST: settings.max_training_cost_usd,
        BOUND_MAX_EXECUTIONS_PER_DAY: limits.max_executions_per_day,
        BOUND_MAX_CONCURRENT_EXECUTIONS: limits.max_concurrent_executions,
        **batch_memory_bounds(ctx),
    }
    # fine_tune mode only: cpu_job's definition stays as it was (no new inputs or outputs).
    validation = {
        INPUT_VALIDATE: "true",
        INPUT_MAX_WINDOWS_PER_EXAMPLE: settings.processing.max_windows_per_example,
        names.SKIP_INVALID_RECORDS: params.skip_invalid_records,
    }
    outputs = [name for name in CLAIM_OUTPUTS if validates(ctx) or name not in CLAIM_VALIDATION_OUTPUTS]
    pinned = settings.evaluation.benchmark
    # Only a benchmark with labels: question answering's definition stays as it was.
    benchmark_labels = (
        {INPUT_BENCHMARK_LABEL_NAMES: json.dumps(list(pinned.label_names))}
        if pinned is not None and pinned.label_names is not None
        else {}
    )
    return LambdaStep(
        name=names.CLAIM_STEP,
        lambda_func=ctx.function(ctx.values.claim_function_arn),
        description="Check the parameters, claim this manifest version (S3 conditional write), pin its data",
        inputs={
            INPUT_EXECUTION_ARN: ExecutionVariables.PIPELINE_EXECUTION_ARN,
            # The pipeline's task: a manifest that names another one is refused (qa/claim_validation.py).
            INPUT_TASK: settings.task,
            names.DATASET_BUCKET: params.dataset_bucket,
            names.MANIFEST_KEY: params.manifest_key,
            names.MANIFEST_VERSION_ID: params.manifest_version_id,
            names.UPLOADED_BY: params.uploaded_by,
            INPUT_ARTIFACTS_BUCKET: ctx.artifacts_bucket,
            INPUT_CLAIMS_PREFIX: settings.layout.claims,
            INPUT_INPUTS_PREFIX: settings.layout.inputs,
            names.EPOCHS: params.epochs,
            names.LEARNING_RATE: params.learning_rate,
            names.TRAINING_INSTANCE_COUNT: params.training_instance_count,
            names.F1_THRESHOLD: params.f1_threshold,
            names.MAX_TRAINING_COST: params.max_training_cost,
            INPUT_BOUNDS: json.dumps(bounds, sort_keys=True),
            names.BASE_MODEL_URI: params.base_model_uri,
            INPUT_BASE_MODELS_URI: f"s3://{ctx.artifacts_bucket}/{settings.layout.base_models}/",
            names.TRAINING_INSTANCE_TYPE: params.training_instance_type,
            # The per-run controls (qa.parameter_rules.CONTROL_PARAMETERS); in fine_tune mode MaxSeqLength and
            # DocStride are also the windowing the claim validates the records with.
            names.PER_DEVICE_TRAIN_BATCH_SIZE: params.per_device_train_batch_size,
            names.MAX_SEQ_LENGTH: params.max_seq_length,
            names.DOC_STRIDE: params.doc_stride,
            names.WARMUP_RATIO: params.warmup_ratio,
            names.EVALUATION_STRATEGY: params.evaluation_strategy,
            names.EVALUATION_STEPS: params.evaluation_steps,
            names.EARLY_STOPPING_PATIENCE: params.early_stopping_patience,
            **(validation if validates(ctx) else {}),
            **benchmark_labels,
        },
        outputs=[LambdaOutput(output_name=name, output_type=LambdaOutputTypeEnum.String) for name in outputs],
    )


def batch_memory_bounds(ctx: BuildContext) -> dict[str, object]:
    """What the claim checks an explicit PerDeviceTrainBatchSize with (qa/memory.py): the GPU memory of each type the
    TrainingInstanceType parameter accepts, and the default base model's shape where it is known offline (None
    otherwise: FineTune then checks the batch against the model's config on its GPU)."""
    settings = ctx.settings
    memory = {}
    for name in settings.training_instance_types:
        facts = INSTANCE_TYPES.get(name)
        if facts is not None and facts.gpu is not None:
            memory[name] = facts.gpu.memory_gb
    shape = KNOWN_SHAPES.get(settings.model.base_model)
    return {
        BOUND_GPU_MEMORY_GIB: memory,
        BOUND_MODEL_SHAPE: asdict(ModelShape.from_config(shape)) if shape is not None else None,
        BOUND_SHAPE_MODEL_URI: settings.base_model_uri(ctx.artifacts_bucket),
        BOUND_ACTIVATION_BYTES: gradient_bytes(settings.hyperparameters.precision),
    }


def output(step: LambdaStep, name: str):
    return step.properties.Outputs[name]


def stats_uri(claim: LambdaStep):
    """The claim's estimated stats.json (fine_tune mode), what EstimateTrainingCost reads."""
    return output(claim, CLAIM_STATS_URI)


def gates(ctx: BuildContext, claim: LambdaStep, then: list[Step | StepCollection]) -> ConditionStep:
    """ParametersValid -> FirstDelivery -> `then` (fine_tune mode: FirstDelivery -> DatasetValid -> `then`)."""
    if validates(ctx):
        then = [
            ConditionStep(
                name=names.DATASET_VALID_STEP,
                conditions=[ConditionEquals(left=output(claim, CLAIM_DATASET_ERROR), right="")],
                if_steps=then,
                # The claim's refusal: the lines ValidateAndTokenize would print, within the 1,024 characters of a
                # Lambda step output (qa.claim_validation.fitted; a Fail step's ErrorMessage allows 3,072).
                else_steps=[FailStep(name=names.DATASET_FAIL_STEP, error_message=output(claim, CLAIM_DATASET_ERROR))],
                description="Stop before any instance starts when the claim refused the dataset",
            )
        ]
    first_delivery = ConditionStep(
        name=names.FIRST_DELIVERY_STEP,
        conditions=[
            ConditionEquals(left=output(claim, CLAIM_DUPLICATE), right=DUPLICATE_NO),
            ConditionEquals(left=output(claim, CLAIM_IGNORED), right=""),
        ],
        if_steps=then,
        # A duplicate delivery, or an event for a key that is no manifest: nothing to do, no failure. The claim
        # step's ClaimedBy output names the execution that owns the dataset version.
        else_steps=[],
        description="Only the execution that claimed this manifest version goes on",
    )
    return ConditionStep(
        name=names.PARAMETERS_STEP,
        conditions=[ConditionEquals(left=output(claim, CLAIM_PARAMETER_ERROR), right="")],
        if_steps=[first_delivery],
        else_steps=[FailStep(name=names.PARAMETERS_FAIL_STEP, error_message=output(claim, CLAIM_PARAMETER_ERROR))],
        description="Stop before anything is billed when a pipeline parameter breaks its rule",
    )
