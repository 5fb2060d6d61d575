"""Compose the stacks of one environment into an App (shared by app.py and the tests)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk

from config import Settings
from stacks.checkov import CheckovAcknowledgments
from stacks.data import DataStack
from stacks.network import NetworkStack
from stacks.pipeline import PipelineStack
from stacks.source_bundle import DEFAULT_BUILD_DIR


@dataclass(frozen=True)
class ProjectStacks:
    """The stacks of one environment, wired by passing constructs (never by re-typed names): `pipeline` is the
    pipeline of the environment's task, `more_pipelines` those of its `pipelines` setting, in that order."""

    data: DataStack
    network: NetworkStack
    pipeline: PipelineStack
    more_pipelines: tuple[PipelineStack, ...] = ()

    def all(self) -> tuple[cdk.Stack, ...]:
        return (self.data, self.network, self.pipeline, *self.more_pipelines)


def build_stacks(
    app: cdk.App, settings: Settings, build_dir: Path | None = None, definition_cache: Path | None = None
) -> ProjectStacks:
    """Add the Data, Network and Pipeline stacks for `settings` to `app`.

    `build_dir` receives the training-code bundle before CDK copies it into the assembly; `definition_cache`
    keeps built pipeline definitions for the next synth with the same inputs (None: always build).
    """
    build_dir = build_dir or DEFAULT_BUILD_DIR
    tags = {"project": settings.name_prefix, "environment": settings.env_name}
    # Production stacks cannot be deleted by a stray `cdk destroy` (CloudFormation termination protection).
    # Stack tags are given explicitly: with feature flag @aws-cdk/core:explicitStackTags, `Tags.of(stack)` no longer
    # tags the CloudFormation stack. CloudFormation propagates stack tags to resources, how depending on the type.
    # https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-resource-tags.html
    common = {
        "env": cdk.Environment(account=settings.account, region=settings.region),
        "termination_protection": settings.production,
        "tags": tags,
    }
    data = DataStack(app, settings.stack_name("data"), settings=settings, **common)
    network = NetworkStack(app, settings.stack_name("network"), settings=settings, key=data.project_key.key, **common)
    pipeline, *more_pipelines = (
        PipelineStack(
            app,
            pipeline_settings.stack_name("pipeline"),
            settings=pipeline_settings,
            data=data,
            network=network,
            build_dir=build_dir,
            definition_cache=definition_cache,
            **common,
        )
        for pipeline_settings in settings.deployed_pipelines
    )
    stacks = ProjectStacks(data=data, network=network, pipeline=pipeline, more_pipelines=tuple(more_pipelines))
    # And in the templates, on every resource with a Tags property (as before the flag).
    for stack in stacks.all():
        for key, value in tags.items():
            cdk.Tags.of(stack).add(key, value)
        cdk.Aspects.of(stack).add(CheckovAcknowledgments(data.access_logs_bucket.node.path))
    return stacks
