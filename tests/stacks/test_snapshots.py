"""Snapshots of every synthesized template (asset hashes masked). Review diffs before `--snapshot-update`."""

from __future__ import annotations

import json
import re

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def masked(template: dict) -> dict:
    """The template with content hashes of assets replaced, so code edits don't churn snapshots."""
    return json.loads(ASSET_HASH.sub("<asset-hash>", json.dumps(template, sort_keys=True)))


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
