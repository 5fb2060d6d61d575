"""EstimateTrainingCost (a Lambda step: qa/cost.py on the dataset's stats.json, ValidateAndTokenize's or in
processing.tokenize_in "fine_tune" mode the claim's estimate, for this execution's
instance type, count and epochs), then CheckTrainingCost: stop before any GPU when the estimate exceeds
MaxTrainingCostUSD.

FineTune, RecordModel and CheckF1 run inside the condition's true branch: a step in a branch may reference steps
outside it, and nothing outside the branch references a step in it.
"""

from __future__ import annotations

import json

from qa.outputs import (
    ESTIMATED_COST_OUTPUT,
    INPUT_COST_MODEL,
    INPUT_STATS_URI,
    STATS_FILE,
    STATS_OUTPUT,
)
from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionLessThanOrEqualTo
from sagemaker.workflow.entities import PipelineVariable
from sagemaker.workflow.fail_step import FailStep
from sagemaker.workflow.functions import Join
from sagemaker.workflow.lambda_step import LambdaOutput, LambdaOutputTypeEnum, LambdaStep
from sagemaker.workflow.step_collections import StepCollection
from sagemaker.workflow.steps import ProcessingStep, Step

from config import Settings
from config.costs import cost_model
from pipeline_steps import names
from pipeline_steps.steps.context import BuildContext


def cost_model_json(settings: Settings) -> str:
    """qa/cost.py's cost model (config/costs.py `cost_model`: it knows nothing of config/) as JSON text: Lambda step
    inputs are flat values."""
    return json.dumps(cost_model(settings), sort_keys=True, separators=(",", ":"))


def preprocess_stats(preprocess: ProcessingStep) -> Join:
    """ValidateAndTokenize's stats.json (processing.tokenize_in "cpu_job")."""
    stats = preprocess.properties.ProcessingOutputConfig.Outputs[STATS_OUTPUT].S3Output.S3Uri
    return Join(on="/", values=[stats, STATS_FILE])


def estimate(ctx: BuildContext, stats_uri: PipelineVariable) -> LambdaStep:
    """EstimateTrainingCost from the stats.json at `stats_uri` (preprocess_stats, or in fine_tune mode the claim's
    estimated stats: steps/claim.py stats_uri)."""
    params = ctx.params
    return LambdaStep(
        name=names.ESTIMATE_STEP,
        lambda_func=ctx.function(ctx.values.estimate_function_arn),
        description="Estimate the training cost of this execution's instance choice and epochs",
        inputs={
            INPUT_STATS_URI: stats_uri,
            names.BASE_MODEL_URI: params.base_model_uri,
            names.TRAINING_INSTANCE_TYPE: params.training_instance_type,
            names.TRAINING_INSTANCE_COUNT: params.training_instance_count,
            names.EPOCHS: params.epochs,
            INPUT_COST_MODEL: cost_model_json(ctx.settings),
        },
        outputs=[LambdaOutput(output_name=ESTIMATED_COST_OUTPUT, output_type=LambdaOutputTypeEnum.Float)],
    )


def build(ctx: BuildContext, estimate_step: LambdaStep, then: list[Step | StepCollection]) -> ConditionStep:
    cost = estimate_step.properties.Outputs[ESTIMATED_COST_OUTPUT]
    fail = FailStep(
        name=names.COST_FAIL_STEP,
        error_message=Join(
            on=" ",
            values=[
                "Estimated training cost USD",
                cost,
                "(on-demand list price) exceeds MaxTrainingCostUSD",
                ctx.params.max_training_cost,
                f"- nothing trained. Raise MaxTrainingCostUSD (at most {ctx.settings.max_training_cost_usd:g}, "
                "limits.max_cost_multiple), or choose fewer epochs or instances (make estimate).",
            ],
        ),
    )
    return ConditionStep(
        name=names.COST_CONDITION_STEP,
        conditions=[ConditionLessThanOrEqualTo(left=cost, right=ctx.params.max_training_cost)],
        if_steps=then,
        else_steps=[fail],
        description="Train only when the estimated training cost is within MaxTrainingCostUSD",
    )
