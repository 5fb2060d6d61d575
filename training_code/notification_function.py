"""NotifyTopic: the pipeline's notifications, written here and published to the SNS topic with the SNS API.

The EventBridge rules (stacks/notifications.py) invoke this function with the SageMaker event as it is, no input
transformer: EventBridge "doesn't escape values extracted by Input Path, when populating the Input Template"
(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-transform-target-input.html, "Common Issues with
Transforming Input"), and a string template must be quoted ("For Strings, quotes are required"), so a failure
reason or an approval note holding a quote, a backslash or a newline breaks the message EventBridge builds. Here
the text is a Python string and boto3 sends it as the Publish call's Message, whatever it holds.

What the events carry (https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html):
an execution's status change its status and ARN; a step's status change its name, status and, when it failed,
`failureReason`; a model package's state change the package (ModelApprovalStatus, CustomerMetadataProperties,
MetadataProperties, ModelMetrics). Whether FirstDelivery let the run go on is in no documented event field: it is
read from the claim step's outputs (ListPipelineExecutionSteps, LambdaStepMetadata.OutputParameters:
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_LambdaStepMetadata.html).

Runs on the Lambda Python 3.12 runtime with the runtime's boto3 and the stdlib-only qa.outputs and
qa.notifications (the contract with stacks/notifications.py).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from qa.notifications import (
    CLAIM_STEP_ENV,
    DATASET_METADATA_KEY_ENV,
    DETAILS_ENV,
    EXECUTION_STATUS_CHANGE,
    F1_METADATA_KEY_ENV,
    FIRST_DELIVERY_STEP_ENV,
    MODEL_PACKAGE_STATE_CHANGE,
    PENDING_APPROVAL,
    PIPELINE_NAME_ENV,
    STEP_STATUS_CHANGE,
    TOPIC_ARN_ENV,
)
from qa.outputs import CLAIM_CLAIMED_BY, CLAIM_DUPLICATE, CLAIM_DUPLICATE_REASON, CLAIM_IGNORED, DUPLICATE_YES

log = logging.getLogger("notification_function")
log.setLevel(logging.INFO)

UNKNOWN = "(not given)"


def claim_outputs(execution_arn: str, claim_step: str) -> dict[str, str]:
    """The claim step's Lambda outputs in this execution (name -> value)."""
    import boto3

    pages = boto3.client("sagemaker").get_paginator("list_pipeline_execution_steps")
    for page in pages.paginate(PipelineExecutionArn=execution_arn):
        for step in page["PipelineExecutionSteps"]:
            if step["StepName"] == claim_step:
                outputs = step.get("Metadata", {}).get("Lambda", {}).get("OutputParameters", [])
                return {output["Name"]: output["Value"] for output in outputs}
    raise LookupError(f"{execution_arn} has no step {claim_step}")


def _execution_message(detail: dict[str, Any]) -> str:
    return (
        f"execution {detail.get('currentPipelineExecutionStatus', UNKNOWN)}: "
        f"{detail.get('pipelineExecutionArn', UNKNOWN)}. A real run also reports its registered model (F1, dataset); "
        "a run that trained nothing says why."
    )


def _step_message(detail: dict[str, Any], environment: dict[str, str]) -> str | None:
    execution = detail.get("pipelineExecutionArn", UNKNOWN)
    if detail.get("currentStepStatus") == "Failed":
        return (
            f"execution FAILED at step {detail.get('stepName', UNKNOWN)}: {detail.get('failureReason', UNKNOWN)} "
            f"(execution {execution})."
        )
    if detail.get("stepName") != environment[FIRST_DELIVERY_STEP_ENV]:
        raise ValueError(f"no notification for step {detail.get('stepName')!r} {detail.get('currentStepStatus')!r}")
    claim = claim_outputs(execution, environment[CLAIM_STEP_ENV])
    if claim.get(CLAIM_DUPLICATE) == DUPLICATE_YES:
        owner = claim.get(CLAIM_CLAIMED_BY) or UNKNOWN
        if claim.get(CLAIM_DUPLICATE_REASON):  # the same data as another dataset version
            return (
                f"duplicate, nothing trained: {claim[CLAIM_DUPLICATE_REASON]}; that data is claimed by execution "
                f"{owner} (execution {execution} ends Succeeded)."
            )
        return (
            f"duplicate delivery, nothing trained: the dataset version is claimed by execution {owner} "
            f"(execution {execution} ends Succeeded)."
        )
    if claim.get(CLAIM_IGNORED):
        return f"nothing trained: {claim[CLAIM_IGNORED]} (execution {execution} ends Succeeded)."
    return None  # the first delivery: the run goes on and tells its own end


def _model_message(detail: dict[str, Any], environment: dict[str, str]) -> str:
    metadata = detail.get("CustomerMetadataProperties", {})
    report = detail.get("ModelMetrics", {}).get("ModelQuality", {}).get("Statistics", {}).get("S3Uri", UNKNOWN)
    quality = (
        f"F1 {metadata.get(environment[F1_METADATA_KEY_ENV], UNKNOWN)} on "
        f"{metadata.get(environment[DATASET_METADATA_KEY_ENV], UNKNOWN)}, report {report}"
    )
    package, status = detail.get("ModelPackageArn", UNKNOWN), detail.get("ModelApprovalStatus", UNKNOWN)
    if status == PENDING_APPROVAL:
        execution = detail.get("MetadataProperties", {}).get("GeneratedBy", UNKNOWN)
        return f"model {package} is waiting for approval: {quality} (execution {execution})."
    return f"model {package} was {status} ({detail.get('ApprovalDescription', 'no description')}): {quality}."


def message(event: dict[str, Any], environment: dict[str, str]) -> str | None:
    """The notification for a SageMaker event, or None when there is nothing to tell."""
    detail_type, detail = event.get("detail-type"), event.get("detail", {})
    if detail_type == EXECUTION_STATUS_CHANGE:
        text: str | None = _execution_message(detail)
    elif detail_type == STEP_STATUS_CHANGE:
        text = _step_message(detail, environment)
    elif detail_type == MODEL_PACKAGE_STATE_CHANGE:
        text = _model_message(detail, environment)
    else:
        raise ValueError(f"no notification for events of type {detail_type!r}")
    if text is None:
        return None
    return f"[{environment[PIPELINE_NAME_ENV]}] {text} {environment[DETAILS_ENV]}"


def handler(event: dict[str, Any], context: object) -> dict[str, str]:
    import boto3

    environment = dict(os.environ)
    text = message(event, environment)
    if text is None:
        log.info("nothing to tell for %s %s", event.get("detail-type"), event.get("id"))
        return {}
    response = boto3.client("sns").publish(TopicArn=environment[TOPIC_ARN_ENV], Message=text)
    log.info("published %s for %s", response["MessageId"], event.get("id"))
    return {"MessageId": response["MessageId"]}
