"""Pipeline parameters: what an execution (or the S3 trigger) may set, with defaults from the settings."""

from __future__ import annotations

from dataclasses import dataclass

from qa.outputs import MANIFEST_VERSION_UNSET, UPLOADED_BY_UNSET
from sagemaker.workflow.parameters import ParameterFloat, ParameterInteger, ParameterString

from config import Settings
from config.costs import default_learning_rate
from config.layout import DatasetLayout
from config.paths import SAMPLE_DATASET_NAME, SAMPLE_DATASET_VERSION
from pipeline_steps import names


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

    def all(self) -> list:
        return list(self.__dict__.values())


def build_parameters(settings: Settings, datasets_bucket: str, artifacts_bucket: str) -> PipelineParameters:
    """Parameters with the environment's defaults (the trigger fills DatasetBucket and ManifestKey)."""
    return PipelineParameters(
        dataset_bucket=ParameterString(names.DATASET_BUCKET, default_value=datasets_bucket),
        manifest_key=ParameterString(
            names.MANIFEST_KEY, default_value=DatasetLayout().manifest_key(SAMPLE_DATASET_NAME, SAMPLE_DATASET_VERSION)
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
    )
