"""Issue 30, finding 1: the uploader grades their own exam. Before the fix both splits came from the upload, and
CheckF1 compared FineTune's F1 on the upload's validation split with prod's 90: an upload whose validation split
is its train split, with answers any model finds, registered whatever model it trained.

The local runs are the session's `make demo` sequence (tests/demo_runs.py): prod's demo uploads that poisoned
dataset, dev's the sample (dev has no benchmark)."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from qa import benchmark
from tasks import DEFAULT_TASK

from config import ConfigError, load_settings
from local_runner.store import LocalObjectStore
from pipeline_steps import names
from pipeline_steps.walk import find_step
from stacks.assembly import synthesized_definition
from tests.demo_runs import Sequence
from tests.stacks.conftest import bucket_arn

SAMPLE_BENCHMARK_LINE = re.compile(r"benchmark: exact_match=[0-9.]+ f1=([0-9.]+)")


def execution_dir(sequence: Sequence, run: str):
    [execution] = re.findall(r"^execution (local-\w+) of ", sequence.runs[run].stdout, re.M)
    return sequence.work_dir / "executions" / execution


@pytest.mark.slow
def test_a_poisoned_upload_that_scores_100_on_its_own_split_is_not_registered_in_prod(sequence, cdk_context):
    prod = load_settings({**cdk_context, "env": "prod"})
    job_log = (execution_dir(sequence, "demo prod") / "FineTune" / "job.log").read_text()
    assert "evaluation: exact_match=100.0000 f1=100.0000" in job_log  # the uploader's own split: a perfect score
    [benchmark_f1] = SAMPLE_BENCHMARK_LINE.findall(job_log)
    assert float(benchmark_f1) < prod.evaluation.f1_threshold
    out = sequence.runs["demo prod"].stdout
    assert f"Benchmark F1 {benchmark_f1} is below the threshold {prod.evaluation.f1_threshold}" in out
    assert "registered: nothing" in out
    assert sequence.packages(prod) == []


@pytest.mark.slow
def test_a_dev_run_without_a_benchmark_registers_saying_it_gated_on_the_uploaders_split(sequence, cdk_context):
    dev = load_settings({**cdk_context, "env": "dev"})
    assert dev.evaluation.benchmark is None
    [package] = sequence.packages(dev)
    out = sequence.runs["demo"].stdout.split("the same Object Created event is delivered again")[0]
    metadata = dict(re.findall(r"^    metadata (\S+) = (.*)$", out, re.M))
    assert metadata[names.MODEL_METADATA_GATE] == names.GATE_UPLOADER_VALIDATION
    # Who uploaded it (the event's detail.requester: the local account) and what it was (the manifest's bytes).
    assert metadata[names.MODEL_METADATA_UPLOADED_BY] == "000000000000"
    manifest = next((sequence.work_dir / "s3").glob(f"{dev.name_prefix}-datasets-*/datasets/*/*/manifest.json"))
    assert metadata[names.MODEL_METADATA_DATASET_MANIFEST_SHA256] == hashlib.sha256(manifest.read_bytes()).hexdigest()
    assert package.approval_status == "PendingManualApproval"


def test_production_without_a_benchmark_does_not_synthesize(cdk_context):
    environments = json.loads(json.dumps(cdk_context["environments"]))
    del environments["prod"]["evaluation"]["benchmark"]
    with pytest.raises(ConfigError, match=r"production needs evaluation\.benchmark: .*make stage-benchmark"):
        load_settings({**cdk_context, "environments": environments, "env": "prod"})


def test_the_gate_reads_the_benchmark_in_prod_and_the_uploaders_split_only_without_one(dev, prod):
    for env, metric, gate in (
        (dev, "eval:f1", names.GATE_UPLOADER_VALIDATION),
        (prod, "benchmark:f1", names.GATE_BENCHMARK),
    ):
        definition = json.loads(synthesized_definition(env.templates["pipeline"])[0])
        [condition] = find_step(definition, names.F1_CONDITION_STEP)["Arguments"]["Conditions"]
        assert condition["LeftValue"]["Get"] == f"Steps.{names.TRAIN_STEP}.FinalMetricDataList['{metric}'].Value"
        [register] = find_step(definition, names.F1_CONDITION_STEP)["Arguments"]["IfSteps"]
        assert register["Arguments"]["CustomerMetadataProperties"][names.MODEL_METADATA_GATE] == gate


def test_only_the_release_principals_may_write_the_benchmark(dev, prod):
    """Bucket-policy assertion: the deny exists where a benchmark is pinned and excepts only its writers."""
    policies = prod.template("data").find_resources("AWS::S3::BucketPolicy")
    statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
    [deny] = [s for s in statements if s.get("Sid") == "OnlyReleasePrincipalsWriteBenchmarks"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"} and deny["Action"] == "s3:PutObject"
    assert deny["Resource"] == bucket_arn(prod.settings, "artifacts", "/benchmarks/*")
    assert deny["Condition"] == {"ArnNotLike": {"aws:PrincipalArn": list(prod.settings.evaluation.benchmark.writers)}}
    dev_policies = dev.template("data").find_resources("AWS::S3::BucketPolicy")
    assert "OnlyReleasePrincipalsWriteBenchmarks" not in json.dumps(dev_policies)


def test_a_benchmark_replaced_after_it_was_pinned_is_refused(tmp_path):
    """What ValidateAndTokenize checks: SageMaker downloads the current version, so the pin is the digest."""
    store = LocalObjectStore(tmp_path / "s3")
    dataset = tmp_path / "benchmark"
    (dataset / "validation").mkdir(parents=True)
    record = {"id": "b-0", "title": "t", "context": "Ada wrote it.", "question": "Who?"}
    data = dataset / "validation" / "v.jsonl"
    data.write_text(json.dumps({**record, "answers": {"text": ["Ada"], "answer_start": [0]}}) + "\n")
    _, pinned = benchmark.stage(
        dataset, "b", "v1", lambda key, body: store.put_bytes(body, f"s3://a/{key}"), DEFAULT_TASK
    )
    folder = store.path("s3://a/" + benchmark.prefix("b", "v1"))
    files, problem = benchmark.verify(folder, pinned)
    assert problem == "" and [path.name for path in files] == ["v.jsonl"]
    # A data file swapped under the same key: the manifest still names the old SHA-256.
    staged = folder / "validation" / "v.jsonl"
    staged.write_text(json.dumps({**record, "answers": {"text": ["it"], "answer_start": [9]}}) + "\n")
    assert (
        "validation/v.jsonl is missing or is not the content its manifest records"
        in benchmark.verify(folder, pinned)[1]
    )
    # The manifest rewritten to match: no longer the pinned one.
    manifest = folder / "manifest.json"
    entry = json.loads(manifest.read_text())
    entry["files"][0]["sha256"] = hashlib.sha256(staged.read_bytes()).hexdigest()
    manifest.write_text(json.dumps(entry))
    assert f"not the pinned {pinned}" in benchmark.verify(folder, pinned)[1]
