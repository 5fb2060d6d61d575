"""NotifyTopic (training_code/notification_function.py): every message that carries a failure reason or other free
text reaches the topic whole, however the text is made, published through moto server's SNS and read back from a
raw-delivery SQS subscription (what an e-mail subscriber gets is the same Message).

Why a function at all: EventBridge "doesn't escape values extracted by Input Path, when populating the Input
Template" (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-transform-target-input.html), so a quoted
template with such a reason in it is no longer a valid string (tests/stacks/test_notifications.py renders one).
Events: the SageMaker developer guide's examples
(https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import notification_function as notify
import pytest
from botocore.stub import Stubber
from qa import notifications as contract
from qa.outputs import CLAIM_CLAIMED_BY, CLAIM_DUPLICATE, CLAIM_IGNORED, DUPLICATE_NO, DUPLICATE_YES

from tests.conftest import aws_environment, pointed_at

ACCOUNT, REGION = "123456789012", "us-east-1"
PIPELINE_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:pipeline/p"
EXECUTION_ARN = f"{PIPELINE_ARN}/execution/p4jn9xou8a8s"
OWNER_ARN = f"{PIPELINE_ARN}/execution/owner0000001"
DETAILS = "Details: make runs ENV=dev | https://console.aws.amazon.com/sagemaker/home"
ENVIRONMENT = {
    contract.PIPELINE_NAME_ENV: "p",
    contract.DETAILS_ENV: DETAILS,
    contract.CLAIM_STEP_ENV: "ClaimManifest",
    contract.FIRST_DELIVERY_STEP_ENV: "FirstDelivery",
    contract.F1_METADATA_KEY_ENV: "evaluation_f1",
    contract.DATASET_METADATA_KEY_ENV: "dataset_manifest",
}


def hostile(what: str) -> str:
    """2,000 characters of `what` with double and single quotes, backslashes, newlines, a tab and non-ASCII."""
    head = f'{what}: "quoted" it\'s C:\\path\\ \\"escaped\\" \\n not a newline\nline two\r\n\t{{"json": [1]}} é ✓ '
    return (head + "x" * 2000)[:2000]


@pytest.fixture
def topic(moto_url, monkeypatch) -> Iterator[Any]:
    """A topic in moto with a raw-delivery queue subscribed; the function's environment points at the topic."""
    with pointed_at(aws_environment(moto_url)):
        sns, sqs = boto3.client("sns"), boto3.client("sqs")
        topic_arn = sns.create_topic(Name="notifications")["TopicArn"]
        queue_url = sqs.create_queue(QueueName="notifications-read-back")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
        for name, value in {**ENVIRONMENT, contract.TOPIC_ARN_ENV: topic_arn}.items():
            monkeypatch.setenv(name, value)

        def published() -> list[str]:
            messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
            return [message["Body"] for message in messages]

        yield published
        sns.delete_topic(TopicArn=topic_arn)
        sqs.delete_queue(QueueUrl=queue_url)


def sagemaker_event(detail_type: str, detail: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "ea37ccbb-5e2b-05e9-4073-1daazc940304",
        "detail-type": detail_type,
        "source": "aws.sagemaker",
        "account": ACCOUNT,
        "time": "2021-03-15T16:10:10Z",
        "region": REGION,
        "resources": [PIPELINE_ARN, EXECUTION_ARN],
        "detail": detail,
    }


def step_event(step: str, status: str, **extra: Any) -> dict[str, Any]:
    return sagemaker_event(
        contract.STEP_STATUS_CHANGE,
        {
            "stepName": step,
            "stepType": "Condition",
            "previousStepStatus": "Executing",
            "currentStepStatus": status,
            "pipelineArn": PIPELINE_ARN,
            "pipelineExecutionArn": EXECUTION_ARN,
            **extra,
        },
    )


def package_event(status: str, **extra: Any) -> dict[str, Any]:
    return sagemaker_event(
        contract.MODEL_PACKAGE_STATE_CHANGE,
        {
            "ModelPackageGroupName": "qa-dev-models",
            "ModelPackageVersion": 2,
            "ModelPackageArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/qa-dev-models/2",
            "ModelApprovalStatus": status,
            "MetadataProperties": {"GeneratedBy": EXECUTION_ARN},
            "CustomerMetadataProperties": {
                "evaluation_f1": "91.2",
                "dataset_manifest": "s3://datasets-bucket/datasets/a/v1/manifest.json",
            },
            "ModelMetrics": {"ModelQuality": {"Statistics": {"S3Uri": "s3://artifacts/evaluation/x/evaluation.json"}}},
            **extra,
        },
    )


def test_a_failure_reason_of_any_text_reaches_the_topic_whole(topic):
    reason = hostile("AlgorithmError")
    notify.handler(step_event("FineTune", "Failed", failureReason=reason), None)
    [body] = topic()
    assert body == f"[p] execution FAILED at step FineTune: {reason} (execution {EXECUTION_ARN}). {DETAILS}"


def test_a_persons_approval_note_of_any_text_reaches_the_topic_whole(topic):
    note = hostile("Rejected because")
    notify.handler(package_event("Rejected", ApprovalDescription=note), None)
    [body] = topic()
    assert f"was Rejected ({note}): F1 91.2 on s3://datasets-bucket/datasets/a/v1/manifest.json" in body
    assert body.endswith(DETAILS)


def test_a_model_waiting_for_approval_quotes_its_metadata_whole(topic):
    manifest = hostile("s3://datasets-bucket/datasets/odd")
    event = package_event("PendingManualApproval")
    event["detail"]["CustomerMetadataProperties"]["dataset_manifest"] = manifest
    notify.handler(event, None)
    [body] = topic()
    assert f"is waiting for approval: F1 91.2 on {manifest}, report s3://artifacts/" in body
    assert f"(execution {EXECUTION_ARN})" in body


def claim(**outputs: str) -> dict[str, str]:
    return {CLAIM_DUPLICATE: DUPLICATE_NO, CLAIM_IGNORED: "", CLAIM_CLAIMED_BY: EXECUTION_ARN, **outputs}


def test_first_delivery_tells_a_duplicate_and_a_key_that_is_no_manifest_and_nothing_for_a_real_run(topic, monkeypatch):
    """The duplicate is read from the claim step's outputs, not from an event field no AWS page documents."""
    ignored = hostile("'datasets/a/b\"c/manifest.json' is not a manifest key")
    outputs = {
        "duplicate": claim(**{CLAIM_DUPLICATE: DUPLICATE_YES, CLAIM_CLAIMED_BY: OWNER_ARN}),
        "ignored": claim(**{CLAIM_IGNORED: ignored}),
        "real": claim(),
    }
    for case, expected in (
        ("duplicate", f"the dataset version is claimed by execution {OWNER_ARN} (execution {EXECUTION_ARN} ends"),
        ("ignored", f"[p] nothing trained: {ignored} (execution {EXECUTION_ARN} ends Succeeded). {DETAILS}"),
    ):
        monkeypatch.setattr(notify, "claim_outputs", lambda arn, step, case=case: outputs[case])
        notify.handler(step_event("FirstDelivery", "Succeeded"), None)
        [body] = topic()
        assert expected in body, case
    monkeypatch.setattr(notify, "claim_outputs", lambda arn, step: outputs["real"])
    assert notify.handler(step_event("FirstDelivery", "Succeeded"), None) == {}
    assert topic() == []


def test_an_execution_that_succeeded_names_itself(topic):
    detail = {
        "currentPipelineExecutionStatus": "Succeeded",
        "previousPipelineExecutionStatus": "Executing",
        "pipelineArn": PIPELINE_ARN,
        "pipelineExecutionArn": EXECUTION_ARN,
    }
    notify.handler(sagemaker_event(contract.EXECUTION_STATUS_CHANGE, detail), None)
    [body] = topic()
    assert body.startswith(f"[p] execution Succeeded: {EXECUTION_ARN}. ") and body.endswith(DETAILS)


def test_the_claim_outputs_are_read_from_list_pipeline_execution_steps(monkeypatch):
    """botocore's Stubber (moto 5.2.5 has no ListPipelineExecutionSteps), which checks the request and the response
    against the SageMaker API model: LambdaStepMetadata.OutputParameters
    (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_LambdaStepMetadata.html)."""
    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    steps = [
        {"StepName": "FirstDelivery", "StepStatus": "Succeeded", "Metadata": {"Condition": {"Outcome": "False"}}},
        {
            "StepName": "ClaimManifest",
            "StepStatus": "Succeeded",
            "Metadata": {
                "Lambda": {
                    "Arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:claim",
                    "OutputParameters": [
                        {"Name": CLAIM_DUPLICATE, "Value": DUPLICATE_YES},
                        {"Name": CLAIM_CLAIMED_BY, "Value": OWNER_ARN},
                    ],
                }
            },
        },
    ]
    monkeypatch.setattr(boto3, "client", lambda service, **kwargs: client)
    with Stubber(client) as stub:
        stub.add_response(
            "list_pipeline_execution_steps",
            {"PipelineExecutionSteps": steps[:1], "NextToken": "page2"},
            {"PipelineExecutionArn": EXECUTION_ARN},
        )
        stub.add_response(
            "list_pipeline_execution_steps",
            {"PipelineExecutionSteps": steps[1:]},
            {"PipelineExecutionArn": EXECUTION_ARN, "NextToken": "page2"},
        )
        outputs = notify.claim_outputs(EXECUTION_ARN, "ClaimManifest")
    assert outputs == {CLAIM_DUPLICATE: DUPLICATE_YES, CLAIM_CLAIMED_BY: OWNER_ARN}


@pytest.mark.parametrize(
    "event",
    [
        sagemaker_event("SageMaker Training Job State Change", {}),
        step_event("FineTune", "Succeeded"),  # no rule sends it: a wiring mistake, not a silent success
    ],
)
def test_an_event_no_rule_should_send_is_an_error(event):
    with pytest.raises(ValueError, match="no notification"):
        notify.message(event, ENVIRONMENT)
