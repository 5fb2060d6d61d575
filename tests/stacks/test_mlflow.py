"""The optional managed MLflow tracking server (tracking.managed_server): its own App, with cdk-nag."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from config import load_settings
from stacks.app_builder import build_stacks
from tests.conftest import resources_of_type
from tests.stacks.conftest import bucket_arn, joined
from tests.stacks.test_cdk_nag import nag_report
from tools.idle_cost import HOURS_PER_MONTH, MLFLOW_SERVER_USD_PER_HOUR, idle_cost

SERVER = "AWS::SageMaker::MlflowTrackingServer"


@pytest.fixture(scope="module")
def with_server(cdk_context, tmp_path_factory):
    """(settings, templates, cdk-nag findings the server adds, findings it removes): one App for the
    templates, then the app with and without the server under cdk-nag."""
    context = {**cdk_context, "env": "dev", "tracking.managed_server": "true", "tracking.server_size": "Medium"}
    settings = load_settings(context)
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("mlflow-app")))
    stacks = build_stacks(app, settings)
    assembly = app.synth()
    templates = [assembly.get_stack_by_name(s.stack_name).template for s in stacks.all()]
    findings = []
    for nag_settings in (settings, load_settings({**cdk_context, "env": "dev"})):
        nag_dir = tmp_path_factory.mktemp("mlflow-nag")
        nag_app = cdk.App(context=cdk_context, outdir=str(nag_dir))
        build_stacks(nag_app, nag_settings)
        findings.append(set(nag_report(nag_app, nag_dir)[1]))
    with_it, without = findings
    return settings, templates, with_it - without, without - with_it


def test_default_settings_create_no_server(dev, prod):
    for environment in (dev, prod):
        assert not resources_of_type(environment.templates["pipeline"], SERVER)


def test_the_server_stores_artifacts_in_the_artifacts_bucket_with_its_own_role(with_server):
    settings, templates, _, _ = with_server
    pipeline = templates[2]
    [server] = resources_of_type(pipeline, SERVER).values()
    props = server["Properties"]
    assert props["TrackingServerName"] == settings.mlflow_server_name
    assert props["TrackingServerSize"] == "Medium"
    assert props["AutomaticModelRegistration"] is False
    assert props["ArtifactStoreUri"] == joined(
        f"s3://{settings.bucket_name('artifacts', '<account>', '<region>')}/mlflow"
    )
    role_id = props["RoleArn"]["Fn::GetAtt"][0]
    trust = pipeline["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "sagemaker.amazonaws.com"}]
    Template.from_json(pipeline).has_output("MlflowTrackingServerArn", {})


def test_the_servers_role_writes_only_under_its_prefix(with_server):
    settings, templates, _, _ = with_server
    pipeline = templates[2]
    [server] = resources_of_type(pipeline, SERVER).values()
    role_id = server["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources_of_type(pipeline, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    writes = [s for statements in policies for s in statements if "s3:PutObject" in s["Action"]]
    assert [s["Resource"] for s in writes] == [bucket_arn(settings, "artifacts", "/mlflow/*")]


def test_the_server_adds_no_cdk_nag_finding(with_server):
    _, _, added, removed = with_server
    assert added == set() and removed == set()


def test_the_idle_cost_counts_the_server(with_server):
    _, templates, _, _ = with_server
    cost = idle_cost(templates)
    assert cost.mlflow_servers == ("Medium",)
    assert cost.monthly_usd >= MLFLOW_SERVER_USD_PER_HOUR["Medium"] * HOURS_PER_MONTH
    assert "MLflow tracking server (Medium)" in cost.describe()
