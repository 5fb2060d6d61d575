"""cdk.json sets the feature flags the installed aws-cdk-lib recommends (what `cdk init` writes), so synth prints
no "feature flags are not configured" line; the project's own choices are listed with their reason in README.md."""

from __future__ import annotations

import json
import tarfile
from importlib.metadata import version
from pathlib import Path

import aws_cdk

# Flags set against the recommendation (README "Configuration", feature flags).
PROJECT_CHOICES = {
    "@aws-cdk/aws-s3:keepNotificationInImportedBucket": True,
    "@aws-cdk/core:defaultCrossStackReferences": "strong",
    "@aws-cdk/core:enableAdditionalMetadataCollection": False,
}


def recommended_flags() -> dict[str, object]:
    """aws-cdk-lib's recommended-feature-flags.json, read from the jsii bundle the Python package ships."""
    bundle = Path(aws_cdk.__file__).parent / "_jsii" / f"aws-cdk-lib@{version('aws-cdk-lib')}.jsii.tgz"
    with tarfile.open(bundle) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        return dict(json.load(member))


def test_cdk_json_sets_every_recommended_flag_and_no_other(cdk_context):
    flags = {key: value for key, value in cdk_context.items() if key.startswith("@")}
    assert flags == {**recommended_flags(), **PROJECT_CHOICES}


def test_project_choices_differ_from_the_recommendation():
    recommended = recommended_flags()
    assert all(recommended[key] != value for key, value in PROJECT_CHOICES.items())
