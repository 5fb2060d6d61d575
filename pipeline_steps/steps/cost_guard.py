"""Step 2: stop before any GPU when the estimated training cost exceeds the MaxTrainingCostUSD parameter.

FineTune, Evaluate and CheckF1 run inside this condition's true branch: a step in a branch may reference steps
outside it (the preprocessing outputs), and nothing outside the branch references a step in it.
"""

from __future__ import annotations

from sagemaker.workflow.condition_step import ConditionStep
from sagemaker.workflow.conditions import ConditionLessThanOrEqualTo
from sagemaker.workflow.fail_step import FailStep
from sagemaker.workflow.functions import Join, JsonGet
from sagemaker.workflow.properties import PropertyFile
from sagemaker.workflow.step_collections import StepCollection
from sagemaker.workflow.steps import ProcessingStep, Step

from pipeline_steps.steps.context import BuildContext

CONDITION_STEP = "CheckTrainingCost"
FAIL_STEP = "TrainingCostAboveLimit"
COST_PATH = "cost_estimate.training_on_demand_usd"


def build(
    ctx: BuildContext, preprocess: ProcessingStep, stats: PropertyFile, then: list[Step | StepCollection]
) -> ConditionStep:
    cost = JsonGet(step_name=preprocess.name, property_file=stats, json_path=COST_PATH)
    fail = FailStep(
        name=FAIL_STEP,
        error_message=Join(
            on=" ",
            values=[
                "Estimated training cost USD",
                cost,
                "(on-demand list price) exceeds MaxTrainingCostUSD",
                ctx.params.max_training_cost,
                "- nothing trained. Raise MaxTrainingCostUSD, or choose fewer epochs or instances (make estimate).",
            ],
        ),
    )
    return ConditionStep(
        name=CONDITION_STEP,
        # arg-type ignored: the SDK's ConditionValueType omits JsonGet, a PipelineVariable that conditions accept.
        conditions=[ConditionLessThanOrEqualTo(left=cost, right=ctx.params.max_training_cost)],  # type: ignore[arg-type]
        if_steps=then,
        else_steps=[fail],
        description="Train only when the estimated training cost is within MaxTrainingCostUSD",
    )
