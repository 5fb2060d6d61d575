"""Every AWS failure a tool meets ends in one `error:` line naming the API and why, also where the endpoint
answers with a web page instead of an AWS error (moto 5.2.5 answers ListPipelineExecutionSteps, which it does
not implement, with a multi-line "500 Internal Server Error" HTML page), and `make retry` in a region without
the pipeline or execution says so and names the region it used."""

from __future__ import annotations

import re

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.tools.conftest import EMPTY_REGION, REGION, assert_one_line_error, run_cli
from tools.deployment import ToolError, describe_aws_failure, load_deployment
from tools.executions import retry

# What moto_server answers for an API it does not implement (Flask's error page), byte for byte.
MOTO_500_PAGE = (
    "<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n<h1>Internal Server Error</h1>\n"
    "<p>The server encountered an internal error and was unable to complete your request. Either the server is "
    "overloaded or there is an error in the application.</p>\n"
)
WEB_PAGE = "(the endpoint answered with a web page, not an AWS error: it may not implement this API)"
EXECUTION_ID = "abc123"
ARN = f"arn:aws:sagemaker:{REGION}:123456789012:pipeline/hfqa-dev-qa-fine-tuning/execution/{EXECUTION_ID}"


def client_error(code: str, message: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


def test_an_html_error_page_is_one_line_naming_the_api():
    described = describe_aws_failure(client_error("500", MOTO_500_PAGE, "ListPipelineExecutionSteps"))
    assert described == f"AWS ListPipelineExecutionSteps failed: HTTP 500 Internal Server Error {WEB_PAGE}"


def test_a_multi_line_aws_message_is_one_line():
    error = client_error("ValidationException", "first line\n  second line\n", "StartPipelineExecution")
    assert (
        describe_aws_failure(error) == "AWS StartPipelineExecution failed: ValidationException first line second line"
    )


def started_execution(deployed) -> str:
    """A fresh pipeline with one execution (moto runs none of its steps); its id."""
    deployed.replace_pipeline(deployed.pipeline_definition)
    arn = deployed.client("sagemaker").start_pipeline_execution(
        PipelineName=deployed.pipeline_name, PipelineParameters=[{"Name": "Epochs", "Value": "1"}]
    )
    return str(arn["PipelineExecutionArn"]).rsplit("/", 1)[-1]


def test_make_runs_and_make_logs_against_the_emulator_are_one_line(deployed, deployed_env):
    execution = started_execution(deployed)
    try:
        for command in (("tools.runs",), ("tools.executions", "logs", "--execution", execution)):
            result = run_cli(*command, env=deployed_env)
            assert_one_line_error(result, "AWS ListPipelineExecutionSteps failed: HTTP 500", WEB_PAGE)
    finally:
        deployed.replace_pipeline(deployed.pipeline_definition)


def test_retry_in_a_region_without_the_pipeline_names_the_region(aws):
    """By id: the pipeline is looked up in the tools' region (DescribePipeline answers ResourceNotFound on AWS,
    ValidationException on moto: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribePipeline.html)."""
    result = run_cli("tools.executions", "retry", "--execution", EXECUTION_ID, env=aws)
    assert_one_line_error(result, f"pipeline hfqa-dev-qa-fine-tuning not found in {EMPTY_REGION}: check AWS_REGION")


def test_retry_of_an_execution_arn_of_another_region_names_both(aws):
    """By ARN: DescribePipelineExecution in the tools' region finds nothing
    (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribePipelineExecution.html)."""
    assert boto3.client("sagemaker").list_pipelines()["PipelineSummaries"] == []  # nothing in this region
    expected = f"execution {EXECUTION_ID} (its ARN names {REGION}) not found in {EMPTY_REGION}: check AWS_REGION"
    with pytest.raises(ToolError, match=re.escape(expected)):
        retry(load_deployment("dev"), ARN)
