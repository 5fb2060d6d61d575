"""ValidateAndTokenize: validate the pinned dataset and tokenize it, on a CPU instance and a CPU image, cached
per dataset version.

The cache key of a processing step is its AppSpecification, Environment and ProcessingInputs
(https://docs.aws.amazon.com/sagemaker/latest/dg/pipelines-default-keys.html): none of them depends on Epochs,
the training instance type or count, or any cost input, so changing those reuses the features. The data input
is ClaimManifest's InputUri, one folder per manifest version (not per execution), for the same reason.
"""

from __future__ import annotations

from qa.outputs import (
    BENCHMARK_OUTPUT,
    CLAIM_INPUT_URI,
    PINNED_MANIFEST_FILE,
    PREPROCESS_OUTPUTS,
    PROCESSING_BENCHMARK_INPUT,
    PROCESSING_DATA_INPUT,
    PROCESSING_INPUT_DIR,
    PROCESSING_OUTPUT_DIR,
    PROCESSING_TOKENIZER_INPUT,
)
from sagemaker.processing import ProcessingInput, ProcessingOutput
from sagemaker.workflow.lambda_step import LambdaStep
from sagemaker.workflow.steps import CacheConfig, ProcessingStep

from pipeline_steps import names
from pipeline_steps.steps import claim
from pipeline_steps.steps.context import BuildContext, job_retry_policies

DATA_DIR = f"{PROCESSING_INPUT_DIR}/{PROCESSING_DATA_INPUT}"
TOKENIZER_DIR = f"{PROCESSING_INPUT_DIR}/{PROCESSING_TOKENIZER_INPUT}"
BENCHMARK_DIR = f"{PROCESSING_INPUT_DIR}/{PROCESSING_BENCHMARK_INPUT}"


def benchmark_io(ctx: BuildContext) -> tuple[list[ProcessingInput], list[str], tuple[str, ...]]:
    """The pinned benchmark's input (its folder: ProcessingS3Input has no version id, so the job checks the
    manifest's SHA-256 itself), arguments and output; nothing without evaluation.benchmark."""
    pinned, prefix = ctx.settings.evaluation.benchmark, ctx.settings.benchmark_prefix
    if pinned is None or prefix is None:
        return [], [], ()
    folder = f"s3://{ctx.artifacts_bucket}/{prefix}"
    return (
        [ProcessingInput(source=folder, destination=BENCHMARK_DIR, input_name=PROCESSING_BENCHMARK_INPUT)],
        ["--benchmark-dir", BENCHMARK_DIR, "--benchmark-sha256", pinned.manifest_sha256],
        (BENCHMARK_OUTPUT,),
    )


def build(ctx: BuildContext, claim_step: LambdaStep) -> ProcessingStep:
    params = ctx.params
    processor = ctx.script_processor(ctx.settings.processing.preprocess_instance_type, "qa-preprocess")
    benchmark_inputs, benchmark_arguments, benchmark_outputs = benchmark_io(ctx)
    step_args = processor.run(
        inputs=[
            ctx.code_input(),
            # The manifest version's files at the versions it pins, and the pinned manifest (ClaimManifest).
            ProcessingInput(
                source=claim.output(claim_step, CLAIM_INPUT_URI), destination=DATA_DIR, input_name=PROCESSING_DATA_INPUT
            ),
            ProcessingInput(
                source=params.base_model_uri,
                destination=TOKENIZER_DIR,
                input_name="tokenizer",
            ),
            *benchmark_inputs,
        ],
        # Outputs under the producing execution: a cache hit hands later executions these exact files.
        outputs=[
            ProcessingOutput(
                output_name=name,
                source=f"{PROCESSING_OUTPUT_DIR}/{name}",
                destination=ctx.execution_uri(ctx.settings.layout.processed, name),
            )
            for name in (*PREPROCESS_OUTPUTS, *benchmark_outputs)
        ],
        arguments=[
            "preprocess.py",
            "--task",
            ctx.settings.task,
            "--manifest",
            f"{DATA_DIR}/{PINNED_MANIFEST_FILE}",
            "--data-dir",
            DATA_DIR,
            "--tokenizer-dir",
            TOKENIZER_DIR,
            "--output-dir",
            PROCESSING_OUTPUT_DIR,
            "--max-seq-length",
            params.max_seq_length,
            "--doc-stride",
            params.doc_stride,
            "--max-windows-per-example",
            str(ctx.settings.processing.max_windows_per_example),
            "--skip-invalid",
            params.skip_invalid_records,
            "--manifest-version",
            params.manifest_version_id,
            *benchmark_arguments,
        ],
    )
    return ProcessingStep(
        name=names.PREPROCESS_STEP,
        step_args=step_args,
        description="Validate every record of the pinned dataset, then tokenize it (fails before any GPU)",
        cache_config=CacheConfig(enable_caching=True, expire_after="P30D"),
        retry_policies=job_retry_policies(ctx.settings.training.retry_attempts),
    )
