"""The pipeline's Lambda functions in the synthesized dev pipeline stack: runtime, handlers, timeouts, and one
least-privilege role each; the pipeline role may invoke exactly these."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from qa.outputs import CLAIM_STATS_FOLDER, STATS_FILE
from tasks import TASK_NAMES

from pipeline_steps.placeholders import FUNCTION_HANDLERS
from stacks.functions import CLAIM_VALIDATION_TIMEOUT, FUNCTION_FILES, TIMEOUTS, stage_function_code
from tests.conftest import as_list, dumps, resources_of_type
from tests.stacks.conftest import bucket_arn

LAMBDA_STEP_LIMIT_SECONDS = 600  # a Lambda step waits at most 10 minutes for its function
FUNCTIONS = {
    "ClaimManifest": "claim_function_arn",
    "EstimateTrainingCost": "estimate_function_arn",
    "RecordModel": "record_function_arn",
}


def logical_id(template: dict[str, Any], prefix: str) -> str:
    [found] = [k for k in template["Resources"] if k.startswith(prefix) and not k.startswith(prefix + "Role")]
    return found


def role_statements(template: dict[str, Any], role_prefix: str) -> list[dict[str, Any]]:
    [role_id] = [k for k in resources_of_type(template, "AWS::IAM::Role") if k.startswith(role_prefix)]
    return [
        statement
        for policy in resources_of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def by_sid(statements: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in statements if "Sid" in s}


@pytest.mark.parametrize(("name", "field"), sorted(FUNCTIONS.items()))
def test_each_function_runs_python_3_12_with_its_handler_its_own_role_and_a_timeout_below_the_step_limit(
    dev, name, field
):
    template = dev.templates["pipeline"]
    function = template["Resources"][logical_id(template, f"Functions{name}Function")]["Properties"]
    assert function["Runtime"] == "python3.12"
    assert function["Handler"] == FUNCTION_HANDLERS[field]
    # The claim validates the records in fine_tune mode (the default), sized for it (the test below).
    validating = field == "claim_function_arn" and dev.settings.tokenizes_in_fine_tune
    assert (
        function["Timeout"] == (CLAIM_VALIDATION_TIMEOUT if validating else TIMEOUTS[field]) < LAMBDA_STEP_LIMIT_SECONDS
    )
    assert f"Functions{name}Role" in dumps(function["Role"])
    role = template["Resources"][next(k for k in template["Resources"] if k.startswith(f"Functions{name}Role"))]
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "lambda.amazonaws.com"
    }
    assert "ManagedPolicyArns" not in role["Properties"]


@pytest.mark.parametrize("name", [*sorted(FUNCTIONS), "NotifyTopic"])
def test_each_function_logs_to_the_group_make_runs_and_make_logs_read(dev, name):
    """LoggingConfig names the function's own group: Settings.function_log_group, which tools/runs.py and
    tools/executions.py read (a function with a LoggingConfig log group does not log to /aws/lambda/<name>)."""
    template = dev.templates["pipeline"]
    prefix = "Notifications" if name == "NotifyTopic" else "Functions"
    function = template["Resources"][logical_id(template, f"{prefix}{name}Function")]["Properties"]
    group = template["Resources"][function["LoggingConfig"]["LogGroup"]["Ref"]]
    assert group["Properties"]["LogGroupName"] == dev.settings.function_log_group(name)


def test_the_code_asset_holds_only_the_stdlib_part_of_training_code(tmp_path):
    staged = stage_function_code(tmp_path)
    assert sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()) == sorted(FUNCTION_FILES)
    imports = [
        line for line in (staged / "pipeline_functions.py").read_text().splitlines() if line.startswith("from qa")
    ]
    assert {line.split()[1] for line in imports} <= {
        f"qa.{p.removeprefix('qa/').removesuffix('.py')}" for p in FUNCTION_FILES
    }


def test_synths_at_the_same_time_stage_the_same_complete_folder(tmp_path):
    """pytest workers synthesize at once: each gets the one folder named by the content, never a half copy."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        staged = set(pool.map(lambda _: stage_function_code(tmp_path), range(8)))
    [folder] = staged
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == sorted(FUNCTION_FILES)
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # no staging folder left behind


def test_a_staged_folder_is_reused_untouched_while_its_content_is_unchanged(tmp_path, monkeypatch):
    """A later synth copies nothing into (and deletes nothing from) a folder an earlier one may still read."""
    first = stage_function_code(tmp_path)
    copies: list[object] = []
    monkeypatch.setattr("stacks.functions.shutil.copyfile", lambda *args: copies.append(args))
    monkeypatch.setattr("stacks.functions.shutil.rmtree", lambda *args, **kwargs: copies.append(args))
    assert stage_function_code(tmp_path) == first
    assert copies == []


def test_the_claim_role_writes_claims_only_conditionally_and_pins_inputs(dev):
    settings, layout = dev.settings, dev.settings.layout
    statements = by_sid(role_statements(dev.templates["pipeline"], "FunctionsClaimManifestRole"))
    claims = bucket_arn(settings, "artifacts", f"/{layout.claims}/*")
    assert statements["CreateClaimIfAbsent"]["Resource"] == claims
    assert statements["CreateClaimIfAbsent"]["Condition"] == {"Null": {"s3:if-none-match": "false"}}
    assert statements["TakeOverClaimIfUnchanged"]["Condition"] == {"Null": {"s3:if-match": "false"}}
    assert statements["PinInputs"]["Resource"] == bucket_arn(settings, "artifacts", f"/{layout.inputs}/*")
    assert statements["ReadDatasetVersions"]["Action"] == ["s3:GetObject", "s3:GetObjectVersion"]
    puts = [s for s in statements.values() if "s3:PutObject" in as_list(s["Action"])]
    assert {s["Sid"] for s in puts} == {"CreateClaimIfAbsent", "TakeOverClaimIfUnchanged", "PinInputs"}
    assert f"pipeline/{settings.pipeline_name}/execution/*" in dumps(statements["DescribeOwnerExecutions"]["Resource"])


def test_the_estimate_and_record_roles_touch_only_their_prefixes(dev):
    settings, layout = dev.settings, dev.settings.layout
    template = dev.templates["pipeline"]
    estimate = by_sid(role_statements(template, "FunctionsEstimateTrainingCostRole"))
    # fine_tune mode (the default): the claim's estimated stats.json (tests/security/test_claim_stats_access.py);
    # cpu_job mode: ValidateAndTokenize's, under processed/.
    assert estimate["ReadStatsAndModelConfig"]["Resource"] == [
        bucket_arn(settings, "artifacts", f"/{layout.base_models}/*/config.json"),
        bucket_arn(settings, "artifacts", f"/{layout.inputs}/{CLAIM_STATS_FOLDER}/*/{STATS_FILE}"),
    ]
    assert not [s for s in estimate.values() if "s3:PutObject" in as_list(s["Action"])]
    record = by_sid(role_statements(template, "FunctionsRecordModelRole"))
    assert record["ReadModelArchives"]["Resource"] == [
        bucket_arn(settings, "artifacts", f"/{prefix}/*") for prefix in (layout.models, layout.registry)
    ]
    assert record["WriteEvaluationReports"]["Resource"] == bucket_arn(settings, "artifacts", f"/{layout.evaluation}/*")
    # The registry copy: created only with If-None-Match, its versions listed only under the two prefixes.
    assert record["CopyToRegistryIfAbsent"]["Resource"] == bucket_arn(settings, "artifacts", f"/{layout.registry}/*")
    # Unconditioned: a copy may not carry s3:if-none-match (stacks/functions.py); only this role writes registry/.
    assert "Condition" not in record["CopyToRegistryIfAbsent"]
    assert {
        s["Condition"]["StringLike"]["s3:prefix"] for s in record.values() if s["Action"] == "s3:ListBucketVersions"
    } == {
        f"{layout.models}/*",
        f"{layout.registry}/*",
    }
    puts = [s for s in record.values() if "s3:PutObject" in as_list(s["Action"])]
    assert {s["Sid"] for s in puts} == {"WriteEvaluationReports", "CopyToRegistryIfAbsent"}


def test_the_pipeline_role_invokes_exactly_the_three_functions(dev):
    template = dev.templates["pipeline"]
    [invoke] = [s for s in role_statements(template, "PipelineRole") if "lambda:InvokeFunction" in as_list(s["Action"])]
    assert invoke["Action"] == "lambda:InvokeFunction"
    assert invoke["Resource"] == [
        {"Fn::GetAtt": [logical_id(template, f"Functions{name}Function"), "Arn"]} for name in FUNCTIONS
    ]


def test_no_job_may_write_claims_inputs_or_evaluation_reports(dev):
    layout = dev.settings.layout
    writes = [
        s for s in role_statements(dev.templates["pipeline"], "JobRole") if "s3:PutObject" in as_list(s["Action"])
    ]
    written = dumps([s["Resource"] for s in writes])
    for prefix in (layout.claims, layout.inputs, layout.evaluation):
        assert f"/{prefix}/" not in written, prefix


def test_in_fine_tune_mode_the_claim_is_sized_for_the_largest_dataset_it_validates(dev, synthesized_cpu_job):
    """Lambda's quotas (gettingstarted-limits): timeout <= 900 s, memory 128-10,240 MB, /tmp 512-10,240 MB; the
    claim's timeout stays under the Lambda step's 10 minutes. cpu_job's claim keeps its size."""
    from qa.claim_validation import CLAIM_MAX_DATASET_MB, CLAIM_TIMEOUT_SECONDS

    def claim(env) -> dict[str, Any]:
        template = env.templates["pipeline"]
        return template["Resources"][logical_id(template, "FunctionsClaimManifestFunction")]["Properties"]

    sized = claim(dev)
    assert sized["Timeout"] == CLAIM_TIMEOUT_SECONDS < LAMBDA_STEP_LIMIT_SECONDS
    assert sized["MemorySize"] == 10_240
    assert 2 * CLAIM_MAX_DATASET_MB <= sized["EphemeralStorage"]["Size"] <= 10_240
    default = claim(synthesized_cpu_job["dev"])
    assert (default["Timeout"], default["MemorySize"], "EphemeralStorage" in default) == (
        TIMEOUTS["claim_function_arn"],
        1024,
        False,
    )


def test_the_staged_code_imports_its_handlers_and_every_task_with_the_standard_library_alone(tmp_path):
    """The Lambda runtime has the staged files and boto3, nothing of training_code's other dependencies: each handler
    module and every task module (ClaimManifest names the task's module; RecordModel reads its metrics) imports from
    the staged folder with site-packages off (-S) and no project path."""
    staged = stage_function_code(tmp_path)
    modules = [
        "pipeline_functions",
        "notification_function",
        *(f"tasks.{name.replace('-', '_')}" for name in TASK_NAMES),
    ]
    code = "import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]"
    result = subprocess.run(
        [sys.executable, "-S", "-c", code, *modules],
        cwd=staged,
        env={"PYTHONPATH": str(staged)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
