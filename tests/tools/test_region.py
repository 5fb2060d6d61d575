"""AWS_REGION selects the region for every tool that calls AWS, alone and over AWS_DEFAULT_REGION, as in the
AWS SDKs and the AWS CLI v2 (https://docs.aws.amazon.com/sdkref/latest/guide/feature-region.html,
https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-envvars.html). boto3 reads only AWS_DEFAULT_REGION
and the config file; tools/deployment.py's `aws_session` is every tool's session. Each command below must reach
the deployed us-east-1 resources: its output names something found there."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.tools.conftest import BERT_LARGE_CONFIG, EMPTY_REGION, REGION, run_cli, small_model

SAMPLE = str(ROOT / "data" / "sample-squad")
PACKAGE = "arn:aws:sagemaker:us-east-1:123456789012:model-package/x/1"
# make report and tools.pipeline_diff made their sessions with boto3.Session(), which reads AWS_DEFAULT_REGION only.
TOOLS_THAT_TOOK_THEIR_OWN_SESSION = [
    (("tools.report", "--execution", "nosuchid", "--no-tracking"), "no execution 'nosuchid' of pipeline"),
    (("tools.pipeline_diff", "--assembly", "{assembly}"), "pipeline definition hfqa-dev-qa-fine-tuning, step by"),
]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (("tools.preflight",), f"region {REGION}"),
        (("tools.runs",), "costs at on-demand LIST prices"),
        (("tools.upload_dataset", "--dataset", SAMPLE, "--name", "r", "--version", "v1"), "base model not staged"),
        (("tools.executions", "start", "--name", "r", "--version", "v1"), "no manifest at s3://hfqa-dev-datasets-"),
        (("tools.stage_model", "--name", "region-check", "--model", "{model}"), "staged: s3://hfqa-dev-artifacts-"),
        (("tools.verify_model", "--package", PACKAGE), "not found"),
    ],
)
def test_aws_region_alone_selects_the_region(deployed, deployed_env, dev, tmp_path, command, expected):
    environment = {k: v for k, v in deployed_env.items() if k != "AWS_DEFAULT_REGION"}
    output = run_in(deployed, dev, tmp_path, command, environment)
    assert "no AWS region" not in output
    assert expected in output, output


@pytest.mark.parametrize(("command", "expected"), TOOLS_THAT_TOOK_THEIR_OWN_SESSION)
def test_aws_region_wins_over_aws_default_region(deployed, deployed_env, dev, tmp_path, command, expected):
    """AWS_DEFAULT_REGION names the empty region: a tool that read it would find no pipeline there (and one
    that read nothing but it would say "no AWS region" with AWS_REGION alone, as these two did)."""
    output = run_in(deployed, dev, tmp_path, command, {**deployed_env, "AWS_DEFAULT_REGION": EMPTY_REGION})
    assert expected in output, output


def run_in(deployed, dev, tmp_path: Path, command: tuple[str, ...], environment: dict[str, str]) -> str:
    deployed.replace_pipeline(deployed.pipeline_definition)  # without earlier executions (moto cannot list steps)
    model = small_model(tmp_path / "m", BERT_LARGE_CONFIG)
    result = run_cli(*(part.format(model=model, assembly=dev.assembly) for part in command), env=environment)
    return result.stdout + result.stderr


def test_no_tool_makes_its_own_boto3_session():
    """`aws_session` is the one place a session (and so its region) is made: no other module of tools/ or
    reporting/ calls boto3 itself."""
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for folder in ("tools", "reporting")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != ROOT / "tools" / "deployment.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "boto3"
    ]
    assert offenders == []


def test_no_region_at_all_is_one_line_naming_aws_region(aws):
    environment = {k: v for k, v in aws.items() if k not in ("AWS_REGION", "AWS_DEFAULT_REGION")}
    result = run_cli("tools.runs", env=environment)
    assert result.returncode == 1 and result.stderr.startswith("error: no AWS region: set AWS_REGION")
