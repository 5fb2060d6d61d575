"""Step 2: validate the pinned dataset and tokenize it, on a CPU instance and a CPU image, cached per dataset
version.

The cache key of a processing step is its AppSpecification, Environment and ProcessingInputs
(https://docs.aws.amazon.com/sagemaker/latest/dg/pipelines-default-keys.html): none of them depends on Epochs,
the training instance type or count, or any cost input, so changing those reuses the features. The data input
is ClaimManifest's InputUri, one folder per manifest version (not per execution), for the same reason.
"""

from __future__ import annotations

from qa.outputs import PINNED_MANIFEST_FILE
from sagemaker.processing import ProcessingInput, ProcessingOutput
from sagemaker.workflow.lambda_step import LambdaStep
from sagemaker.workflow.steps import CacheConfig, ProcessingStep

from pipeline_steps.steps import claim
from pipeline_steps.steps.context import BuildContext, job_retry_policies

STEP_NAME = "ValidateAndTokenize"
INPUT = "/opt/ml/processing/input"
OUTPUT = "/opt/ml/processing/output"
OUTPUTS = ("train", "validation", "stats")


def build(ctx: BuildContext, claim_step: LambdaStep) -> ProcessingStep:
    params, hps = ctx.params, ctx.settings.hyperparameters
    processor = ctx.script_processor(ctx.settings.processing.preprocess_instance_type, "qa-preprocess")
    step_args = processor.run(
        inputs=[
            ctx.code_input(),
            # The manifest version's files at the versions it pins, and the pinned manifest (ClaimManifest).
            ProcessingInput(
                source=claim.output(claim_step, "InputUri"), destination=f"{INPUT}/data", input_name="data"
            ),
            ProcessingInput(source=params.base_model_uri, destination=f"{INPUT}/model", input_name="tokenizer"),
        ],
        # Outputs under the producing execution: a cache hit hands later executions these exact files.
        outputs=[
            ProcessingOutput(
                output_name=name,
                source=f"{OUTPUT}/{name}",
                destination=ctx.execution_uri(ctx.settings.layout.processed, name),
            )
            for name in OUTPUTS
        ],
        arguments=[
            "preprocess.py",
            "--manifest",
            f"{INPUT}/data/{PINNED_MANIFEST_FILE}",
            "--data-dir",
            f"{INPUT}/data",
            "--tokenizer-dir",
            f"{INPUT}/model",
            "--output-dir",
            OUTPUT,
            "--max-seq-length",
            str(hps.max_seq_length),
            "--doc-stride",
            str(hps.doc_stride),
            "--skip-invalid",
            params.skip_invalid_records,
            "--manifest-version",
            params.manifest_version_id,
        ],
    )
    return ProcessingStep(
        name=STEP_NAME,
        step_args=step_args,
        description="Validate every record of the pinned dataset, then tokenize it (fails before any GPU)",
        cache_config=CacheConfig(enable_caching=True, expire_after="P30D"),
        retry_policies=job_retry_policies(ctx.settings.training.retry_attempts),
    )
