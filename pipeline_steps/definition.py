"""Build the pipeline definition (SageMaker "2020-12-01" JSON) from the settings.

    definition = build_definition(settings)               # dict, with deploy-time ${...} placeholders
    text = definition_json(settings)                      # the exact string the stack embeds

Offline and deterministic: two builds are byte-identical (no AWS call, no timestamps, no uploads).
"""

from __future__ import annotations

import json
from typing import Any

from sagemaker.workflow.pipeline import Pipeline
from sagemaker.workflow.steps import Step

from config import Settings
from pipeline_steps.aws_rules import check_definition
from pipeline_steps.parameters import build_parameters
from pipeline_steps.placeholders import ACCOUNT, REGION, DeployTimeValues, placeholders
from pipeline_steps.sdk import BUILD_REGION, offline_sdk, offline_session
from pipeline_steps.steps import claim, cost_guard, preprocess, register, train
from pipeline_steps.steps.context import BuildContext

INLINE_LIMIT_BYTES = 100_000  # larger definitions must go through PipelineDefinitionS3Location


def build_definition(settings: Settings, values: DeployTimeValues | None = None) -> dict[str, Any]:
    with offline_sdk():
        definition = _build(settings, values or placeholders(settings))
    check_definition(definition)
    return definition


def _build(settings: Settings, values: DeployTimeValues) -> dict[str, Any]:
    artifacts = settings.bucket_name("artifacts", ACCOUNT, REGION)
    datasets = settings.bucket_name("datasets", ACCOUNT, REGION)
    params = build_parameters(settings, datasets_bucket=datasets, artifacts_bucket=artifacts)
    ctx = BuildContext(
        settings=settings,
        values=values,
        params=params,
        session=offline_session(default_bucket=artifacts),
        artifacts_bucket=artifacts,
    )
    # ClaimManifest -> ParametersValid -> FirstDelivery -> ValidateAndTokenize -> EstimateTrainingCost ->
    # CheckTrainingCost -> FineTune -> RecordModel -> CheckF1 -> RegisterModel (docs: README "Architecture"); with
    # processing.tokenize_in = "fine_tune" no ValidateAndTokenize: FineTune tokenizes, the claim's stats price it.
    claim_step = claim.build(ctx)
    if ctx.settings.tokenizes_in_fine_tune:
        # ClaimManifest validated the records (DatasetValid) and estimated the stats; FineTune tokenizes.
        jobs_before_estimate: list[Step] = []
        estimate_step = cost_guard.estimate(ctx, claim.stats_uri(claim_step))
        train_step = train.build(ctx, train.data_channels(ctx, claim_step))
    else:
        preprocess_step = preprocess.build(ctx, claim_step)
        jobs_before_estimate = [preprocess_step]
        estimate_step = cost_guard.estimate(ctx, cost_guard.preprocess_stats(preprocess_step))
        train_step = train.build(ctx, train.feature_channels(ctx, preprocess_step))
    record_step = register.record(ctx, train_step)
    check_f1 = register.build(ctx, train_step, record_step, claim_step)
    guard = cost_guard.build(ctx, estimate_step, [train_step, record_step, check_f1])
    gates = claim.gates(ctx, claim_step, [*jobs_before_estimate, estimate_step, guard])
    pipeline = Pipeline(
        name=settings.pipeline_name,
        parameters=params.all(),
        steps=[claim_step, gates],
        sagemaker_session=ctx.session,
        pipeline_experiment_config=None,
    )
    return _replace_build_region(json.loads(pipeline.definition()), settings.region or REGION)


def _replace_build_region(node: Any, region: str) -> Any:
    """The SDK bakes its session's region into `sagemaker_region` and SAGEMAKER_REGION: use the
    deployment's region (a placeholder when the stacks are environment-agnostic)."""
    if isinstance(node, dict):
        return {key: _replace_build_region(value, region) for key, value in node.items()}
    if isinstance(node, list):
        return [_replace_build_region(value, region) for value in node]
    if node == BUILD_REGION:
        return region
    if node == json.dumps(BUILD_REGION):
        return json.dumps(region)
    return node


def definition_json(settings: Settings, values: DeployTimeValues | None = None) -> str:
    """Canonical JSON text (sorted keys, compact): what the template embeds."""
    text = json.dumps(build_definition(settings, values), sort_keys=True, separators=(",", ":"))
    if len(text.encode()) > INLINE_LIMIT_BYTES:
        raise ValueError(f"pipeline definition is {len(text)} bytes, over the {INLINE_LIMIT_BYTES}-byte inline limit")
    return text
