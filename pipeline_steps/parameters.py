"""Pipeline parameters: what an execution (or the S3 trigger) may set, with defaults from the settings."""

from __future__ import annotations

from dataclasses import dataclass

from sagemaker.workflow.parameters import ParameterFloat, ParameterInteger, ParameterString

from config import Settings
from config.layout import DatasetLayout

# ManifestVersionId's default: ClaimManifest refuses it (training_code/pipeline_functions.py), so a run started by
# hand without the manifest's S3 version id fails before any GPU instead of reusing features cached for other
# content.
MANIFEST_VERSION_UNSET = "unset"


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

    def all(self) -> list:
        return list(self.__dict__.values())


def build_parameters(settings: Settings, datasets_bucket: str, artifacts_bucket: str) -> PipelineParameters:
    """Parameters with the environment's defaults (the trigger fills DatasetBucket and ManifestKey)."""
    return PipelineParameters(
        dataset_bucket=ParameterString("DatasetBucket", default_value=datasets_bucket),
        manifest_key=ParameterString("ManifestKey", default_value=DatasetLayout().manifest_key("sample-squad", "v1")),
        base_model_uri=ParameterString("BaseModelUri", default_value=settings.base_model_uri(artifacts_bucket)),
        manifest_version_id=ParameterString("ManifestVersionId", default_value=MANIFEST_VERSION_UNSET),
        # EnumValues: an execution can only pick a type on which settings validation ran every rule.
        training_instance_type=ParameterString(
            "TrainingInstanceType",
            default_value=settings.training.instance_type,
            enum_values=list(settings.training_instance_types),
        ),
        training_instance_count=ParameterInteger(
            "TrainingInstanceCount", default_value=settings.training.instance_count
        ),
        epochs=ParameterFloat("Epochs", default_value=settings.hyperparameters.epochs),
        learning_rate=ParameterFloat("LearningRate", default_value=settings.hyperparameters.learning_rate),
        f1_threshold=ParameterFloat("F1Threshold", default_value=settings.evaluation.f1_threshold),
        model_approval_status=ParameterString(
            "ModelApprovalStatus",
            default_value=settings.registry.approval_status,
            enum_values=list(settings.registry.approval_statuses),
        ),
        skip_invalid_records=ParameterString(
            "SkipInvalidRecords", default_value="false", enum_values=["true", "false"]
        ),
        max_training_cost=ParameterFloat("MaxTrainingCostUSD", default_value=settings.training.max_cost_usd),
    )
