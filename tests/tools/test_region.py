"""AWS_REGION alone selects the region for every tool that calls AWS (boto3 reads only AWS_DEFAULT_REGION and
the config file; tools/deployment.py maps AWS_REGION onto each session). Each command below gets only
AWS_REGION and must reach the deployed us-east-1 resources: its output names something found there."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.tools.conftest import BERT_LARGE_CONFIG, REGION, run_cli, small_model

SAMPLE = str(ROOT / "data" / "sample-squad")
PACKAGE = "arn:aws:sagemaker:us-east-1:123456789012:model-package/x/1"


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
def test_aws_region_alone_selects_the_region(deployed, deployed_env, tmp_path, command, expected):
    environment = {k: v for k, v in deployed_env.items() if k != "AWS_DEFAULT_REGION"}
    deployed.replace_pipeline(deployed.pipeline_definition)  # without earlier executions (moto cannot list steps)
    model = small_model(tmp_path / "m", BERT_LARGE_CONFIG)
    result = run_cli(*(part.format(model=model) for part in command), env=environment)
    output = result.stdout + result.stderr
    assert "no AWS region" not in output
    assert expected in output, output


def test_no_region_at_all_is_one_line_naming_aws_region(aws):
    environment = {k: v for k, v in aws.items() if k not in ("AWS_REGION", "AWS_DEFAULT_REGION")}
    result = run_cli("tools.runs", env=environment)
    assert result.returncode == 1 and result.stderr.startswith("error: no AWS region: set AWS_REGION")
