"""Names in the pipeline definition that the stacks' notification rules match or quote (no SageMaker SDK here:
the stacks import this on every synth)."""

# The condition step whose False outcome is a duplicate delivery (steps/claim.py).
FIRST_DELIVERY_STEP = "FirstDelivery"
# CustomerMetadataProperties keys of a registered model package (steps/register.py; string values) that the
# model-package notifications quote.
MODEL_METADATA_DATASET_MANIFEST = "dataset_manifest"
MODEL_METADATA_F1 = "evaluation_f1"
# The model archive's SHA-256 and S3 version id (from RecordModel), which `make verify-model` checks the archive
# (the package's ModelDataUrl) against.
MODEL_METADATA_ARCHIVE_SHA256 = "model_archive_sha256"
MODEL_METADATA_ARCHIVE_VERSION_ID = "model_archive_version_id"
