"""The contract between the notification rules (stacks/notifications.py) and the function they invoke
(notification_function.py): its handler, the environment variables the stack sets, and the SageMaker event types
(https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html). Standard library only:
the function's bundle ships it."""

HANDLER = "notification_function.handler"
# The SageMaker events' detail types.
EXECUTION_STATUS_CHANGE = "SageMaker Model Building Pipeline Execution Status Change"
STEP_STATUS_CHANGE = "SageMaker Model Building Pipeline Execution Step Status Change"
MODEL_PACKAGE_STATE_CHANGE = "SageMaker Model Package State Change"
PENDING_APPROVAL = "PendingManualApproval"
# What the stack tells the function (environment variables).
TOPIC_ARN_ENV = "TOPIC_ARN"
PIPELINE_NAME_ENV = "PIPELINE_NAME"
DETAILS_ENV = "DETAILS"  # where to look next: `make runs` and the console page
CLAIM_STEP_ENV = "CLAIM_STEP"
FIRST_DELIVERY_STEP_ENV = "FIRST_DELIVERY_STEP"
F1_METADATA_KEY_ENV = "F1_METADATA_KEY"
DATASET_METADATA_KEY_ENV = "DATASET_METADATA_KEY"
