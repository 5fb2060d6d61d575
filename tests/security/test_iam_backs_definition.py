"""Issue 30, findings 7 and 9: IAM backs the definition. Before, the pipeline role's CreateTrainingJob and
CreateProcessingJob carried no condition (an execution could have started a job without network isolation, on any
instance type, in any subnet, unencrypted), the project key let CloudWatch Logs use it for any log group in the
account, and the job role could list the whole artifacts bucket.

Each attack is performed on the synthesized templates (the session's dev and prod App) with a policy evaluator
(tests/security/policy_evaluation.py): the definition's own job requests, resolved as CloudFormation would resolve
them, are allowed; the same requests changed the way an attacker would change them are denied. What SageMaker puts
in the request context is modelled from the condition keys' descriptions in the Service Authorization Reference
(job_request_context); AWS's evaluation itself cannot be run offline.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from pipeline_steps import names
from pipeline_steps.walk import find_step
from tests.conftest import SynthesizedEnvironment, as_list, resources_of_type
from tests.security.policy_evaluation import (
    JOB_ACTIONS,
    JOB_ARNS,
    allowed,
    condition_holds,
    job_request,
    may_create,
    resolved_definition,
    role_statements,
)
from tests.stacks.iam_reference import ACCOUNT, PARTITION, REGION, Stacks

OTHER_KEY = f"arn:{PARTITION}:kms:{REGION}:{ACCOUNT}:key/00000000-0000-0000-0000-000000000000"


@pytest.fixture(scope="module", params=["dev", "prod", "dev cpu_job", "prod cpu_job"])
def env(request) -> SynthesizedEnvironment:
    """Each environment in both graphs: processing.tokenize_in = "fine_tune" (the default) and "cpu_job"."""
    name, _, mode = request.param.partition(" ")
    return request.getfixturevalue("synthesized_cpu_job")[name] if mode else request.getfixturevalue(name)


def has_step(definition: dict[str, Any], step: str) -> bool:
    try:
        find_step(definition, step)
    except KeyError:
        return False
    return True


@pytest.fixture(scope="module")
def pipeline_role(env) -> list[dict[str, Any]]:
    return role_statements(env.templates, "pipeline", "PipelineRole")


@pytest.fixture(scope="module")
def definition(env) -> dict[str, Any]:
    return resolved_definition(env.templates)


def test_every_instance_type_an_execution_may_choose_passes_the_conditions(pipeline_role, definition):
    [instance_type] = [p for p in definition["Parameters"] if p["Name"] == "TrainingInstanceType"]
    assert instance_type["EnumValues"]
    for choice in instance_type["EnumValues"]:
        assert may_create(
            pipeline_role,
            names.TRAIN_STEP,
            job_request(definition, names.TRAIN_STEP, TrainingInstanceType=choice),
        ), choice
    if has_step(definition, names.PREPROCESS_STEP):  # cpu_job mode only
        assert may_create(pipeline_role, names.PREPROCESS_STEP, job_request(definition, names.PREPROCESS_STEP))


# What an execution (or a poisoned definition) could change in a training job request, each denied.
TRAINING_ATTACKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "network isolation off": lambda r: r.update(EnableNetworkIsolation=False),
    "no network isolation field": lambda r: r.pop("EnableNetworkIsolation"),
    "another instance type": lambda r: r["ResourceConfig"].update(InstanceType="ml.p5.48xlarge"),
    "an instance group of another type": lambda r: r["ResourceConfig"].update(
        InstanceGroups=[{"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1, "InstanceGroupName": "x"}]
    ),
    "another subnet": lambda r: r["VpcConfig"].update(Subnets=["subnet-0attacker0000000"]),
    "another security group": lambda r: r["VpcConfig"].update(SecurityGroupIds=["sg-0attacker000000000"]),
    "outside the VPC": lambda r: r.pop("VpcConfig"),
    "outputs without the key": lambda r: r["OutputDataConfig"].pop("KmsKeyId"),
    "outputs with another key": lambda r: r["OutputDataConfig"].update(KmsKeyId=OTHER_KEY),
    "a volume with another key": lambda r: r["ResourceConfig"].update(VolumeKmsKeyId=OTHER_KEY),
}
PROCESSING_ATTACKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "network isolation off": lambda r: r["NetworkConfig"].update(EnableNetworkIsolation=False),
    "another instance type": lambda r: r["ProcessingResources"]["ClusterConfig"].update(InstanceType="ml.m5.24xlarge"),
    "another subnet": lambda r: r["NetworkConfig"]["VpcConfig"].update(Subnets=["subnet-0attacker0000000"]),
    "another security group": lambda r: r["NetworkConfig"]["VpcConfig"].update(SecurityGroupIds=["sg-0attacker0"]),
    "outside the VPC": lambda r: r["NetworkConfig"].pop("VpcConfig"),
    "outputs without the key": lambda r: r["ProcessingOutputConfig"].pop("KmsKeyId"),
    "volume without the key": lambda r: r["ProcessingResources"]["ClusterConfig"].pop("VolumeKmsKeyId"),
    "volume with another key": lambda r: r["ProcessingResources"]["ClusterConfig"].update(VolumeKmsKeyId=OTHER_KEY),
}


@pytest.mark.parametrize(
    ("step", "attack"),
    [(names.TRAIN_STEP, name) for name in TRAINING_ATTACKS]
    + [(names.PREPROCESS_STEP, name) for name in PROCESSING_ATTACKS],
)
def test_a_job_request_the_definition_does_not_make_is_denied(pipeline_role, definition, step, attack):
    if not has_step(definition, step):
        pytest.skip(f"no {step} in this graph (processing.tokenize_in = fine_tune)")
    request = copy.deepcopy(job_request(definition, step))
    assert may_create(pipeline_role, step, request)
    (TRAINING_ATTACKS if step == names.TRAIN_STEP else PROCESSING_ATTACKS)[attack](request)
    assert not may_create(pipeline_role, step, request), attack


def test_the_training_job_names_no_volume_key_and_the_role_requires_none(pipeline_role, definition, env):
    """Every default training type has local NVMe (dev's g5.2xlarge, p4d, p4de, p3dn), where AWS rejects a
    VolumeKmsKeyId: the definition omits it, and the condition asks for its absence rather than denying the
    definition's request."""
    request = job_request(definition, names.TRAIN_STEP)
    assert "VolumeKmsKeyId" not in request["ResourceConfig"]
    [statement] = [s for s in pipeline_role if "sagemaker:CreateTrainingJob" in as_list(s["Action"])]
    assert statement["Condition"]["Null"]["sagemaker:VolumeKmsKey"] == "true"
    assert "sagemaker:VolumeKmsKey" not in statement["Condition"]["ArnEquals"]


def test_no_other_statement_of_the_pipeline_role_creates_jobs(pipeline_role, definition):
    """Without their conditions, which statements would allow a Create*Job at all: only the conditioned ones, one
    per kind of job the graph runs."""
    creating = {
        s["Sid"]
        for s in pipeline_role
        for step, action in JOB_ACTIONS.items()
        if allowed([{**s, "Condition": None}], action, JOB_ARNS[step], {})
    }
    processing = {"CreateProcessingJobsAsDefined"} if has_step(definition, names.PREPROCESS_STEP) else set()
    assert creating == {"CreateTrainingJobsAsDefined", *processing}


# ------------------------------------------------------------------------- the key and CloudWatch Logs (finding 9)


def key_statement(env: SynthesizedEnvironment, sid: str) -> dict[str, Any]:
    template = env.templates["data"]
    [key] = resources_of_type(template, "AWS::KMS::Key").values()
    [statement] = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Sid") == sid]
    return Stacks(env.templates).concrete(statement, template)


def log_group_arn(name: str) -> str:
    return f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{name}"


def test_cloudwatch_logs_may_use_the_key_for_the_project_log_groups_only(env):
    """The encryption context CloudWatch Logs sends is kms:EncryptionContext:aws:logs:arn, the log group's ARN
    (encrypt-log-data-kms page). Every log group the project encrypts with the key is named under the project's
    root, and those pass; any other log group of the account does not."""
    statement = key_statement(env, "CloudWatchLogsForTheProjectLogGroups")
    encrypted = [
        group["Properties"]
        for template in env.templates.values()
        for group in resources_of_type(template, "AWS::Logs::LogGroup").values()
        if "KmsKeyId" in group["Properties"]
    ]
    assert len(encrypted) >= 4  # the four functions' (dev and prod: the flow logs too)
    for group in encrypted:
        name = group["LogGroupName"]
        assert name.startswith(env.settings.log_group_root), name
        context = {"kms:EncryptionContext:aws:logs:arn": log_group_arn(name)}
        assert allowed([statement], "kms:GenerateDataKey", "*", context), name
    for unrelated in ("/aws/lambda/someone-elses-function", "/hfqa-other/functions/x", "team-logs"):
        context = {"kms:EncryptionContext:aws:logs:arn": log_group_arn(unrelated)}
        assert not allowed([statement], "kms:Decrypt", "*", context), unrelated
    # Nor a log group of another account or region.
    other_account = log_group_arn(f"{env.settings.log_group_root}x").replace(ACCOUNT, "999999999999")
    assert not condition_holds(statement["Condition"], {"kms:EncryptionContext:aws:logs:arn": other_account})


# ---------------------------------------------------------------------- the job role's listings (finding 9)


def test_the_job_role_lists_only_the_prefixes_sagemaker_lists_for_its_jobs(env):
    statements = role_statements(env.templates, "pipeline", "JobRole")
    layout = env.settings.layout
    bucket = f"arn:{PARTITION}:s3:::{env.settings.bucket_name('artifacts', ACCOUNT, REGION)}"

    def may_list(prefix: str | None) -> bool:
        return allowed(statements, "s3:ListBucket", bucket, {} if prefix is None else {"s3:prefix": prefix})

    # The S3Prefix inputs and the checkpoint folder of an execution, as the definition names them; the features
    # under processed/ only where ValidateAndTokenize writes them (FineTune reads inputs/ when it tokenizes).
    features = f"{layout.processed}/exec-1/train"
    features_job = not env.settings.tokenizes_in_fine_tune
    for prefix in (
        f"{layout.base_models}/bert-large-uncased-whole-word-masking/",
        f"{layout.inputs}/0123abcd/",
        *([features] if features_job else []),
        f"{layout.checkpoints}/exec-1",
    ):
        assert may_list(prefix), prefix
    denied_prefixes = (None, "", f"{layout.claims}/", f"{layout.models}/", f"{layout.evaluation}/", "registry/")
    for denied in (*denied_prefixes, *([] if features_job else [features])):
        assert not may_list(denied), denied
    # ValidateAndTokenize's benchmark input (prod) is an S3Prefix input too: its folder, and no other benchmark's.
    if env.settings.benchmark_prefix:
        assert may_list(env.settings.benchmark_prefix)
        assert not may_list(f"{layout.benchmarks}/another/v1/")


# ---------------------------------------------------------------- EventBridge and the topic (Do 9, last item)


def test_eventbridge_holds_no_unconditioned_grant_on_the_topic_and_invokes_the_notifier_per_rule(env):
    """At 216184a the topic policy let events.amazonaws.com publish without a condition (the EventBridge-to-SNS
    statement allowed none). The rules now invoke the notification function, which publishes with its own role: no
    topic statement names EventBridge, and each of its invoke permissions names one rule (SourceArn)."""
    template = env.templates["pipeline"]
    topic_statements = [
        statement
        for policy in resources_of_type(template, "AWS::SNS::TopicPolicy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert topic_statements
    assert all("events.amazonaws.com" not in str(s.get("Principal")) for s in topic_statements)
    rules = resources_of_type(template, "AWS::Events::Rule")
    invokes = [
        p["Properties"]
        for p in resources_of_type(template, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert invokes and all(p["SourceArn"]["Fn::GetAtt"][0] in rules for p in invokes)


# ------------------------------------------------------- the job role reads what the training job's channels name


def test_the_job_role_reads_every_object_the_training_channels_name(env, definition):
    """Each S3 channel of FineTune (ValidateAndTokenize's features, or, when FineTune tokenizes, ClaimManifest's pinned
    folder and the raw benchmark folder), resolved as an execution resolves it: the job role may read its objects.
    A step output stands for a key under inputs/ (ClaimManifest's InputUri) or processed/ (the features)."""
    statements = role_statements(env.templates, "pipeline", "JobRole")
    layout = env.settings.layout
    bucket = env.settings.bucket_name("artifacts", ACCOUNT, REGION)
    step_outputs = {"OutputParameters": f"s3://{bucket}/{layout.inputs}/0123abcd/", "ProcessingOutputConfig": None}
    for channel in job_request(definition, names.TRAIN_STEP)["InputDataConfig"]:
        uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
        if isinstance(uri, dict):  # a step's output
            [source] = [kind for kind in step_outputs if kind in uri["Get"]]
            uri = step_outputs[source] or f"s3://{bucket}/{layout.processed}/exec-1/{channel['ChannelName']}"
        if not uri.startswith(f"s3://{bucket}/"):
            continue  # the source bundle, in the CDK assets bucket (the stacks' grant, tests/stacks)
        key = f"{uri.removeprefix(f's3://{bucket}/').rstrip('/')}/validation/part-0.jsonl"
        assert allowed(statements, "s3:GetObject", f"arn:{PARTITION}:s3:::{bucket}/{key}", {}), channel["ChannelName"]


def test_without_a_processing_job_in_the_graph_the_pipeline_role_can_start_none(env, pipeline_role, definition):
    """processing.tokenize_in = "fine_tune": no ValidateAndTokenize, so no CreateProcessingJob (nor Describe or
    Stop) for the pipeline role, whatever the request; the job role writes no features under processed/."""
    if has_step(definition, names.PREPROCESS_STEP):
        pytest.skip("the cpu_job graph runs ValidateAndTokenize")
    arn = JOB_ARNS[names.PREPROCESS_STEP]
    for action in ("sagemaker:CreateProcessingJob", "sagemaker:DescribeProcessingJob", "sagemaker:StopProcessingJob"):
        assert not allowed(pipeline_role, action, arn, {}), action
    bucket = env.settings.bucket_name("artifacts", ACCOUNT, REGION)
    features = f"arn:{PARTITION}:s3:::{bucket}/{env.settings.layout.processed}/exec-1/train/features.npz"
    assert not allowed(role_statements(env.templates, "pipeline", "JobRole"), "s3:PutObject", features, {})
