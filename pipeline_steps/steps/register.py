"""Steps 4-5: F1 >= threshold ? register the model (with its metrics) : fail with the numbers."""

from __future__ import annotations

from sagemaker.huggingface import HuggingFaceModel
from sagemaker.model_metrics import MetricsSource, ModelMetrics
from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionGreaterThanOrEqualTo
from sagemaker.workflow.fail_step import FailStep
from sagemaker.workflow.functions import Join, JsonGet
from sagemaker.workflow.model_step import ModelStep
from sagemaker.workflow.properties import PropertyFile
from sagemaker.workflow.steps import ProcessingStep, TrainingStep

from pipeline_steps.steps.context import BuildContext
from pipeline_steps.steps.evaluate import REPORT_FILE

CONDITION_STEP = "CheckF1"
REGISTER_STEP = "RegisterModel"
FAIL_STEP = "F1BelowThreshold"
F1_PATH = "metrics.f1.value"
INFERENCE_PROGRAM = "inference.py"  # sagemaker-inference's SAGEMAKER_PROGRAM: a module in <model dir>/code


def build(ctx: BuildContext, train: TrainingStep, evaluate: ProcessingStep, report: PropertyFile) -> ConditionStep:
    f1 = JsonGet(step_name=evaluate.name, property_file=report, json_path=F1_PATH)
    evaluation_uri = Join(
        on="/",
        values=[evaluate.properties.ProcessingOutputConfig.Outputs["evaluation"].S3Output.S3Uri, REPORT_FILE],
    )
    model = HuggingFaceModel(
        model_data=train.properties.ModelArtifacts.S3ModelArtifacts,
        image_uri=ctx.inference_image,
        role=ctx.values.job_role_arn,
        # The toolkit's HF_TASK=question-answering needs transformers' question-answering pipeline, which
        # 5.3 removed; it serves training_code/inference.py (shipped in model.tar.gz under code/) instead.
        env={"SAGEMAKER_PROGRAM": INFERENCE_PROGRAM},
        # Explicit, or the SDK probes S3 for its default bucket.
        code_location=f"s3://{ctx.artifacts_bucket}/{ctx.settings.layout.pipeline_code}",
        sagemaker_session=ctx.session,
    )
    register_args = model.register(
        model_package_group_name=ctx.settings.model_package_group_name,
        approval_status=ctx.params.model_approval_status,
        content_types=["application/json"],
        response_types=["application/json"],
        inference_instances=list(ctx.settings.registry.inference_instance_types),
        transform_instances=list(ctx.settings.registry.inference_instance_types),
        model_metrics=ModelMetrics(
            model_statistics=MetricsSource(s3_uri=evaluation_uri, content_type="application/json")
        ),
        description=f"{ctx.settings.model.base_model} fine-tuned for extractive question answering",
    )
    register = ModelStep(name=REGISTER_STEP, step_args=register_args)
    fail = FailStep(
        name=FAIL_STEP,
        error_message=Join(
            on=" ",
            values=["Validation F1", f1, "is below the threshold", ctx.params.f1_threshold, "- model not registered."],
        ),
    )
    return ConditionStep(
        name=CONDITION_STEP,
        # arg-type ignored: the SDK's ConditionValueType omits JsonGet, a PipelineVariable that conditions accept.
        conditions=[ConditionGreaterThanOrEqualTo(left=f1, right=ctx.params.f1_threshold)],  # type: ignore[arg-type]
        if_steps=[register],
        else_steps=[fail],
        description="Register only models whose validation F1 reaches the threshold",
    )
