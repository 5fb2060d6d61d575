"""The synthesized dev pipeline created straight through moto's SageMaker API, each `${...}` deploy-time
placeholder given a stand-in value (a deployment would resolve them through CloudFormation; the tools here
read only the definition back)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import boto3
import pytest

from stacks.assembly import synthesized_definition

ROLE_ARN = "arn:aws:iam::123456789012:role/hfqa-dev-pipeline-role"


@dataclass(frozen=True)
class MotoPipeline:
    name: str
    definition: str  # as deployed: placeholders replaced
    region: str

    def replace(self, definition: str | None) -> None:
        """Delete the pipeline, and create it again with `definition` unless None."""
        sagemaker = boto3.client("sagemaker", region_name=self.region)
        if sagemaker.list_pipelines(PipelineNamePrefix=self.name)["PipelineSummaries"]:
            sagemaker.delete_pipeline(PipelineName=self.name)
        if definition is not None:
            sagemaker.create_pipeline(PipelineName=self.name, PipelineDefinition=definition, RoleArn=ROLE_ARN)


@pytest.fixture
def moto_pipeline(aws, dev) -> Iterator[MotoPipeline]:
    """The pipeline in the `aws` fixture's region, for one test."""
    text, _ = synthesized_definition(dev.templates["pipeline"])
    deployed = re.sub(r"\$\{([^}]+)\}", lambda m: "deployed-" + re.sub(r"\W", "-", m.group(1)), text)
    json.loads(deployed)  # still JSON: every placeholder sits inside a string
    pipeline = MotoPipeline(dev.settings.pipeline_name, deployed, aws["AWS_REGION"])
    pipeline.replace(deployed)
    yield pipeline
    pipeline.replace(None)
