"""Pipeline parameters: what an execution (or the S3 trigger) may set, with defaults from the settings."""

from __future__ import annotations

from dataclasses import dataclass

from qa.outputs import EVALUATION_STRATEGIES, MANIFEST_VERSION_UNSET, UPLOADED_BY_UNSET
from sagemaker.workflow.parameters import ParameterFloat, ParameterInteger, ParameterString

from config import Settings
from config.costs import default_learning_rate
from config.paths import SAMPLE_DATASET_VERSION
from pipeline_steps import names

DEFAULT_EVALUATION_STEPS = 500  # EvaluationSteps' default (used only with EvaluationStrategy=steps)


@dataclass(frozen=True)
class PipelineParameters:
    dataset_bucket: ParameterString
    manifest_key: ParameterString
    manifest_version_id: ParameterString
    base_model_uri: ParameterString
    training_instance_type: ParameterString
    training_instance_count: ParameterInteger
    epochs: ParameterFloat
    learning_rate: ParameterFloat
    f1_threshold: ParameterFloat
    model_approval_status: ParameterString
    skip_invalid_records: ParameterString
    max_training_cost: ParameterFloat
    uploaded_by: ParameterString
    # Per-run training controls (qa.parameter_rules.CONTROL_PARAMETERS), defaults from the settings.
    per_device_train_batch_size: ParameterString  # "auto" or an integer
    max_seq_length: ParameterInteger
    doc_stride: ParameterInteger
    warmup_ratio: ParameterString  # "auto" or a number
    evaluation_strategy: ParameterString
    evaluation_steps: ParameterInteger
    early_stopping_patience: ParameterInteger

    def all(self) -> list:
        return list(self.__dict__.values())


def build_parameters(settings: Settings, datasets_bucket: str, artifacts_bucket: str) -> PipelineParameters:
    """Parameters with the environment's defaults (the trigger fills DatasetBucket and ManifestKey)."""
    hps = settings.hyperparameters
    return PipelineParameters(
        dataset_bucket=ParameterString(names.DATASET_BUCKET, default_value=datasets_bucket),
        manifest_key=ParameterString(
            names.MANIFEST_KEY,
            default_value=settings.datasets.manifest_key(settings.task_facts.SAMPLE_DATASET, SAMPLE_DATASET_VERSION),
        ),
        base_model_uri=ParameterString(names.BASE_MODEL_URI, default_value=settings.base_model_uri(artifacts_bucket)),
        manifest_version_id=ParameterString(names.MANIFEST_VERSION_ID, default_value=MANIFEST_VERSION_UNSET),
        # EnumValues: an execution can only pick a type on which settings validation ran every rule.
        training_instance_type=ParameterString(
            names.TRAINING_INSTANCE_TYPE,
            default_value=settings.training.instance_type,
            enum_values=list(settings.training_instance_types),
        ),
        training_instance_count=ParameterInteger(
            names.TRAINING_INSTANCE_COUNT, default_value=settings.training.instance_count
        ),
        epochs=ParameterFloat(names.EPOCHS, default_value=settings.hyperparameters.epochs),
        learning_rate=ParameterFloat(names.LEARNING_RATE, default_value=default_learning_rate(settings)),
        f1_threshold=ParameterFloat(names.F1_THRESHOLD, default_value=settings.evaluation.f1_threshold),
        model_approval_status=ParameterString(
            names.MODEL_APPROVAL_STATUS,
            default_value=settings.registry.approval_status,
            enum_values=list(settings.registry.approval_statuses),
        ),
        skip_invalid_records=ParameterString(
            names.SKIP_INVALID_RECORDS, default_value="false", enum_values=["true", "false"]
        ),
        max_training_cost=ParameterFloat(names.MAX_TRAINING_COST, default_value=settings.default_max_cost_usd),
        # The trigger sets it from the event (stacks/trigger.py); the package records it.
        uploaded_by=ParameterString(names.UPLOADED_BY, default_value=UPLOADED_BY_UNSET),
        per_device_train_batch_size=ParameterString(
            names.PER_DEVICE_TRAIN_BATCH_SIZE, default_value=str(hps.per_device_train_batch_size)
        ),
        max_seq_length=ParameterInteger(names.MAX_SEQ_LENGTH, default_value=hps.max_seq_length),
        doc_stride=ParameterInteger(names.DOC_STRIDE, default_value=hps.doc_stride),
        warmup_ratio=ParameterString(names.WARMUP_RATIO, default_value=str(hps.warmup_ratio)),
        # No settings for these: off by default, as before (one evaluation, after training).
        evaluation_strategy=ParameterString(
            names.EVALUATION_STRATEGY, default_value="no", enum_values=list(EVALUATION_STRATEGIES)
        ),
        evaluation_steps=ParameterInteger(names.EVALUATION_STEPS, default_value=DEFAULT_EVALUATION_STEPS),
        early_stopping_patience=ParameterInteger(names.EARLY_STOPPING_PATIENCE, default_value=0),
    )
