"""cdk-nag AwsSolutions over the whole app (its own App: nag must not touch the shared one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3

from config import load_settings
from stacks.app_builder import build_stacks
from stacks.nag import RULE_PACK, add_reviewed_statement
from tests.stacks.conftest import nag_synth


def nag_report(app: cdk.App, outdir: Path) -> tuple[bool, list[str]]:
    """Synthesize under AwsSolutionsChecks: (synth passed, rule names of unacknowledged findings)."""
    passed, report = nag_synth(app, outdir)
    return passed, [v["ruleName"] for v in report["violations"]]


def acknowledgments(app: cdk.App) -> set[tuple[str, str, str]]:
    """(construct path, finding id, reason) of every cdk-nag acknowledgment in the app's construct tree (CDK
    acknowledges some findings of its own CloudFormation validator itself)."""
    return {
        (construct.node.path, finding, reason)
        for construct in app.node.find_all()
        for entry in construct.node.metadata
        if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        for finding, reason in entry.data.items()
        if finding.startswith(f"{RULE_PACK}::")
    }


@pytest.fixture(scope="module", params=["dev", "prod"])
def nagged(request, cdk_context, tmp_path_factory) -> tuple[cdk.App, bool, dict[str, Any]]:
    """(the app of one environment, whether its synth under cdk-nag passed, the validation report)."""
    outdir = tmp_path_factory.mktemp(f"nag-{request.param}")
    app = cdk.App(context=cdk_context, outdir=str(outdir))
    build_stacks(app, load_settings({**cdk_context, "env": request.param}))
    return (app, *nag_synth(app, outdir))


def test_whole_app_has_no_unacknowledged_findings(nagged):
    _, passed, report = nagged
    assert [v["ruleName"] for v in report["violations"]] == []
    assert passed


def test_every_acknowledgment_excuses_a_finding_below_it_and_none_sits_on_a_stack(nagged):
    app, _, report = nagged
    used = {(v["acknowledgedAt"], v["acknowledgedId"]) for v in report["suppressedViolations"]}
    recorded = {(path, finding) for path, finding, _ in acknowledgments(app)}
    assert recorded and recorded == used
    stacks = {stack.node.path for stack in app.node.children if isinstance(stack, cdk.Stack)}
    assert not {path for path, _ in recorded} & stacks


def test_every_acknowledgment_has_a_reason(nagged):
    app, _, _ = nagged
    for path, finding, reason in acknowledgments(app):
        assert len(reason.split()) >= 8, (path, finding)


def test_a_new_finding_fails_the_check(cdk_context, tmp_path):
    app = cdk.App(context=cdk_context, outdir=str(tmp_path))
    stacks = build_stacks(app, load_settings(cdk_context))
    s3.Bucket(stacks.data, "CarelessBucket")  # no TLS enforcement, no access logs
    passed, violations = nag_report(app, tmp_path)
    assert not passed
    assert "AwsSolutions-S1" in violations and "AwsSolutions-S10" in violations


def test_an_acknowledgment_covers_only_the_construct_it_is_recorded_on(cdk_context, tmp_path, monkeypatch):
    """Without the functions' own acknowledgments their wildcards fail the check, although the job role
    acknowledges the same finding id (inputs/*) for itself."""
    monkeypatch.setattr(
        "stacks.functions.add_reviewed_statement",
        lambda grantee, statement, reason: grantee.grant_principal.add_to_principal_policy(statement),
    )
    app = cdk.App(context=cdk_context, outdir=str(tmp_path))
    settings = load_settings(cdk_context)
    build_stacks(app, settings)
    passed, report = nag_synth(app, tmp_path)
    assert not passed
    failing = {
        (v["ruleName"], construct["constructPath"])
        for v in report["violations"]
        for construct in v["violatingConstructs"]
    }
    assert {rule.split("[")[0] for rule, _ in failing} == {"AwsSolutions-IAM5"}
    pipeline = settings.stack_name("pipeline")
    assert {path for _, path in failing} == {
        f"{pipeline}/Functions/{function}/Role/DefaultPolicy/Resource"
        for function in ("ClaimManifest", "EstimateTrainingCost", "RecordModel")
    }
    inputs = f"/{settings.layout.inputs}/*]"
    assert any(rule.endswith(inputs) for rule, _ in failing)
    assert any(v["ruleName"].endswith(inputs) for v in report["suppressedViolations"])


def test_wildcards_next_to_references_and_attributes_are_acknowledged_by_the_statements_own_values(
    cdk_context, tmp_path
):
    """The app's wildcard ARNs hold pseudo parameters only; cdk-nag names a Ref or a GetAtt its own way."""
    app = cdk.App(context=cdk_context, outdir=str(tmp_path))
    stack = cdk.Stack(app, "Bare")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    bucket = cdk.CfnParameter(stack, "Bucket").value_as_string
    resources = [f"arn:{cdk.Aws.PARTITION}:s3:::{bucket}/*", f"{role.role_arn}-*"]
    statement = iam.PolicyStatement(actions=["s3:GetObject"], resources=resources)
    add_reviewed_statement(role, statement, "A test statement: its wildcards are what this test is about.")
    passed, violations = nag_report(app, tmp_path)
    assert violations == [] and passed
