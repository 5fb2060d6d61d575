"""cfn-lint over every synthesized template: no errors, and the warnings we accept listed explicitly."""

from __future__ import annotations

import json

import pytest
from cfnlint.api import ManualArgs, lint

REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
# Warnings reviewed and accepted, by rule id, with the reason.
ACCEPTED_WARNINGS: dict[str, str] = {
    "W3005": "aws-cdk-lib's S3 auto-delete provider (dev only) declares a DependsOn that a GetAtt already "
    "implies; harmless and not ours to change.",
}


@pytest.mark.parametrize("env_name", ["dev", "prod"])
@pytest.mark.parametrize("which", ["data", "network", "pipeline"])
def test_cfn_lint_clean(synthesized, env_name, which):
    template = json.dumps(synthesized[env_name].templates[which])
    matches = lint(template, config=ManualArgs(regions=REGIONS))
    problems = [
        f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})"
        for m in matches
        if m.rule.id.startswith("E") or (m.rule.id.startswith("W") and m.rule.id not in ACCEPTED_WARNINGS)
    ]
    assert problems == []


def test_cfn_lint_clean_with_the_cpu_job(synthesized_cpu_job):
    """processing.tokenize_in "cpu_job" changes the pipeline stack only (the claim's size, the estimate's read, the
    processing job's grants)."""
    matches = lint(json.dumps(synthesized_cpu_job["dev"].templates["pipeline"]), config=ManualArgs(regions=REGIONS))
    assert [f"{m.rule.id} {m.message}" for m in matches if m.rule.id not in ACCEPTED_WARNINGS] == []


def test_cfn_lint_catches_errors():
    bad = {"Resources": {"B": {"Type": "AWS::S3::Bucket", "Properties": {"BucketNam": "x"}}}}
    assert any(m.rule.id.startswith("E") for m in lint(json.dumps(bad), config=ManualArgs(regions=REGIONS)))
