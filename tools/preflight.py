"""Check, with your AWS credentials, that an environment is ready for its first run; print a table of checks.

    python -m tools.preflight [--env dev]        (make preflight ENV=dev)

Checks the CDK bootstrap stack, the deployed stacks and pipeline, the base model staged at the pipeline's
BaseModelUri, the SageMaker instance quotas the pipeline needs, and the datasets bucket. Each failed check
names its fix; the exit code is 1 when any check failed. Nothing is changed in the account.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from config import read_cdk_json_context
from config.loader import DEFAULT_ENV
from config.paths import CDK_JSON
from pipeline_steps import names
from tools.deployment import (
    MODEL_CONFIG,
    Deployment,
    ToolError,
    ToolParser,
    bucket_exists,
    describe_aws_failure,
    load_deployment,
    pipeline_parameter_defaults,
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
# SageMaker quotas are named "<instance type> for <usage>"; their codes differ per instance type, so they are
# found by name (https://docs.aws.amazon.com/general/latest/gr/sagemaker.html, Service Quotas API:
# https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ListServiceQuotas.html).
QUOTA_SERVICE_CODE = "sagemaker"
QUOTAS_CONSOLE = "https://console.aws.amazon.com/servicequotas/home/services/sagemaker/quotas"
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


def sagemaker_quotas(client: Any) -> dict[str, float]:
    """Quota name -> value: the applied values, and AWS defaults for quotas never changed in this account."""
    values: dict[str, float] = {}
    for operation in ("list_aws_default_service_quotas", "list_service_quotas"):  # applied values win
        for page in client.get_paginator(operation).paginate(ServiceCode=QUOTA_SERVICE_CODE):
            values.update({quota["QuotaName"]: quota["Value"] for quota in page["Quotas"]})
    return values


def check_quotas(deployment: Deployment, quotas_client: Any) -> list[Check]:
    """FineTune's training quotas (spot and on-demand) and ValidateAndTokenize's processing quota against what
    one execution uses."""
    training, processing = deployment.settings.training, deployment.settings.processing
    count = training.instance_count
    # (quota name, needed, required by the configuration?) The purchase option not configured is a fallback.
    wanted = [
        (f"{training.instance_type} for spot training job usage", count, training.use_spot),
        (f"{training.instance_type} for training job usage", count, not training.use_spot),
        # ValidateAndTokenize, the one processing job, runs on one instance (pipeline_steps/steps/context.py).
        # The Lambda steps (ClaimManifest, EstimateTrainingCost, RecordModel) start no SageMaker instance.
        (f"{processing.preprocess_instance_type} for processing job usage", 1, True),
    ]
    values = sagemaker_quotas(quotas_client)
    checks = []
    for quota_name, needed, required in wanted:
        value = values.get(quota_name)
        fix = f"request '{quota_name}' >= {needed} in Service Quotas ({QUOTAS_CONSOLE})"
        if value is None:
            checks.append(Check(f"quota {quota_name}", "FAIL", "not listed by Service Quotas", fix))
        elif value >= needed:
            checks.append(Check(f"quota {quota_name}", "ok", f"{value:g} >= {needed}"))
        else:
            status: Status = "FAIL" if required else "WARN"
            detail = f"{value:g} < {needed}" + ("" if required else " (only needed if training.use_spot changes)")
            checks.append(Check(f"quota {quota_name}", status, detail, fix))
    return checks


def check_datasets_bucket(deployment: Deployment, env_name: str) -> Check:
    bucket = deployment.bucket("datasets")
    if not bucket_exists(deployment.client("s3"), bucket):
        return Check("datasets bucket", "FAIL", f"s3://{bucket} does not exist", f"make deploy ENV={env_name}")
    return Check("datasets bucket", "ok", f"s3://{bucket} reachable")


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


def preflight(env_name: str, quotas_client: Any | None = None) -> int:
    """Print the table for `env_name`; 1 when a check failed. `quotas_client`: a Service Quotas client."""
    deployment = load_deployment(env_name)
    print(f"preflight of {env_name} in account {deployment.account}, region {deployment.region}")
    checks = run_checks(deployment, env_name, quotas_client or deployment.client("service-quotas"))
    print(format_table(checks))
    return 1 if any(check.status == "FAIL" for check in checks) else 0


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(__doc__)
    parser.add_argument("--env", default=DEFAULT_ENV)
    return preflight(parser.parse_args(argv).env)


def cli() -> None:
    sys.exit(run_tool(main))


if __name__ == "__main__":
    cli()
