"""Step 0: claim the uploaded manifest version for this execution; a duplicate delivery stops after it."""

from __future__ import annotations

from sagemaker.processing import ProcessingOutput
from sagemaker.workflow.conditions import ConditionEquals
from sagemaker.workflow.execution_variables import ExecutionVariables
from sagemaker.workflow.functions import JsonGet
from sagemaker.workflow.properties import PropertyFile
from sagemaker.workflow.steps import ProcessingStep

from pipeline_steps.steps.context import BuildContext

STEP_NAME = "ClaimManifest"
CONDITION_STEP = "FirstDelivery"
REPORT_FILE = "claim.json"
OUTPUT = "/opt/ml/processing/output/claim"


def build(ctx: BuildContext) -> tuple[ProcessingStep, ConditionEquals]:
    """The claim step and the condition that is true only for the execution owning the upload."""
    params = ctx.params
    report = PropertyFile(name="ClaimReport", output_name="claim", path=REPORT_FILE)
    processor = ctx.script_processor(ctx.settings.processing.claim_instance_type, "qa-claim")
    step_args = processor.run(
        inputs=[ctx.code_input()],
        outputs=[
            ProcessingOutput(
                output_name="claim", source=OUTPUT, destination=ctx.execution_uri(ctx.settings.layout.claims)
            )
        ],
        arguments=[
            "claim.py",
            "--claims-uri",
            f"s3://{ctx.artifacts_bucket}/{ctx.settings.layout.claims}",
            "--execution-id",
            ExecutionVariables.PIPELINE_EXECUTION_ID,
            "--dataset-bucket",
            params.dataset_bucket,
            "--manifest-key",
            params.manifest_key,
            "--manifest-version",
            params.manifest_version_id,
            "--output-dir",
            OUTPUT,
        ],
    )
    # Never cached: the claim must be made by every execution.
    step = ProcessingStep(
        name=STEP_NAME,
        step_args=step_args,
        description="Claim this manifest upload (S3 conditional write); a duplicate event stops here",
        property_files=[report],
    )
    first_delivery = ConditionEquals(
        # arg-type ignored: the SDK's ConditionValueType omits JsonGet, a PipelineVariable that conditions accept.
        left=JsonGet(step_name=step.name, property_file=report, json_path="duplicate"),  # type: ignore[arg-type]
        right=0,
    )
    return step, first_delivery
