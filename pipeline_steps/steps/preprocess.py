"""Step 1: validate the uploaded dataset and tokenize it, on a CPU instance, cached per dataset."""

from __future__ import annotations

from sagemaker.processing import ProcessingInput, ProcessingOutput
from sagemaker.workflow.functions import Join
from sagemaker.workflow.steps import CacheConfig, ProcessingStep

from pipeline_steps.steps.context import BuildContext

STEP_NAME = "ValidateAndTokenize"
INPUT = "/opt/ml/processing/input"
OUTPUT = "/opt/ml/processing/output"
OUTPUTS = ("train", "validation", "stats")


def build(ctx: BuildContext) -> ProcessingStep:
    params, hps = ctx.params, ctx.settings.hyperparameters
    manifest_uri = Join(on="", values=["s3://", params.dataset_bucket, "/", params.manifest_key])
    # Outputs keyed by dataset (not by execution), so a cache hit and its outputs belong together.
    output_root = Join(
        on="/", values=[f"s3://{ctx.artifacts_bucket}/{ctx.settings.layout.processed}", params.manifest_key]
    )
    processor = ctx.script_processor(ctx.settings.processing.preprocess_instance_type, "qa-preprocess")
    step_args = processor.run(
        inputs=[
            ctx.code_input(),
            ProcessingInput(source=manifest_uri, destination=f"{INPUT}/manifest", input_name="manifest"),
            # SageMaker's ManifestFile input downloads exactly the files the manifest lists.
            ProcessingInput(
                source=manifest_uri, destination=f"{INPUT}/data", input_name="data", s3_data_type="ManifestFile"
            ),
            ProcessingInput(source=params.base_model_uri, destination=f"{INPUT}/model", input_name="tokenizer"),
        ],
        outputs=[
            ProcessingOutput(
                output_name=name, source=f"{OUTPUT}/{name}", destination=Join(on="/", values=[output_root, name])
            )
            for name in OUTPUTS
        ],
        arguments=[
            "preprocess.py",
            "--manifest",
            f"{INPUT}/manifest/manifest.json",
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
            # In the arguments, so in the cache key: same manifest key, new upload -> new features.
            "--manifest-version",
            params.manifest_version_id,
        ],
    )
    return ProcessingStep(
        name=STEP_NAME,
        step_args=step_args,
        description="Validate every record of the uploaded dataset, then tokenize it (fails before any GPU)",
        cache_config=CacheConfig(enable_caching=True, expire_after="P30D"),
    )
