"""Names in the pipeline definition that the stacks' notification rules match or quote (no SageMaker SDK here:
the stacks import this on every synth)."""

# The condition step whose False outcome is a duplicate delivery (steps/claim.py).
FIRST_DELIVERY_STEP = "FirstDelivery"
# CustomerMetadataProperties keys of a registered model package (steps/register.py; string values) that the
# model-package notifications quote.
MODEL_METADATA_DATASET_MANIFEST = "dataset_manifest"
MODEL_METADATA_F1 = "evaluation_f1"
