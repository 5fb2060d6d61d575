"""Step 1: ClaimManifest, a Lambda step (no instance): check the parameters, claim the manifest version for this
execution (S3 conditional write), pin its data. Then ParametersValid (a bad parameter fails here, before any
cost) and FirstDelivery (a duplicate delivery, or a key that is no manifest, ends here, succeeded).
"""

from __future__ import annotations

import json

from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionEquals
from sagemaker.workflow.execution_variables import ExecutionVariables
from sagemaker.workflow.fail_step import FailStep
from sagemaker.workflow.lambda_step import LambdaOutput, LambdaOutputTypeEnum, LambdaStep
from sagemaker.workflow.step_collections import StepCollection
from sagemaker.workflow.steps import Step

from pipeline_steps.steps.context import BuildContext

STEP_NAME = "ClaimManifest"
PARAMETERS_STEP = "ParametersValid"
PARAMETERS_FAIL_STEP = "InvalidParameter"
CONDITION_STEP = "FirstDelivery"
# training_code/pipeline_functions.py claim_handler's outputs (all strings).
OUTPUTS = ("ParameterError", "Ignored", "Duplicate", "ClaimedBy", "InputUri")


def build(ctx: BuildContext) -> LambdaStep:
    params, settings = ctx.params, ctx.settings
    bounds = {
        "MaxInstanceCount": settings.training.max_instance_count,
        "MinF1Threshold": settings.evaluation.min_f1_threshold,
    }
    return LambdaStep(
        name=STEP_NAME,
        lambda_func=ctx.function(ctx.values.claim_function_arn),
        description="Check the parameters, claim this manifest version (S3 conditional write), pin its data",
        inputs={
            "ExecutionArn": ExecutionVariables.PIPELINE_EXECUTION_ARN,
            "DatasetBucket": params.dataset_bucket,
            "ManifestKey": params.manifest_key,
            "ManifestVersionId": params.manifest_version_id,
            "ArtifactsBucket": ctx.artifacts_bucket,
            "ClaimsPrefix": settings.layout.claims,
            "InputsPrefix": settings.layout.inputs,
            "Epochs": params.epochs,
            "LearningRate": params.learning_rate,
            "TrainingInstanceCount": params.training_instance_count,
            "F1Threshold": params.f1_threshold,
            "MaxTrainingCostUSD": params.max_training_cost,
            "Bounds": json.dumps(bounds, sort_keys=True),
        },
        outputs=[LambdaOutput(output_name=name, output_type=LambdaOutputTypeEnum.String) for name in OUTPUTS],
    )


def output(step: LambdaStep, name: str):
    return step.properties.Outputs[name]


def gates(ctx: BuildContext, claim: LambdaStep, then: list[Step | StepCollection]) -> ConditionStep:
    """ParametersValid -> FirstDelivery -> `then`."""
    first_delivery = ConditionStep(
        name=CONDITION_STEP,
        conditions=[
            ConditionEquals(left=output(claim, "Duplicate"), right="false"),
            ConditionEquals(left=output(claim, "Ignored"), right=""),
        ],
        if_steps=then,
        # A duplicate delivery, or an event for a key that is no manifest: nothing to do, no failure. The claim
        # step's ClaimedBy output names the execution that owns the dataset version.
        else_steps=[],
        description="Only the execution that claimed this manifest version goes on",
    )
    return ConditionStep(
        name=PARAMETERS_STEP,
        conditions=[ConditionEquals(left=output(claim, "ParameterError"), right="")],
        if_steps=[first_delivery],
        else_steps=[FailStep(name=PARAMETERS_FAIL_STEP, error_message=output(claim, "ParameterError"))],
        description="Stop before anything is billed when a pipeline parameter breaks its rule",
    )
