"""cdk-nag AwsSolutions over the whole app (its own App: nag must not touch the shared one)."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks

from config import load_settings
from stacks.app_builder import build_stacks
from stacks.nag import reviewed_findings


def nag_report(app: cdk.App, outdir) -> tuple[bool, list[str]]:
    """Synthesize under AwsSolutionsChecks: (synth passed, rule names of unacknowledged findings)."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
        passed = True
    except Exception:  # jsii raises a generic error carrying the validation report
        passed = False
    report = json.loads((outdir / "validation-report.json").read_text())
    violations = [v["ruleName"] for p in report["pluginReports"] for v in p["violations"]]
    return passed, violations


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_whole_app_has_no_unacknowledged_findings(cdk_context, tmp_path, env_name):
    app = cdk.App(context=cdk_context, outdir=str(tmp_path))
    build_stacks(app, load_settings({**cdk_context, "env": env_name}))
    passed, violations = nag_report(app, tmp_path)
    assert violations == []
    assert passed


def test_a_new_finding_fails_the_check(cdk_context, tmp_path):
    app = cdk.App(context=cdk_context, outdir=str(tmp_path))
    stacks = build_stacks(app, load_settings(cdk_context))
    s3.Bucket(stacks.data, "CarelessBucket")  # no TLS enforcement, no access logs
    passed, violations = nag_report(app, tmp_path)
    assert not passed
    assert "AwsSolutions-S1" in violations and "AwsSolutions-S10" in violations


def test_every_acknowledgment_has_a_reason(cdk_context):
    settings = load_settings(cdk_context)
    for finding_id, reason in reviewed_findings(settings, "group").items():
        assert finding_id.startswith("AwsSolutions::AwsSolutions-")
        assert len(reason.split()) >= 8, finding_id
