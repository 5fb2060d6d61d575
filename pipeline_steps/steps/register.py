"""RecordModel (a Lambda step: the trained archive's one version, hashed and copied to the content-addressed
registry/<sha256>/model.tar.gz, and the model-quality report from FineTune's evaluation metrics), then CheckF1:
the task's gate metric (its GATE_METRIC, an F1 for every task so far) >= threshold ? RegisterModel (that copy,
with its metrics and identity) : fail with the numbers."""

from __future__ import annotations

import json
from typing import Any

from qa.outputs import (
    BENCHMARK_PREFIX,
    CLAIM_MANIFEST_SHA256,
    EVALUATION_FILE,
    EVALUATION_PREFIX,
    INPUT_METRICS,
    INPUT_MODEL_ARCHIVE_URI,
    INPUT_REGISTRY_URI,
    INPUT_TASK,
    RECORD_MODEL_SHA256,
    RECORD_MODEL_URI,
    RECORD_MODEL_VERSION_ID,
    RECORD_OUTPUTS,
    RECORD_REPORT_URI,
    SAGEMAKER_PROGRAM_ENV,
    SERVING_PROGRAM,
    metric_name,
)
from sagemaker.huggingface import HuggingFaceModel
from sagemaker.model_metrics import MetricsSource, ModelMetrics
from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionGreaterThanOrEqualTo
from sagemaker.workflow.execution_variables import ExecutionVariables
from sagemaker.workflow.fail_step import FailStep
from sagemaker.workflow.functions import Join
from sagemaker.workflow.lambda_step import LambdaOutput, LambdaOutputTypeEnum, LambdaStep
from sagemaker.workflow.model_step import ModelStep
from sagemaker.workflow.steps import TrainingStep

from pipeline_steps import names
from pipeline_steps.steps import claim
from pipeline_steps.steps.context import BuildContext, service_retry_policies


def metric(train: TrainingStep, name: str):
    """The last value FineTune's metric definitions parsed for `name` (DescribeTrainingJob FinalMetricDataList)."""
    return train.properties.FinalMetricDataList[name].Value


def gated_line(ctx: BuildContext) -> str:
    """The line whose metrics the gate reads: the operator's benchmark, else (dev only: settings refuse production
    without one) the uploader's own validation split."""
    return BENCHMARK_PREFIX if ctx.settings.evaluation.benchmark is not None else EVALUATION_PREFIX


def gate_metric(ctx: BuildContext) -> str:
    """The metric definition CheckF1 compares with F1Threshold: <line>:<the task's GATE_METRIC>."""
    return metric_name(gated_line(ctx), ctx.settings.task_facts.GATE_METRIC)


# How the gate's messages name the line it reads.
GATED_LINE_LABELS = {EVALUATION_PREFIX: "Validation", BENCHMARK_PREFIX: "Benchmark"}


def gate_label(ctx: BuildContext) -> str:
    """How the gate's messages name what it measured: "Validation F1", "Benchmark MACRO_F1" (the task's GATE_METRIC
    in capitals)."""
    return f"{GATED_LINE_LABELS[gated_line(ctx)]} {str(ctx.settings.task_facts.GATE_METRIC).upper()}"


def metrics_json(ctx: BuildContext, train: TrainingStep) -> Join:
    """RecordModel's Metrics input: JSON text {metric: value} of every one of the task's METRICS on the gated line
    (the package's model-quality report), built at run time from FineTune's FinalMetricDataList."""
    line, metrics = gated_line(ctx), ctx.settings.task_facts.METRICS
    values: list[Any] = []
    for index, name in enumerate(metrics):
        values += [f"{'{' if index == 0 else ', '}{json.dumps(name)}: ", metric(train, metric_name(line, name))]
    return Join(on="", values=[*values, "}"])


def gate_metadata(ctx: BuildContext, train: TrainingStep, claim_step: LambdaStep) -> dict[str, Any]:
    """CustomerMetadataProperties of what the gate measured, who uploaded the data and what it was. Every value is
    bounded by construction (API_CreateModelPackage: 1-256 characters of letters, numbers, spaces and `_.:/=+-@`,
    at most 50 entries): the labels are constants, benchmark names and versions follow the dataset name rule (at
    most 100), version ids the settings' pattern, digests are 64 hex digits, UploadedBy is checked by
    ClaimManifest (qa/parameter_rules.py) and a metric is a number; keys name the task's gate metric (names.py)."""
    pinned, gate_metric_name = ctx.settings.evaluation.benchmark, ctx.settings.task_facts.GATE_METRIC
    common = {
        names.MODEL_METADATA_DATASET_MANIFEST_SHA256: claim.output(claim_step, CLAIM_MANIFEST_SHA256),
        names.MODEL_METADATA_UPLOADED_BY: ctx.params.uploaded_by,
    }
    if pinned is None:
        return {names.MODEL_METADATA_GATE: names.GATE_UPLOADER_VALIDATION, **common}
    return {
        names.MODEL_METADATA_GATE: names.GATE_BENCHMARK,
        names.MODEL_METADATA_BENCHMARK_NAME: pinned.name,
        names.MODEL_METADATA_BENCHMARK_VERSION: pinned.version,
        names.MODEL_METADATA_BENCHMARK_MANIFEST_VERSION: pinned.manifest_version_id,
        names.MODEL_METADATA_BENCHMARK_MANIFEST_SHA256: pinned.manifest_sha256,
        names.uploader_validation_key(gate_metric_name): Join(
            on="", values=[metric(train, metric_name(EVALUATION_PREFIX, gate_metric_name))]
        ),
        **common,
    }


def record(ctx: BuildContext, train: TrainingStep) -> LambdaStep:
    return LambdaStep(
        name=names.RECORD_STEP,
        lambda_func=ctx.function(ctx.values.record_function_arn),
        description="Copy the trained archive by version id to registry/<sha256>/; write its model-quality report",
        inputs={
            INPUT_MODEL_ARCHIVE_URI: train.properties.ModelArtifacts.S3ModelArtifacts,
            INPUT_REGISTRY_URI: f"s3://{ctx.artifacts_bucket}/{ctx.settings.layout.registry}/",
            INPUT_TASK: ctx.settings.task,
            # The gated line's scores (gated_line): the package's model-quality report.
            INPUT_METRICS: metrics_json(ctx, train),
            RECORD_REPORT_URI: ctx.execution_uri(ctx.settings.layout.evaluation, EVALUATION_FILE),
        },
        outputs=[LambdaOutput(output_name=name, output_type=LambdaOutputTypeEnum.String) for name in RECORD_OUTPUTS],
    )


def build(ctx: BuildContext, train: TrainingStep, recorded: LambdaStep, claim_step: LambdaStep) -> ConditionStep:
    f1 = metric(train, gate_metric(ctx))
    gate = gate_label(ctx)
    params = ctx.params
    outputs = recorded.properties.Outputs
    model = HuggingFaceModel(
        # RecordModel's registry copy, which only its role can write, never FineTune's models/ key.
        model_data=outputs[RECORD_MODEL_URI],
        image_uri=ctx.inference_image,
        role=ctx.values.job_role_arn,
        # The toolkit's HF_TASK=question-answering needs transformers' question-answering pipeline, which
        # 5.3 removed; it serves training_code/inference.py (shipped in model.tar.gz under code/) instead.
        env={SAGEMAKER_PROGRAM_ENV: SERVING_PROGRAM},
        # Explicit, or the SDK probes S3 for its default bucket.
        code_location=f"s3://{ctx.artifacts_bucket}/{ctx.settings.layout.pipeline_code}",
        sagemaker_session=ctx.session,
    )
    register_args = model.register(
        model_package_group_name=ctx.settings.model_package_group_name,
        approval_status=params.model_approval_status,
        content_types=["application/json"],
        response_types=["application/json"],
        inference_instances=list(ctx.settings.registry.inference_instance_types),
        transform_instances=list(ctx.settings.registry.inference_instance_types),
        model_metrics=ModelMetrics(
            model_statistics=MetricsSource(s3_uri=outputs[RECORD_REPORT_URI], content_type="application/json")
        ),
        # What a later check compares the archive with (API_CreateModelPackage CustomerMetadataProperties).
        customer_metadata_properties={
            names.MODEL_METADATA_ARCHIVE_SHA256: outputs[RECORD_MODEL_SHA256],
            names.MODEL_METADATA_ARCHIVE_VERSION_ID: outputs[RECORD_MODEL_VERSION_ID],
            # The execution whose RecordModel outputs `make verify-model` compares the package with (it checks that
            # this execution's RegisterModel step created the package, so an edited value cannot name another).
            names.MODEL_METADATA_EXECUTION_ARN: ExecutionVariables.PIPELINE_EXECUTION_ARN,
            # CustomerMetadataProperties is a map of strings, values of 1-256 characters
            # (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModelPackage.html). The manifest's
            # bucket and key go in two values, each bounded by construction: a bucket name has at most 63
            # characters (ClaimManifest checks it), a manifest key datasets/<name>/<version>/manifest.json at most
            # 224 (names and versions of at most 100, qa/outputs.py); as one s3:// URI they could reach 293.
            names.MODEL_METADATA_DATASET_BUCKET: params.dataset_bucket,
            names.MODEL_METADATA_DATASET_MANIFEST: params.manifest_key,
            # At most 256 characters of the value pattern: ClaimManifest refuses others (qa/parameter_rules.py).
            names.MODEL_METADATA_DATASET_MANIFEST_VERSION: params.manifest_version_id,
            # For the approval notification (stacks/notifications.py): the metric's float goes through Std:Join,
            # which yields a string.
            names.evaluation_key(ctx.settings.task_facts.GATE_METRIC): Join(on="", values=[f1]),
            **gate_metadata(ctx, train, claim_step),
        },
        description=f"{ctx.settings.model.base_model} fine-tuned for {ctx.settings.task}",
    )
    register = ModelStep(
        name=names.REGISTER_STEP,
        step_args=register_args,
        retry_policies={"register_model_retry_policies": service_retry_policies(ctx.settings.training.retry_attempts)},
    )
    fail = FailStep(
        name=names.F1_FAIL_STEP,
        error_message=Join(
            on=" ",
            values=[gate, f1, "is below the threshold", params.f1_threshold, "- model not registered."],
        ),
    )
    return ConditionStep(
        name=names.F1_CONDITION_STEP,
        conditions=[ConditionGreaterThanOrEqualTo(left=f1, right=params.f1_threshold)],
        if_steps=[register],
        else_steps=[fail],
        description=f"Register only models whose {gate.lower()} reaches the threshold",
    )
