"""tools.preflight against the moto server, with Service Quotas stubbed: moto 5.2.5's Service Quotas backend
lists default quotas of the `vpc` service only (ListAWSDefaultServiceQuotas answers NoSuchResourceException for
`sagemaker`) and has no ListServiceQuotas (an HTML error page). The quota names are SageMaker's
(https://docs.aws.amazon.com/general/latest/gr/sagemaker.html); the codes here are stand-ins."""

from __future__ import annotations

import dataclasses
import json
import zlib

import boto3
import pytest
from botocore.stub import Stubber
from qa import benchmark
from tasks import DEFAULT_TASK

from config import load_settings, read_cdk_json_context
from config.paths import CDK_JSON
from config.settings import BenchmarkSettings
from tests.conftest import ROOT
from tests.tools.conftest import (
    ACCOUNT,
    BOOTSTRAP_VERSION_PARAMETER,
    EMPTY_REGION,
    REGION,
    assert_one_line_error,
    run_cli,
    small_model,
    stage_base_model,
)
from tools.deployment import load_deployment, split_s3_uri
from tools.preflight import (
    MIN_BOOTSTRAP_VERSION,
    check_benchmark,
    check_bootstrap,
    check_job_log_groups,
    check_quotas,
    preflight,
)

# What the dev environment uses: 1 x ml.g5.2xlarge on spot (the estimate's default, issue 32) for FineTune, and
# ml.p4d.24xlarge, which TrainingInstanceType also accepts; one ml.m5.4xlarge for ValidateAndTokenize. The Lambda
# steps need no SageMaker quota.
ENOUGH = {
    "ml.g5.2xlarge for spot training job usage": 1.0,
    "ml.g5.2xlarge for training job usage": 1.0,
    "ml.p4d.24xlarge for spot training job usage": 1.0,
    "ml.m5.4xlarge for processing job usage": 1.0,
    "ml.p4d.24xlarge for training job usage": 1.0,
}


def quota_code(name: str) -> str:
    """A stand-in QuotaCode per quota name (real ones look alike: L- and 8 hex digits)."""
    return f"L-{zlib.crc32(name.encode()):08X}"


def stubbed_quotas(defaults: dict[str, float], applied: dict[str, float]) -> Stubber:
    """A Service Quotas client answering one ListAWSDefaultServiceQuotas and one ListServiceQuotas call."""
    client = boto3.client("service-quotas", region_name=REGION)
    stubber = Stubber(client)
    for operation, values in (("list_aws_default_service_quotas", defaults), ("list_service_quotas", applied)):
        quotas = [
            {"QuotaName": name, "QuotaCode": quota_code(name), "Value": value, "ServiceCode": "sagemaker"}
            for name, value in values.items()
        ]
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
    zero_spot = {**ENOUGH, "ml.g5.2xlarge for spot training job usage": 0.0}
    code, table = run_preflight(stubbed_quotas(zero_spot, {}), capsys)
    assert code == 1
    assert row(table, "base model staged").split()[3] == "FAIL"
    assert "fix: make stage-model MODEL=bert-large-uncased-whole-word-masking ENV=dev" in table
    assert "FAIL    0 < 1" in row(table, "quota ml.g5.2xlarge for spot training job usage")
    assert table.strip().endswith("2 of 14 checks failed")

    stage_base_model(deployed, tmp_path)
    # The increase is an applied quota value: it overrides AWS's default of 0.
    code, table = run_preflight(stubbed_quotas(zero_spot, {"ml.g5.2xlarge for spot training job usage": 4.0}), capsys)
    assert code == 0, table
    assert "FAIL" not in table
    assert table.strip().endswith("all 14 checks passed")


def test_quota_rows_follow_the_step_graph(deployed, capsys):
    """One row per quota the graph uses: FineTune's training type (spot and on-demand) and ValidateAndTokenize's
    processing type; no GPU processing quota (evaluation runs inside FineTune) and none for the Lambda steps. The
    other allowed type (p4d) has its spot row only: on-demand is needed only if training.use_spot changes."""
    _, table = run_preflight(stubbed_quotas(ENOUGH, {}), capsys)
    quota_rows = [line.split("  ")[0] for line in table.splitlines() if line.startswith("quota ")]
    assert quota_rows == [f"quota {name}" for name in [*ENOUGH][:4]]


def test_the_unused_purchase_option_only_warns(deployed, tmp_path, capsys):
    stage_base_model(deployed, tmp_path)
    code, table = run_preflight(stubbed_quotas({**ENOUGH, "ml.g5.2xlarge for training job usage": 0.0}, {}), capsys)
    assert code == 0
    assert "WARN    0 < 1 (only needed if training.use_spot changes)" in row(table, "quota ml.g5.2xlarge for training")


def test_a_short_quota_names_its_increase_link_and_request(deployed, capsys):
    """The fix of a short quota is the quota's own console page (its code, as the General Reference's quota
    tables link it) and the RequestServiceQuotaIncrease call with the Region and the value needed:
    https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_RequestServiceQuotaIncrease.html"""
    name = "ml.g5.2xlarge for spot training job usage"
    _, table = run_preflight(stubbed_quotas({**ENOUGH, name: 0.0}, {}), capsys)
    lines = table.splitlines()
    fix = lines[lines.index(row(table, f"quota {name}")) + 1].strip()
    code = quota_code(name)
    assert fix == (
        f"fix: request 1 in {REGION}: https://console.aws.amazon.com/servicequotas/home/services/sagemaker/quotas/"
        f"{code} (or: aws service-quotas request-service-quota-increase --region {REGION} --service-code sagemaker "
        f"--quota-code {code} --desired-value 1)"
    )


def with_parameter(definition: str, name: str, **fields: object) -> str:
    parsed = json.loads(definition)
    for parameter in parsed["Parameters"]:
        if parameter["Name"] == name:
            parameter.update(fields)
    return json.dumps(parsed)


def test_quotas_follow_the_deployed_pipelines_defaults_and_allowed_types(deployed, capsys):
    """An execution gets the deployed pipeline's TrainingInstanceCount default (here 2, where the settings say
    1), and may pick any TrainingInstanceType of its EnumValues: each allowed type's spot quota is a row, which
    only warns (p4de is not listed by Service Quotas in this stub)."""
    definition = with_parameter(deployed.pipeline_definition, "TrainingInstanceCount", DefaultValue=2)
    definition = with_parameter(
        definition,
        "TrainingInstanceType",
        EnumValues=["ml.p4d.24xlarge", "ml.p4de.24xlarge"],
        DefaultValue="ml.p4d.24xlarge",
    )
    deployed.replace_pipeline(definition)
    try:
        _, table = run_preflight(stubbed_quotas(ENOUGH, {}), capsys)
    finally:
        deployed.replace_pipeline(deployed.pipeline_definition)
    assert "FAIL    1 < 2" in row(table, "quota ml.p4d.24xlarge for spot training job usage")
    assert "fix: request 2 in us-east-1" in table
    assert "WARN    1 < 2 (only needed if training.use_spot changes)" in row(
        table, "quota ml.p4d.24xlarge for training job usage"
    )
    assert "WARN    not listed by Service Quotas in us-east-1 (only needed for TrainingInstanceType=ml.p4de" in row(
        table, "quota ml.p4de.24xlarge for spot training job usage"
    )


def test_before_deployment_the_settings_allowed_types_are_checked(aws):
    """No pipeline yet: the types and count are the settings' (training.allowed_instance_types, here with the
    V100 type, which needs fp16)."""
    context = {
        **read_cdk_json_context(CDK_JSON),
        "env": "dev",
        "training.instance_type": "ml.p4d.24xlarge",
        "training.allowed_instance_types": ["ml.p4d.24xlarge", "ml.p3dn.24xlarge"],
        "hyperparameters.precision": "fp16",
    }
    deployment = dataclasses.replace(load_deployment("dev"), settings=load_settings(context))
    stubber = stubbed_quotas({**ENOUGH, "ml.p3dn.24xlarge for spot training job usage": 0.0}, {})
    checks = {check.name: check for check in check_quotas(deployment, stubber.client)}
    p3dn = checks["quota ml.p3dn.24xlarge for spot training job usage"]
    assert (p3dn.status, p3dn.detail) == ("WARN", "0 < 1 (only needed for TrainingInstanceType=ml.p3dn.24xlarge)")
    assert checks["quota ml.p4d.24xlarge for spot training job usage"].status == "ok"


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


def test_the_job_log_groups_retention_and_key_are_reported(aws):
    """SageMaker's account-wide job log groups (no stack owns them): a missing group and one whose logs never
    expire warn, with the commands that set the project's retention (dev: 30 days); a group with a retention
    passes and says which key encrypts it. moto keeps retentionInDays and kmsKeyId as given (it checks no key)."""
    checks = {check.name: check for check in check_job_log_groups(load_deployment("dev"))}
    training, processing = (
        checks["log group /aws/sagemaker/TrainingJobs"],
        checks["log group /aws/sagemaker/ProcessingJobs"],
    )
    assert (processing.status, processing.detail) == (
        "WARN",
        "not created yet: the first job creates it, its logs kept forever",
    )
    assert processing.fix == (
        f"aws logs create-log-group --region {EMPTY_REGION} --log-group-name /aws/sagemaker/ProcessingJobs; "
        f"aws logs put-retention-policy --region {EMPTY_REGION} --log-group-name /aws/sagemaker/ProcessingJobs "
        "--retention-in-days 30 (every SageMaker job's logs in this account and Region)"
    )
    assert training.status == "WARN"

    logs = boto3.client("logs")
    key = f"arn:aws:kms:{EMPTY_REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    logs.create_log_group(logGroupName="/aws/sagemaker/ProcessingJobs")
    logs.create_log_group(logGroupName="/aws/sagemaker/TrainingJobs", kmsKeyId=key)
    logs.put_retention_policy(logGroupName="/aws/sagemaker/TrainingJobs", retentionInDays=90)
    try:
        checks = {check.name: check for check in check_job_log_groups(load_deployment("dev"))}
    finally:
        for group in ("/aws/sagemaker/ProcessingJobs", "/aws/sagemaker/TrainingJobs"):
            logs.delete_log_group(logGroupName=group)
    processing, training = (
        checks["log group /aws/sagemaker/ProcessingJobs"],
        checks["log group /aws/sagemaker/TrainingJobs"],
    )
    assert (processing.status, processing.detail) == (
        "WARN",
        "logs never expire; encrypted with CloudWatch Logs' own key, not the project key",
    )
    assert processing.fix.startswith(f"aws logs put-retention-policy --region {EMPTY_REGION} --log-group-name")
    assert (training.status, training.detail) == ("ok", f"logs kept 90 days; encrypted with {key}")


def test_the_pinned_benchmark_must_be_staged_at_its_version_and_digest(aws):
    """evaluation.benchmark against the bucket: as staged it passes; a pin of bytes the bucket does not hold, a
    manifest replaced after pinning (the job downloads the current version) and a benchmark never staged each fail
    with the staging command. moto answers GetObject of an unknown version id as S3 does (NoSuchVersion / 400)."""
    s3 = boto3.client("s3", region_name=EMPTY_REGION)
    bucket = "preflight-benchmark-artifacts"
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": EMPTY_REGION})
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})

    def put(key: str, body: bytes) -> str:
        return s3.put_object(Bucket=bucket, Key=key, Body=body)["VersionId"]

    version_id, sha256 = benchmark.stage(ROOT / "data" / "sample-squad", "holdout", "v1", put, DEFAULT_TASK)
    pinned = BenchmarkSettings(
        name="holdout",
        version="v1",
        manifest_version_id=version_id,
        manifest_sha256=sha256,
        writers=["arn:aws:iam::123456789012:role/release"],
    )
    assert check_benchmark(s3, bucket, None, "dev").status == "ok"
    staged = check_benchmark(s3, bucket, pinned, "prod")
    assert (staged.status, staged.detail) == (
        "ok",
        f"s3://{bucket}/benchmarks/holdout/v1/manifest.json version {version_id} (SHA-256 as pinned)",
    )
    stale = check_benchmark(s3, bucket, pinned.model_copy(update={"manifest_sha256": "0" * 64}), "prod")
    assert stale.status == "FAIL" and stale.detail.endswith(f"not the pinned {'0' * 64}")
    assert stale.fix.startswith("make stage-benchmark BENCHMARK=<dir> NAME=holdout VERSION=<new version> ENV=prod")
    missing = check_benchmark(s3, bucket, pinned.model_copy(update={"name": "never"}), "prod")
    assert missing.status == "FAIL" and missing.detail.endswith("is not staged")
    put(benchmark.manifest_key("holdout", "v1"), b"{}")
    replaced = check_benchmark(s3, bucket, pinned, "prod")
    assert replaced.status == "FAIL" and "was replaced" in replaced.detail


def test_a_warm_pool_adds_its_own_quota_row_that_only_warns(cdk_context):
    """Warm pool quotas default to 0 (train-warm-pools.html, resource limits): the job runs but keeps no pool."""
    from config import load_settings
    from tools.preflight import quota_needs

    off = quota_needs(load_settings(cdk_context), None)
    assert not any("warm pool" in need.name for need in off)
    warm = load_settings({**cdk_context, "training.use_spot": "false", "training.keep_alive_seconds": "600"})
    [need] = [need for need in quota_needs(warm, None) if "warm pool" in need.name]
    assert need.name == "ml.g5.2xlarge for training warm pool usage" and need.needed == 1
    assert "keeps no warm pool" in need.optional_because
