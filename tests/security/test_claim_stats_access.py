"""processing.tokenize_in "fine_tune": ClaimManifest writes an estimated stats.json that EstimateTrainingCost reads
(the cost guard's input). Attacks on that path, with the policy evaluator on the synthesized fine_tune templates: the
estimate may read the claim's stats key and nothing a dataset upload can name (a pinned file called stats.json), the
claim gains no permission over cpu_job mode, and no job can write where the stats live (a forged, cheaper estimate)."""

from __future__ import annotations

from qa.outputs import CLAIM_STATS_FOLDER, STATS_FILE

from tests.conftest import as_list
from tests.security.policy_evaluation import allowed, role_statements
from tests.stacks.iam_reference import ACCOUNT, PARTITION, REGION

DIGEST = "0123456789abcdef" * 4


def artifacts_object(env, key: str) -> str:
    return f"arn:{PARTITION}:s3:::{env.settings.bucket_name('artifacts', ACCOUNT, REGION)}/{key}"


def test_the_estimate_reads_the_claims_stats_and_no_pinned_file_named_like_them(dev):
    inputs = dev.settings.layout.inputs
    estimate = role_statements(dev.templates, "pipeline", "FunctionsEstimateTrainingCostRole")
    stats_key = f"{inputs}/{CLAIM_STATS_FOLDER}/{DIGEST}/{STATS_FILE}"
    assert allowed(estimate, "s3:GetObject", artifacts_object(dev, stats_key), {})
    for uploaded in (
        f"{inputs}/{DIGEST}/train/{STATS_FILE}",  # a dataset file named stats.json, pinned
        f"{inputs}/{DIGEST}/{CLAIM_STATS_FOLDER}/{DIGEST}/{STATS_FILE}",  # a dataset folder named like the stats'
        f"{inputs}/{DIGEST}/train/train.jsonl",
    ):
        assert not allowed(estimate, "s3:GetObject", artifacts_object(dev, uploaded), {}), uploaded


def test_the_claim_gains_no_permission_in_fine_tune_mode(dev, synthesized_cpu_job):
    """It reads each pinned version with ReadDatasetVersions and writes the stats with PinInputs, as in cpu_job mode."""
    before = role_statements(synthesized_cpu_job["dev"].templates, "pipeline", "FunctionsClaimManifestRole")
    after = role_statements(dev.templates, "pipeline", "FunctionsClaimManifestRole")
    assert after == before


def test_no_job_may_write_the_claims_stats(dev):
    inputs = dev.settings.layout.inputs
    job = role_statements(dev.templates, "pipeline", "JobRole")
    stats = artifacts_object(dev, f"{inputs}/{CLAIM_STATS_FOLDER}/{DIGEST}/{STATS_FILE}")
    for action in ("s3:PutObject", "s3:DeleteObject"):
        assert not allowed(job, action, stats, {}), action
    assert not [s for s in job if "s3:PutObject" in as_list(s["Action"]) and f"/{inputs}/" in str(s["Resource"])]
