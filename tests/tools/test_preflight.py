"""tools.preflight against the moto server, with Service Quotas stubbed (moto 5.2.5 has no SageMaker quotas
and no ListServiceQuotas)."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from tests.tools.conftest import (
    BOOTSTRAP_VERSION_PARAMETER,
    REGION,
    assert_one_line_error,
    run_cli,
    small_model,
    stage_base_model,
)
from tools.deployment import load_deployment, split_s3_uri
from tools.preflight import MIN_BOOTSTRAP_VERSION, check_bootstrap, preflight

# What the dev environment uses: 1 x ml.p4d.24xlarge on spot (the estimate's default) for FineTune, one
# ml.m5.4xlarge for ValidateAndTokenize. The Lambda steps need no SageMaker quota.
ENOUGH = {
    "ml.p4d.24xlarge for spot training job usage": 1.0,
    "ml.p4d.24xlarge for training job usage": 1.0,
    "ml.m5.4xlarge for processing job usage": 1.0,
}


def stubbed_quotas(defaults: dict[str, float], applied: dict[str, float]) -> Stubber:
    """A Service Quotas client answering one ListAWSDefaultServiceQuotas and one ListServiceQuotas call."""
    client = boto3.client("service-quotas", region_name=REGION)
    stubber = Stubber(client)
    for operation, values in (("list_aws_default_service_quotas", defaults), ("list_service_quotas", applied)):
        quotas = [{"QuotaName": name, "Value": value, "ServiceCode": "sagemaker"} for name, value in values.items()]
        stubber.add_response(operation, {"Quotas": quotas}, {"ServiceCode": "sagemaker"})
    stubber.activate()
    return stubber


def run_preflight(stubber: Stubber, capsys) -> tuple[int, str]:
    code = preflight("dev", stubber.client)
    stubber.assert_no_pending_responses()
    return code, capsys.readouterr().out


def row(table: str, name: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(name))


def test_fails_on_missing_model_and_zero_quota_then_passes_when_fixed(deployed, tmp_path, capsys):
    zero_spot = {**ENOUGH, "ml.p4d.24xlarge for spot training job usage": 0.0}
    code, table = run_preflight(stubbed_quotas(zero_spot, {}), capsys)
    assert code == 1
    assert row(table, "base model staged").split()[3] == "FAIL"
    assert "fix: make stage-model MODEL=bert-large-uncased-whole-word-masking ENV=dev" in table
    assert "FAIL    0 < 1" in row(table, "quota ml.p4d.24xlarge for spot training job usage")
    assert table.strip().endswith("2 of 10 checks failed")

    stage_base_model(deployed, tmp_path)
    # The increase is an applied quota value: it overrides AWS's default of 0.
    code, table = run_preflight(stubbed_quotas(zero_spot, {"ml.p4d.24xlarge for spot training job usage": 4.0}), capsys)
    assert code == 0, table
    assert "FAIL" not in table
    assert table.strip().endswith("all 10 checks passed")


def test_quota_rows_follow_the_step_graph(deployed, capsys):
    """One row per quota the graph uses: FineTune's training type (spot and on-demand) and ValidateAndTokenize's
    processing type; no GPU processing quota (evaluation runs inside FineTune) and none for the Lambda steps."""
    _, table = run_preflight(stubbed_quotas(ENOUGH, {}), capsys)
    quota_rows = [line.split("  ")[0] for line in table.splitlines() if line.startswith("quota ")]
    assert quota_rows == [f"quota {name}" for name in ENOUGH]


def test_the_unused_purchase_option_only_warns(deployed, tmp_path, capsys):
    stage_base_model(deployed, tmp_path)
    code, table = run_preflight(stubbed_quotas({**ENOUGH, "ml.p4d.24xlarge for training job usage": 0.0}, {}), capsys)
    assert code == 0
    assert "WARN    0 < 1 (only needed if training.use_spot changes)" in row(
        table, "quota ml.p4d.24xlarge for training"
    )


def test_nothing_deployed_lists_every_fix(aws, capsys):
    code, table = run_preflight(stubbed_quotas(ENOUGH, {}), capsys)
    assert code == 1
    assert "not bootstrapped (qualifier hnb659fds)" in row(table, "CDK bootstrap")
    assert "fix: cdk bootstrap aws://123456789012/eu-west-1" in table
    for stack in ("hfqa-dev-data", "hfqa-dev-network", "hfqa-dev-pipeline"):
        assert "FAIL    not deployed" in row(table, f"stack {stack}")
    assert "does not exist" in row(table, "datasets bucket")
    assert "the bucket of the base model s3://hfqa-dev-artifacts-" in row(table, "base model staged")


def test_the_real_bootstrap_template_passes(deployed):
    check = check_bootstrap(load_deployment("dev"))
    assert check.status == "ok", check


@pytest.mark.parametrize(("version", "status"), [(MIN_BOOTSTRAP_VERSION - 1, "FAIL"), (MIN_BOOTSTRAP_VERSION, "ok")])
def test_bootstrap_version(deployed, version, status):
    ssm = deployed.client("ssm")
    deployed_version = ssm.get_parameter(Name=BOOTSTRAP_VERSION_PARAMETER)["Parameter"]["Value"]
    ssm.put_parameter(Name=BOOTSTRAP_VERSION_PARAMETER, Value=str(version), Type="String", Overwrite=True)
    try:
        assert check_bootstrap(load_deployment("dev")).status == status
    finally:
        ssm.put_parameter(Name=BOOTSTRAP_VERSION_PARAMETER, Value=deployed_version, Type="String", Overwrite=True)


def test_command_against_moto_prints_the_table(deployed, deployed_env):
    """As `make preflight` runs it: moto answers everything but SageMaker quotas, which fail as one row."""
    result = run_cli("tools.preflight", "--env", "dev", env=deployed_env)
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert "stack hfqa-dev-pipeline" in result.stdout and "base model staged" in result.stdout
    assert row(result.stdout, "datasets bucket").split()[2] == "ok"


def test_command_without_credentials_is_one_line(aws):
    env = {k: v for k, v in aws.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    assert_one_line_error(run_cli("tools.preflight", env=env), "no AWS credentials found")


def test_a_staged_config_that_contradicts_the_settings_fails(deployed, tmp_path, capsys):
    """A complete model folder at the configured base model's path that is another model (hidden size 384
    where bert-large has 1024): preflight says so instead of "ok"."""
    bucket, prefix = split_s3_uri(deployed.base_model_uri)
    for path in small_model(tmp_path / "other", {"model_type": "bert", "hidden_size": 384}).iterdir():
        deployed.client("s3").upload_file(str(path), bucket, f"{prefix}{path.name}")
    code, table = run_preflight(stubbed_quotas(ENOUGH, {}), capsys)
    assert code == 1
    assert "hidden_size is 384, not 1024 ('large')" in row(table, "base model staged")
    assert "fix: make stage-model MODEL=bert-large-uncased-whole-word-masking ENV=dev REPLACE=1" in table
