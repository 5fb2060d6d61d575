"""Snapshots of every synthesized template (asset hashes and the embedded pipeline definition masked).
Review diffs before `--snapshot-update`."""

from __future__ import annotations

import json
import re

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

ASSET_HASH = re.compile(r"[0-9a-f]{64}")
# Pinned, pretty-printed, by tests/pipeline_steps/test_definition.py::test_snapshot; test_pipeline_stack.py checks
# that the template embeds exactly the built definition.
DEFINITION_MASK = "<pipeline definition: tests/pipeline_steps/__snapshots__/test_definition/test_snapshot.json>"


def masked(template: dict) -> dict:
    """The template with content hashes of assets and the definition text replaced, so code edits don't
    churn snapshots and a definition change shows once, readably, in the definition's own snapshot."""
    template = json.loads(ASSET_HASH.sub("<asset-hash>", json.dumps(template, sort_keys=True)))
    for resource in template.get("Resources", {}).values():
        if resource["Type"] == "AWS::SageMaker::Pipeline":
            body = resource["Properties"]["PipelineDefinition"]["PipelineDefinitionBody"]["Fn::Sub"]
            body[0] = DEFINITION_MASK
    return template


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.parametrize("env_name", ["dev", "prod"])
@pytest.mark.parametrize("which", ["data", "network", "pipeline"])
def test_template_snapshot(synthesized, snapshot_json, env_name, which):
    assert masked(synthesized[env_name].templates[which]) == snapshot_json


def test_masking_replaces_asset_hashes():
    template = {"S3Key": "a" * 64 + ".zip", "Other": "short"}
    assert masked(template) == {"S3Key": "<asset-hash>.zip", "Other": "short"}


def test_masking_keeps_the_definition_variables_and_hides_only_its_text():
    body = {"Fn::Sub": ['{"Steps": []}', {"JobRoleName": {"Ref": "Role"}}]}
    pipeline = {
        "Type": "AWS::SageMaker::Pipeline",
        "Properties": {"PipelineDefinition": {"PipelineDefinitionBody": body}},
    }
    [kept] = masked({"Resources": {"Pipeline": pipeline}})["Resources"].values()
    assert kept["Properties"]["PipelineDefinition"]["PipelineDefinitionBody"]["Fn::Sub"] == [
        DEFINITION_MASK,
        {"JobRoleName": {"Ref": "Role"}},
    ]
