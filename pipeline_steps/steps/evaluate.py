"""Step 3: SQuAD EM/F1 of the trained model on the validation set; evaluation.json as a PropertyFile."""

from __future__ import annotations

from sagemaker.processing import ProcessingInput, ProcessingOutput
from sagemaker.workflow.properties import PropertyFile
from sagemaker.workflow.steps import ProcessingStep, TrainingStep

from pipeline_steps.steps.context import BuildContext

STEP_NAME = "Evaluate"
REPORT_FILE = "evaluation.json"
INPUT = "/opt/ml/processing/input"
OUTPUT = "/opt/ml/processing/output/evaluation"


def build(ctx: BuildContext, preprocess: ProcessingStep, train: TrainingStep) -> tuple[ProcessingStep, PropertyFile]:
    report = PropertyFile(name="EvaluationReport", output_name="evaluation", path=REPORT_FILE)
    processor = ctx.script_processor(ctx.settings.processing.evaluate_instance_type, "qa-evaluate")
    validation = preprocess.properties.ProcessingOutputConfig.Outputs["validation"].S3Output.S3Uri
    step_args = processor.run(
        inputs=[
            ctx.code_input(),
            ProcessingInput(
                source=train.properties.ModelArtifacts.S3ModelArtifacts,
                destination=f"{INPUT}/model",
                input_name="model",
            ),
            ProcessingInput(source=validation, destination=f"{INPUT}/validation", input_name="validation"),
        ],
        outputs=[
            ProcessingOutput(
                output_name="evaluation", source=OUTPUT, destination=ctx.execution_uri(ctx.settings.layout.evaluation)
            )
        ],
        arguments=[
            "evaluate.py",
            "--model-dir",
            f"{INPUT}/model",
            "--validation-dir",
            f"{INPUT}/validation",
            "--output-dir",
            OUTPUT,
            "--batch-size",
            str(ctx.settings.hyperparameters.per_device_eval_batch_size),
        ],
    )
    step = ProcessingStep(
        name=STEP_NAME,
        step_args=step_args,
        description="SQuAD v1.1 exact match and F1 on the validation set",
        property_files=[report],
    )
    return step, report
