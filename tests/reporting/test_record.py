"""reporting.record's reads of SageMaker, against botocore's Stubber (no AWS): the answers as the API model
allows them, including those moto never gives (a response without PipelineParameters, a second page)."""

from __future__ import annotations

import boto3
from botocore.stub import Stubber

from reporting.record import execution_parameters

ARN = "arn:aws:sagemaker:us-east-1:123456789012:pipeline/hfqa-dev-qa-fine-tuning/execution/abcdefghijkl"


def test_execution_parameters_read_every_page_and_an_answer_without_any():
    sagemaker = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(sagemaker) as stub:
        stub.add_response("list_pipeline_parameters_for_execution", {}, {"PipelineExecutionArn": ARN})
        assert execution_parameters(sagemaker, ARN) == {}
        stub.add_response(
            "list_pipeline_parameters_for_execution",
            {"PipelineParameters": [{"Name": "Epochs", "Value": "2"}], "NextToken": "page-2"},
            {"PipelineExecutionArn": ARN},
        )
        stub.add_response(
            "list_pipeline_parameters_for_execution",
            {"PipelineParameters": [{"Name": "ManifestKey", "Value": "datasets/sq/v1/manifest.json"}]},
            {"PipelineExecutionArn": ARN, "NextToken": "page-2"},
        )
        assert execution_parameters(sagemaker, ARN) == {"Epochs": "2", "ManifestKey": "datasets/sq/v1/manifest.json"}
        stub.assert_no_pending_responses()
