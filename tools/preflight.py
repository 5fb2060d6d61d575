"""Check, with your AWS credentials, that an environment is ready for its first run; print a table of checks.

    python -m tools.preflight [--env dev]        (make preflight ENV=dev)

Checks the CDK bootstrap stack, the deployed stacks and pipeline, the base model staged at the pipeline's
BaseModelUri, the SageMaker instance quotas the pipeline needs, the datasets bucket, the benchmark pinned in the
settings (staged at that version and SHA-256), and reports the retention and
encryption of SageMaker's job log groups. Each failed check names its fix; the exit code is 1 when any check
failed. Nothing is changed in the account.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from qa.benchmark import manifest_key as benchmark_manifest_key
from qa.model_folder import MODEL_CONFIG

from config import Settings, read_cdk_json_context
from config.aws_locations import JOB_LOG_GROUPS, log_retention_days
from config.paths import CDK_JSON
from config.settings import BenchmarkSettings
from pipeline_steps import names
from tools.deployment import (
    Deployment,
    ToolError,
    ToolParser,
    add_pipeline_arguments,
    bucket_exists,
    describe_aws_failure,
    load_deployment,
    pipeline_parameter_defaults,
    pipeline_parameters,
    run_tool,
    split_s3_uri,
    staged_model_problems,
)
from tools.stage_model import config_mismatches

# The CDK's default bootstrap qualifier, unless cdk.json sets "@aws-cdk/core:bootstrapQualifier".
DEFAULT_QUALIFIER = "hnb659fds"
# Every template synthesized by CDK v2 carries a CheckBootstrapVersion rule that rejects bootstrap versions
# 1-5, and its asset manifests require version 6 ("requiresBootstrapStackVersion"):
# https://docs.aws.amazon.com/cdk/v2/guide/bootstrapping-env.html
MIN_BOOTSTRAP_VERSION = 6
# Stack states in which the stack's resources exist and are usable.
# https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_Stack.html (StackStatus)
USABLE_STACK_STATUSES = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE"})
# SageMaker's instance quotas are named "<instance type> for <usage>": "ml.p4d.24xlarge for training job usage",
# "... for spot training job usage", "... for processing job usage" (each an instance count, per account and
# Region; new accounts often have 0 for GPU types). Their codes (L-...) differ per instance type, so they are
# found by name in what Service Quotas lists: https://docs.aws.amazon.com/general/latest/gr/sagemaker.html,
# https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ListServiceQuotas.html
QUOTA_SERVICE_CODE = "sagemaker"
TRAINING_USAGE = "training job usage"
SPOT_TRAINING_USAGE = "spot training job usage"
PROCESSING_USAGE = "processing job usage"
# Warm pools have their own quota per instance type, 0 by default; without it a job given KeepAlivePeriodInSeconds
# runs but keeps no warm pool (https://docs.aws.amazon.com/sagemaker/latest/dg/train-warm-pools.html, "Warm pool
# resource limits"). The name follows the "<instance type> for <usage>" pattern above (assumption: not verified
# against a live ListServiceQuotas answer; the guide says to search the console for "warm pool").
WARM_POOL_USAGE = "training warm pool usage"
# The quota's own page in the Service Quotas console (its request-increase button), in the form the General
# Reference's quota tables link each adjustable quota: .../servicequotas/home/services/<service>/quotas/<code>.
QUOTAS_CONSOLE = f"https://console.aws.amazon.com/servicequotas/home/services/{QUOTA_SERVICE_CODE}/quotas"
QUOTAS_FIX = (
    "allow servicequotas:ListServiceQuotas and servicequotas:ListAWSDefaultServiceQuotas to these credentials, "
    f"or compare the quotas by hand ({QUOTAS_CONSOLE})"
)

Status = Literal["ok", "WARN", "FAIL"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


def check_bootstrap(deployment: Deployment) -> Check:
    context = read_cdk_json_context(CDK_JSON)
    qualifier = context.get("@aws-cdk/core:bootstrapQualifier", DEFAULT_QUALIFIER)
    name = "CDK bootstrap (CDKToolkit)"
    fix = f"cdk bootstrap aws://{deployment.account}/{deployment.region}"
    from botocore.exceptions import ClientError

    try:
        deployment.client("cloudformation").describe_stacks(StackName="CDKToolkit")
        parameter = f"/cdk-bootstrap/{qualifier}/version"
        version = int(deployment.client("ssm").get_parameter(Name=parameter)["Parameter"]["Value"])
    except ClientError as err:
        if err.response["Error"]["Code"] in ("ValidationError", "ParameterNotFound"):
            return Check(name, "FAIL", f"not bootstrapped (qualifier {qualifier})", fix)
        raise
    if version < MIN_BOOTSTRAP_VERSION:
        return Check(name, "FAIL", f"version {version} < {MIN_BOOTSTRAP_VERSION}", fix + " (upgrades it)")
    return Check(name, "ok", f"version {version} (>= {MIN_BOOTSTRAP_VERSION})")


def check_stack(deployment: Deployment, stack_name: str, env_name: str) -> Check:
    from botocore.exceptions import ClientError

    fix = f"make deploy ENV={env_name}"
    try:
        stacks = deployment.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as err:
        if err.response["Error"]["Code"] == "ValidationError":
            return Check(f"stack {stack_name}", "FAIL", "not deployed", fix)
        raise
    status = stacks[0]["StackStatus"]
    if status not in USABLE_STACK_STATUSES:
        return Check(f"stack {stack_name}", "FAIL", status, f"see the stack's events, then {fix}")
    return Check(f"stack {stack_name}", "ok", status)


def check_pipeline(deployment: Deployment, env_name: str) -> Check:
    pipeline_name = deployment.settings.pipeline_name
    if pipeline_parameter_defaults(deployment.client("sagemaker"), pipeline_name) is None:
        return Check(f"pipeline {pipeline_name}", "FAIL", "not found", f"make deploy ENV={env_name}")
    return Check(f"pipeline {pipeline_name}", "ok", "deployed")


def check_base_model(deployment: Deployment, env_name: str) -> Check:
    """The pipeline's BaseModelUri (the configured default before the pipeline exists) holds config, tokenizer
    and weights."""
    defaults = pipeline_parameter_defaults(deployment.client("sagemaker"), deployment.settings.pipeline_name) or {}
    uri = defaults.get(names.BASE_MODEL_URI) or deployment.default_base_model_uri
    s3 = deployment.client("s3")
    missing = staged_model_problems(s3, uri)
    configured = deployment.settings.model.base_model
    fix = f"make stage-model MODEL={configured} ENV={env_name}"
    if missing:
        return Check("base model staged", "FAIL", f"{uri} lacks {', '.join(missing)}", fix)
    # The staged config against the settings, where the URI is the configured model's own folder (another
    # BaseModelUri names whatever model its user staged there).
    if uri == deployment.default_base_model_uri:
        bucket, prefix = split_s3_uri(uri)
        config = json.loads(s3.get_object(Bucket=bucket, Key=f"{prefix}{MODEL_CONFIG}")["Body"].read())
        mismatches = config_mismatches(config, configured)
        if mismatches:
            detail = f"{uri}{MODEL_CONFIG} is not {configured}: {'; '.join(mismatches)}"
            return Check("base model staged", "FAIL", detail, f"{fix} REPLACE=1")
    return Check("base model staged", "ok", f"{uri} (config, tokenizer, weights)")


@dataclass(frozen=True)
class Quota:
    code: str  # QuotaCode (L-...), what the console page and RequestServiceQuotaIncrease take
    value: float


@dataclass(frozen=True)
class QuotaNeed:
    """One SageMaker instance quota an execution draws on, and how many instances it takes."""

    name: str
    needed: int
    optional_because: str = ""  # set: a shortfall only warns, for this reason


def sagemaker_quotas(client: Any) -> dict[str, Quota]:
    """Quota name -> code and value: the applied values, and AWS defaults for quotas never changed here."""
    quotas: dict[str, Quota] = {}
    for operation in ("list_aws_default_service_quotas", "list_service_quotas"):  # applied values win
        for page in client.get_paginator(operation).paginate(ServiceCode=QUOTA_SERVICE_CODE):
            quotas.update({q["QuotaName"]: Quota(q["QuotaCode"], q["Value"]) for q in page["Quotas"]})
    return quotas


def quota_needs(settings: Settings, parameters: list[dict[str, Any]] | None) -> list[QuotaNeed]:
    """What one execution with the pipeline's default parameters uses, and what the others it allows would.

    `parameters`: the deployed pipeline's declarations (its TrainingInstanceType default and EnumValues, its
    TrainingInstanceCount default are what executions get); None before deployment: the settings'.
    FineTune draws on the spot quota when training.use_spot is on (EnableManagedSpotTraining), else on the
    on-demand one; ValidateAndTokenize, the one processing job, on one instance (pipeline_steps/steps/context.py).
    The Lambda steps (ClaimManifest, EstimateTrainingCost, RecordModel) start no SageMaker instance. With
    training.keep_alive_seconds, the type's warm pool quota too (a shortfall warns: the job still runs).
    """
    training = settings.training
    declared = {p["Name"]: p for p in parameters or []}
    type_parameter = declared.get(names.TRAINING_INSTANCE_TYPE, {})
    default_type = str(type_parameter.get("DefaultValue", training.instance_type))
    allowed = type_parameter.get("EnumValues", settings.training_instance_types)
    count = int(declared.get(names.TRAINING_INSTANCE_COUNT, {}).get("DefaultValue", training.instance_count))
    usage, other_usage = (
        (SPOT_TRAINING_USAGE, TRAINING_USAGE) if training.use_spot else (TRAINING_USAGE, SPOT_TRAINING_USAGE)
    )
    return [
        QuotaNeed(f"{default_type} for {usage}", count),
        QuotaNeed(f"{default_type} for {other_usage}", count, "only needed if training.use_spot changes"),
        *(
            QuotaNeed(f"{name} for {usage}", count, f"only needed for TrainingInstanceType={name}")
            for name in allowed
            if name != default_type
        ),
        QuotaNeed(f"{settings.processing.preprocess_instance_type} for {PROCESSING_USAGE}", 1),
        *(
            [
                QuotaNeed(
                    f"{default_type} for {WARM_POOL_USAGE}",
                    count,
                    "training.keep_alive_seconds is set: below it FineTune runs but keeps no warm pool",
                )
            ]
            if training.keep_alive_seconds
            else []
        ),
    ]


def increase_fix(quota: Quota, needed: int, region: str) -> str:
    """Where to ask for `needed` in `region` (quotas are per Region unless noted:
    https://repost.aws/knowledge-center/request-service-quota-increase-cli): the quota's console page, or the
    RequestServiceQuotaIncrease call (ServiceCode, QuotaCode, DesiredValue):
    https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_RequestServiceQuotaIncrease.html"""
    return (
        f"request {needed} in {region}: {QUOTAS_CONSOLE}/{quota.code} (or: aws service-quotas "
        f"request-service-quota-increase --region {region} --service-code {QUOTA_SERVICE_CODE} "
        f"--quota-code {quota.code} --desired-value {needed})"
    )


def check_quotas(deployment: Deployment, quotas_client: Any) -> list[Check]:
    """Each quota of `quota_needs` against what Service Quotas says this account has in this Region."""
    parameters = pipeline_parameters(deployment.client("sagemaker"), deployment.settings.pipeline_name)
    quotas = sagemaker_quotas(quotas_client)
    checks = []
    for need in quota_needs(deployment.settings, parameters):
        quota = quotas.get(need.name)
        status: Status = "WARN" if need.optional_because else "FAIL"
        note = f" ({need.optional_because})" if need.optional_because else ""
        if quota is None:
            detail = f"not listed by Service Quotas in {deployment.region}{note}"
            fix = f"the type may not be offered for this use in {deployment.region}: see {QUOTAS_CONSOLE}"
            checks.append(Check(f"quota {need.name}", status, detail, fix))
        elif quota.value >= need.needed:
            checks.append(Check(f"quota {need.name}", "ok", f"{quota.value:g} >= {need.needed}"))
        else:
            detail = f"{quota.value:g} < {need.needed}{note}"
            checks.append(
                Check(f"quota {need.name}", status, detail, increase_fix(quota, need.needed, deployment.region))
            )
    return checks


def check_datasets_bucket(deployment: Deployment, env_name: str) -> Check:
    bucket = deployment.bucket("datasets")
    if not bucket_exists(deployment.client("s3"), bucket):
        return Check("datasets bucket", "FAIL", f"s3://{bucket} does not exist", f"make deploy ENV={env_name}")
    return Check("datasets bucket", "ok", f"s3://{bucket} reachable")


def check_benchmark(s3: Any, bucket: str, pinned: BenchmarkSettings | None, env_name: str) -> Check:
    """The benchmark the settings pin (evaluation.benchmark) is staged as pinned: its manifest's current version
    is the pinned version id, whose bytes have the pinned SHA-256. ValidateAndTokenize checks the same SHA-256 on
    what SageMaker downloads (the current version: ProcessingS3Input has no version id), so a pin that the
    bucket does not hold fails every run after it is billed; here it fails before."""
    from botocore.exceptions import ClientError

    name = "benchmark staged"
    if pinned is None:
        return Check(name, "ok", "no evaluation.benchmark: the gate scores the upload's own validation split")
    key = benchmark_manifest_key(pinned.name, pinned.version)
    uri = f"s3://{bucket}/{key}"
    fix = (
        f"make stage-benchmark BENCHMARK=<dir> NAME={pinned.name} VERSION=<new version> ENV={env_name}, then pin what "
        "it prints in cdk.json evaluation.benchmark"
    )
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
        body = s3.get_object(Bucket=bucket, Key=key, VersionId=pinned.manifest_version_id)["Body"].read()
    except ClientError as err:
        if err.response["Error"]["Code"] in ("404", "NoSuchKey", "NoSuchVersion", "InvalidArgument", "400"):
            return Check(name, "FAIL", f"{uri} (version {pinned.manifest_version_id}) is not staged", fix)
        raise
    actual = hashlib.sha256(body).hexdigest()
    if actual != pinned.manifest_sha256:
        detail = (
            f"{uri} version {pinned.manifest_version_id} has SHA-256 {actual}, not the pinned {pinned.manifest_sha256}"
        )
        return Check(name, "FAIL", detail, fix)
    if head.get("VersionId") != pinned.manifest_version_id:
        detail = (
            f"{uri} was replaced: its current version {head.get('VersionId')} is not the pinned one (the job reads it)"
        )
        return Check(name, "FAIL", detail, fix)
    return Check(name, "ok", f"{uri} version {pinned.manifest_version_id} (SHA-256 as pinned)")


def check_job_log_groups(deployment: Deployment) -> list[Check]:
    """Retention and key of the log groups SageMaker writes every job's stdout and stderr to (JOB_LOG_GROUPS).
    They are the account's, shared by every SageMaker job of the Region, so no stack of this project owns them
    (README "Where logs go"). SageMaker creates a missing one with CloudWatch Logs' defaults: log data "stored
    indefinitely" (https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html) and encrypted with
    CloudWatch Logs' own key (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html).
    Logs that never expire warn; the fix is the account's call, and the value suggested the project's own
    (`log_retention_days`)."""
    logs = deployment.client("logs")
    days = log_retention_days(deployment.settings.log_retention_days)
    checks = []
    for group in JOB_LOG_GROUPS.values():
        name = f"log group {group}"
        listed = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
        found = next((entry for entry in listed if entry["logGroupName"] == group), None)
        retain = (
            f"aws logs put-retention-policy --region {deployment.region} --log-group-name {group} "
            f"--retention-in-days {days} (every SageMaker job's logs in this account and Region)"
        )
        if found is None:
            detail = "not created yet: the first job creates it, its logs kept forever"
            create = f"aws logs create-log-group --region {deployment.region} --log-group-name {group}"
            checks.append(Check(name, "WARN", detail, f"{create}; {retain}"))
            continue
        key = found.get("kmsKeyId")
        encryption = f"encrypted with {key}" if key else "encrypted with CloudWatch Logs' own key, not the project key"
        if "retentionInDays" not in found:
            checks.append(Check(name, "WARN", f"logs never expire; {encryption}", retain))
        else:
            checks.append(Check(name, "ok", f"logs kept {found['retentionInDays']} days; {encryption}"))
    return checks


def guarded(name: str, check: Callable[[], Check | list[Check]], fix: str = "") -> list[Check]:
    """Run one check; a failure the user can fix becomes a FAIL row instead of ending the run."""
    try:
        result = check()
    except ToolError as err:
        return [Check(name, "FAIL", str(err), fix)]
    except Exception as err:
        described = describe_aws_failure(err)
        if described is None:
            raise
        return [Check(name, "FAIL", described, fix)]
    return result if isinstance(result, list) else [result]


def run_checks(deployment: Deployment, env_name: str, quotas_client: Any) -> list[Check]:
    return [
        *guarded("CDK bootstrap", lambda: check_bootstrap(deployment)),
        *(
            row
            for stack_name in deployment.stack_names
            for row in guarded(f"stack {stack_name}", partial(check_stack, deployment, stack_name, env_name))
        ),
        *guarded("pipeline", lambda: check_pipeline(deployment, env_name)),
        *guarded("base model staged", lambda: check_base_model(deployment, env_name)),
        *guarded("SageMaker quotas", lambda: check_quotas(deployment, quotas_client), QUOTAS_FIX),
        *guarded("datasets bucket", lambda: check_datasets_bucket(deployment, env_name)),
        *guarded(
            "benchmark staged",
            lambda: check_benchmark(
                deployment.client("s3"),
                deployment.bucket("artifacts"),
                deployment.settings.evaluation.benchmark,
                env_name,
            ),
        ),
        *guarded(
            "job log groups",
            lambda: check_job_log_groups(deployment),
            "allow logs:DescribeLogGroups to these credentials, or see the groups in the CloudWatch console",
        ),
    ]


def format_table(checks: list[Check]) -> str:
    width = max(len(check.name) for check in checks)
    lines = [f"{'check':<{width}}  {'result':<6}  detail"]
    for check in checks:
        lines.append(f"{check.name:<{width}}  {check.status:<6}  {check.detail}")
        if check.fix and check.status != "ok":
            lines.append(f"{'':<{width}}  {'':<6}  fix: {check.fix}")
    failed = sum(check.status == "FAIL" for check in checks)
    lines.append(f"{failed} of {len(checks)} checks failed" if failed else f"all {len(checks)} checks passed")
    return "\n".join(lines)


def preflight(env_name: str, quotas_client: Any | None = None, task: str | None = None) -> int:
    """Print the table for `env_name` (its pipeline of `task`); 1 when a check failed. `quotas_client`: a Service
    Quotas client."""
    deployment = load_deployment(env_name, task)
    print(f"preflight of {env_name} in account {deployment.account}, region {deployment.region}")
    checks = run_checks(deployment, env_name, quotas_client or deployment.client("service-quotas"))
    print(format_table(checks))
    return 1 if any(check.status == "FAIL" for check in checks) else 0


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(__doc__)
    add_pipeline_arguments(parser)
    args = parser.parse_args(argv)
    return preflight(args.env, task=args.task)


def cli() -> None:
    sys.exit(run_tool(main))


if __name__ == "__main__":
    cli()
