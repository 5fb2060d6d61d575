"""Step 1: validate the uploaded dataset and tokenize it, on a CPU instance, cached per dataset."""

from __future__ import annotations

import json

from sagemaker.processing import ProcessingInput, ProcessingOutput
from sagemaker.workflow.functions import Join
from sagemaker.workflow.properties import PropertyFile
from sagemaker.workflow.steps import CacheConfig, ProcessingStep

from config import Settings
from config.costs import cost_model, hardware_facts
from pipeline_steps.steps.context import BuildContext

STEP_NAME = "ValidateAndTokenize"
INPUT = "/opt/ml/processing/input"
OUTPUT = "/opt/ml/processing/output"
OUTPUTS = ("train", "validation", "stats")
STATS_FILE = "stats.json"


def cost_arguments(settings: Settings) -> list[str]:
    """What preprocess.py's cost estimate needs (training_code/qa/cost.py knows nothing of config/): the hardware
    facts and list price of every type the TrainingInstanceType parameter accepts, one `NAME=JSON` argument each
    (an argument may hold 256 characters: API_AppSpecification), and the batch settings. Published throughput
    references only: a local GPU measurement would make the definition machine-dependent. Settings validation
    guarantees that every allowed type has a price and GPU facts."""
    arguments = []
    for name in settings.training_instance_types:
        facts = hardware_facts(name)[0]
        arguments += ["--training-hardware", f"{name}={json.dumps(facts, sort_keys=True, separators=(',', ':'))}"]
    hps = settings.hyperparameters
    model = cost_model(settings)
    return [
        *arguments,
        "--training-job-terms",
        json.dumps(model["job"], sort_keys=True, separators=(",", ":")),
        "--per-device-train-batch-size",
        str(hps.per_device_train_batch_size),
        "--gradient-accumulation-steps",
        str(hps.gradient_accumulation_steps),
        "--gradient-bytes",
        str(model["gradient_bytes"]),
    ]


def build(ctx: BuildContext) -> tuple[ProcessingStep, PropertyFile]:
    params, hps = ctx.params, ctx.settings.hyperparameters
    manifest_uri = Join(on="", values=["s3://", params.dataset_bucket, "/", params.manifest_key])
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
        # Outputs under the producing execution: a cache hit hands later executions these exact files, which no
        # other run (another version of the dataset, other epochs for the cost estimate) ever overwrites.
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
            # The cost estimate for this execution's choices (also in the cache key: a new choice, a new estimate).
            *cost_arguments(ctx.settings),
            "--training-instance-type",
            params.training_instance_type,
            "--training-instance-count",
            params.training_instance_count.to_string(),
            "--epochs",
            params.epochs.to_string(),
        ],
    )
    stats = PropertyFile(name="DatasetStats", output_name="stats", path=STATS_FILE)
    step = ProcessingStep(
        name=STEP_NAME,
        step_args=step_args,
        description="Validate every record of the uploaded dataset, then tokenize it (fails before any GPU)",
        cache_config=CacheConfig(enable_caching=True, expire_after="P30D"),
        property_files=[stats],
    )
    return step, stats
