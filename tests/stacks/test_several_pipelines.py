"""An environment that deploys a second pipeline (settings `pipelines`, here text classification beside question
answering): its own stack, names, group, job, gate, notifications and trigger, and the shared data stack's policies
written for both. Synthesized once, under cdk-nag, with cfn-lint over every template."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from qa import notifications as contract
from tasks import task

from config import Settings, load_settings
from local_runner.event_pattern import matches
from pipeline_steps.names import evaluation_key
from pipeline_steps.walk import find_step
from stacks.app_builder import build_stacks
from stacks.assembly import synthesized_definition
from tests.conftest import as_list, render, resources_of_type
from tests.stacks.conftest import cfn_lint_problems, nag_synth

TASK = "text-classification"
THRESHOLD = 70.0  # the text-classification pipeline's own gate (dev's question answering keeps 85)
# The property that names a resource of each type account-wide or region-wide, where the stacks set one: two
# pipelines of one environment never share a name.
PHYSICAL_NAMES = {
    "AWS::Lambda::Function": "FunctionName",
    "AWS::IAM::Role": "RoleName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SageMaker::Pipeline": "PipelineName",
    "AWS::SageMaker::ModelPackageGroup": "ModelPackageGroupName",
    "AWS::Events::Rule": "Name",
    "AWS::CloudWatch::Alarm": "AlarmName",
}


@dataclass(frozen=True)
class SeveralPipelines:
    settings: Settings
    templates: dict[str, dict[str, Any]]  # "data", "network", "pipeline" (question answering), TASK
    nag_report: dict[str, Any]
    nag_passed: bool


@pytest.fixture(scope="module")
def several(cdk_context, tmp_path_factory) -> SeveralPipelines:
    """dev with pipelines = {TASK: {"evaluation": {"f1_threshold": THRESHOLD}}}, one App under cdk-nag (~20 s)."""
    context = {
        **cdk_context,
        "env": "dev",
        "pipelines": json.dumps({TASK: {"evaluation": {"f1_threshold": THRESHOLD}}}),
    }
    outdir = Path(tmp_path_factory.mktemp("cdk.out-pipelines"))
    app = cdk.App(context=cdk_context, outdir=str(outdir))
    settings = load_settings(context)
    stacks = build_stacks(app, settings)
    passed, report = nag_synth(app, outdir)
    roles = ("data", "network", "pipeline", TASK)
    templates = {
        which: json.loads((outdir / stack.template_file).read_text())
        for which, stack in zip(roles, stacks.all(), strict=True)
    }
    return SeveralPipelines(settings=settings, templates=templates, nag_report=report, nag_passed=passed)


def test_cdk_nag_and_cfn_lint_find_nothing(several):
    assert [v["ruleName"] for v in several.nag_report["violations"]] == [] and several.nag_passed
    assert {which: cfn_lint_problems(template) for which, template in several.templates.items()} == {
        which: [] for which in several.templates
    }


def test_the_second_pipeline_deploys_the_tasks_group_job_and_gate(several):
    facts, template = task(TASK), several.templates[TASK]
    group = f"hfqa-dev-{facts.RESOURCE_NAME}-models"
    [resource] = resources_of_type(template, "AWS::SageMaker::ModelPackageGroup").values()
    assert resource["Properties"]["ModelPackageGroupName"] == group
    definition = json.loads(synthesized_definition(template)[0])
    train = find_step(definition, "FineTune")["Arguments"]
    assert json.loads(train["HyperParameters"]["task"]) == TASK
    metric_names = [d["Name"] for d in train["AlgorithmSpecification"]["MetricDefinitions"]]
    assert [name for name in metric_names if name.startswith("eval:")] == [f"eval:{m}" for m in facts.METRICS]
    [condition] = find_step(definition, "CheckF1")["Arguments"]["Conditions"]
    assert condition["LeftValue"] == {"Get": f"Steps.FineTune.FinalMetricDataList['eval:{facts.GATE_METRIC}'].Value"}
    assert find_step(definition, "RegisterModel-RegisterModel")["Arguments"]["ModelPackageGroupName"] == group
    # Each pipeline's gate is its own.
    thresholds = {
        which: {p["Name"]: p.get("DefaultValue") for p in json.loads(synthesized_definition(t)[0])["Parameters"]}[
            "F1Threshold"
        ]
        for which, t in several.templates.items()
        if which in ("pipeline", TASK)
    }
    assert thresholds == {"pipeline": 85.0, TASK: THRESHOLD}


def test_the_notifications_quote_the_tasks_gate_metric_and_watch_its_group(several):
    facts, template = task(TASK), several.templates[TASK]
    [notifier] = [
        function
        for function in resources_of_type(template, "AWS::Lambda::Function").values()
        if contract.F1_METADATA_KEY_ENV in function["Properties"].get("Environment", {}).get("Variables", {})
    ]
    variables = notifier["Properties"]["Environment"]["Variables"]
    assert variables[contract.F1_METADATA_KEY_ENV] == evaluation_key(facts.GATE_METRIC) == "evaluation_macro_f1"
    watched = [
        rule["Properties"]["EventPattern"]["detail"]["ModelPackageGroupName"]
        for rule in resources_of_type(template, "AWS::Events::Rule").values()
        if "ModelPackageGroupName" in rule["Properties"]["EventPattern"].get("detail", {})
    ]
    assert watched and all(names == [f"hfqa-dev-{facts.RESOURCE_NAME}-models"] for names in watched)


def physical_names(template: dict[str, Any]) -> set[str]:
    return {
        render(resource["Properties"][PHYSICAL_NAMES[resource["Type"]]])
        for resource in template["Resources"].values()
        if PHYSICAL_NAMES.get(resource["Type"], "") in resource.get("Properties", {})
    }


def test_the_two_pipeline_stacks_share_no_resource_name(several):
    qa, text = physical_names(several.templates["pipeline"]), physical_names(several.templates[TASK])
    assert len(qa) >= 8 and len(text) == len(qa)
    assert qa & text == set()


def manifest_rule_keys(template: dict[str, Any]) -> dict[str, Any]:
    """The object-key condition of the pipeline's dataset trigger."""
    [rule] = [
        rule
        for rule in resources_of_type(template, "AWS::Events::Rule").values()
        if rule["Properties"]["EventPattern"]["source"] == ["aws.s3"]
    ]
    return rule["Properties"]["EventPattern"]["detail"]["object"]


@pytest.mark.parametrize("which", ["pipeline", TASK])
def test_an_upload_starts_only_its_own_tasks_pipeline(several, which):
    """EventBridge's `*` wildcard also spans `/` (local_runner.event_pattern, as the rule matches on AWS): each
    pipeline's rule takes the manifests under its own root, none of the other's, nested or not."""
    pipelines = {"pipeline": several.settings, TASK: several.settings.pipeline_of(TASK)}
    own, other = pipelines[which].datasets.root, pipelines[TASK if which == "pipeline" else "pipeline"].datasets.root
    keys = manifest_rule_keys(several.templates[which])
    assert matches(keys, {"key": f"{own}/reviews/v1/manifest.json"})
    for key in (f"{other}/reviews/v1/manifest.json", f"{own}/reviews/v1/held-manifest.json"):
        assert not matches(keys, {"key": key}), key


def data_statement(several: SeveralPipelines, resource_type: str, sid: str) -> dict[str, Any]:
    [statement] = [
        statement
        for policy in resources_of_type(several.templates["data"], resource_type).values()
        for statement in policy["Properties"]["KeyPolicy" if resource_type == "AWS::KMS::Key" else "PolicyDocument"][
            "Statement"
        ]
        if statement.get("Sid") == sid
    ]
    return statement


def test_the_shared_data_stack_is_written_for_both_pipelines(several):
    """The key lets the alarms of both topics publish, each pipeline's registry takes only its own RecordModel role's
    writes, and both dataset roots' data files are written once."""
    text = several.settings.pipeline_of(TASK)
    alarms = data_statement(several, "AWS::KMS::Key", "AlarmsPublishToTheEncryptedTopic")
    topics = [render(t) for t in as_list(alarms["Condition"]["StringEquals"]["kms:EncryptionContext:aws:sns:topicArn"])]
    assert [t.rsplit(":", 1)[1] for t in topics] == [
        several.settings.notification_topic_name,
        text.notification_topic_name,
    ]
    for pipeline, suffix in ((several.settings, ""), (text, "TextClassification")):
        writers = data_statement(several, "AWS::S3::BucketPolicy", f"OnlyRecordModelWritesTheRegistry{suffix}")
        [role] = [render(r) for r in as_list(writers["Condition"]["ArnNotEquals"]["aws:PrincipalArn"])]
        assert role.rsplit("/", 1)[1] == pipeline.record_model_role_name("${AWS::Region}")
        [registry] = [render(r) for r in as_list(writers["Resource"])]
        assert registry.endswith(f"/{pipeline.layout.registry}/*")
        deletes = data_statement(several, "AWS::S3::BucketPolicy", f"NothingDeletesFromTheRegistry{suffix}")
        assert [render(r) for r in as_list(deletes["Resource"])] == [registry]
    written_once = data_statement(several, "AWS::S3::BucketPolicy", "DatasetsDataFilesAreWrittenOnce")
    roots = {render(r).split(":::", 1)[1].split("/")[1] for r in as_list(written_once["Resource"])}
    assert roots == {"datasets", f"datasets-{task(TASK).RESOURCE_NAME}"}


def s3_object_prefixes(template: dict[str, Any]) -> set[str]:
    """The first key segment of every artifacts-bucket object ARN that the template's IAM policies name."""
    prefixes = set()
    for policy in resources_of_type(template, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            for resource in as_list(statement.get("Resource", [])):
                if "-artifacts-" not in json.dumps(resource):
                    continue  # another bucket, a key (imported), a topic...
                text = render(resource)
                if "/" in text.split(":::", 1)[1]:
                    prefixes.add(text.split(":::", 1)[1].split("/")[1])
    return prefixes


def test_each_pipeline_s_roles_reach_its_own_artifact_prefixes_only(several):
    """Claims, pinned inputs, checkpoints, models, evaluation reports, TensorBoard logs and registry copies lie under
    prefixes of each pipeline's own (ArtifactLayout.of_pipeline: question answering's keep their names); what both
    roles name is what the environment shares: the staged base models (read only) and the benchmarks root."""
    text = several.settings.pipeline_of(TASK)
    own, other = several.settings.layout, text.layout
    per_pipeline = {"claims", "inputs", "checkpoints", "models", "evaluation", "tensorboard", "registry"}
    assert {getattr(own, name) for name in per_pipeline} == per_pipeline
    assert {getattr(other, name) for name in per_pipeline} == {f"{name}-{TASK}" for name in per_pipeline}
    qa_prefixes = s3_object_prefixes(several.templates["pipeline"])
    text_prefixes = s3_object_prefixes(several.templates[TASK])
    assert {f"{name}-{TASK}" for name in ("claims", "inputs", "checkpoints", "models", "registry")} <= text_prefixes
    assert qa_prefixes & text_prefixes <= {own.base_models, own.benchmarks}
    assert not text_prefixes & per_pipeline and not qa_prefixes & {getattr(other, name) for name in per_pipeline}


def test_the_shared_network_and_lifecycle_cover_both_pipelines(several):
    """The S3 endpoint lets each pipeline's jobs write their outputs; each pipeline's checkpoints expire by a rule of
    their own, and old versions under each pipeline's expiring prefixes."""
    text = several.settings.pipeline_of(TASK)
    [statements] = [
        {statement.get("Sid"): statement for statement in endpoint["Properties"]["PolicyDocument"]["Statement"]}
        for endpoint in resources_of_type(several.templates["network"], "AWS::EC2::VPCEndpoint").values()
        if "PolicyDocument" in endpoint["Properties"]
    ]
    written = {render(r).rsplit("/", 2)[1] for r in as_list(statements["WriteJobOutputs"]["Resource"])}
    assert {text.layout.checkpoints, text.layout.models, several.settings.layout.models} <= written
    [bucket] = [
        b
        for b in resources_of_type(several.templates["data"], "AWS::S3::Bucket").values()
        if "artifacts" in render(b["Properties"]["BucketName"])
    ]
    rules = {rule["Id"]: rule.get("Prefix") for rule in bucket["Properties"]["LifecycleConfiguration"]["Rules"]}
    assert (
        rules["expire-checkpoints"] == "checkpoints/" and rules[f"expire-checkpoints-{TASK}"] == f"checkpoints-{TASK}/"
    )
    assert rules[f"expire-old-claims-{TASK}-versions"] == f"claims-{TASK}/"


def test_every_lifecycle_rule_id_is_unique_and_within_s3_s_limit(several):
    """One rule per pipeline prefix: S3 takes a rule ID of at most 255 characters, unique in the configuration
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_LifecycleRule.html, "ID")."""
    ids = [
        rule["Id"]
        for bucket in resources_of_type(several.templates["data"], "AWS::S3::Bucket").values()
        for rule in bucket["Properties"].get("LifecycleConfiguration", {}).get("Rules", [])
        if "artifacts" in render(bucket["Properties"]["BucketName"])
    ]
    assert len(ids) == len(set(ids)) and max(map(len, ids)) <= 255
    assert sum(rule_id.endswith(f"-{TASK}-versions") for rule_id in ids) >= 5
