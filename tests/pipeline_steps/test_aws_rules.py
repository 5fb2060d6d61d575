"""The rules AWS enforces beyond API shapes: the instance-facts table, the definition checks, and caching
keyed by the uploaded manifest's content."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from contextlib import nullcontext

import pytest
from pipeline_functions import claim_digest
from tasks import TASK_NAMES

from config import load_settings
from config.costs import TRAINING_USD_PER_HOUR
from config.instance_types import INSTANCE_TYPES
from config.layout import DatasetLayout
from local_runner.assembly import extract_event_value
from local_runner.expressions import ExpressionResolver
from local_runner.trigger import object_created_event
from pipeline_steps.aws_rules import (
    MODEL_PACKAGE_GROUP_NAME,
    AwsRuleViolation,
    botocore_enum,
    check_definition,
    violations,
)
from pipeline_steps.definition import build_definition
from pipeline_steps.names import MANIFEST_VERSION_ID
from pipeline_steps.walk import all_steps, find_step
from stacks.trigger import PIPELINE_PARAMETERS_FROM_EVENT
from tests.conftest import longest_name_prefix

TRAINING_TYPES = sorted(name for name, row in INSTANCE_TYPES.items() if row.training)


@pytest.mark.parametrize("name", sorted(INSTANCE_TYPES))
def test_every_row_agrees_with_botocores_enums(name):
    row = INSTANCE_TYPES[name]
    assert row.training == (name in botocore_enum("TrainingInstanceType"))
    assert row.processing == (name in botocore_enum("ProcessingInstanceType"))


def test_every_g5_g6_g6e_size_sagemaker_trains_on_is_in_the_catalogue():
    """Issue 32: the catalogue holds every size of these families that botocore's TrainingInstanceType lists."""
    families = ("ml.g5.", "ml.g6.", "ml.g6e.")
    offered = {name for name in botocore_enum("TrainingInstanceType") if name.startswith(families)}
    assert len(offered) == 24 and offered <= set(INSTANCE_TYPES)
    assert "ml.p5.48xlarge" in INSTANCE_TYPES and INSTANCE_TYPES["ml.p5.48xlarge"].training


def test_the_dev_and_prod_definitions_break_no_rule(definition, cdk_context):
    assert violations(definition) == []
    assert violations(build_definition(load_settings({**cdk_context, "env": "prod"}))) == []


def test_volume_keys_only_where_no_possible_instance_type_has_local_storage(definition, settings, cpu_job_definition):
    """Before: FineTune (p4d/p3dn) and the former Evaluate job (g5) carried VolumeKmsKeyId, which AWS rejects."""
    train = find_step(definition, "FineTune")["Arguments"]["ResourceConfig"]
    assert any(INSTANCE_TYPES[name].has_local_storage for name in settings.training_instance_types)
    assert "VolumeKmsKeyId" not in train
    preprocess = find_step(cpu_job_definition, "ValidateAndTokenize")["Arguments"]["ProcessingResources"][
        "ClusterConfig"
    ]
    assert not INSTANCE_TYPES[preprocess["InstanceType"]].has_local_storage
    assert preprocess["VolumeKmsKeyId"] == "${KmsKeyArn}"


def with_training_types(definition: dict, names: list[str], volume_key: bool) -> dict:
    changed = copy.deepcopy(definition)
    [parameter] = [p for p in changed["Parameters"] if p["Name"] == "TrainingInstanceType"]
    parameter["EnumValues"], parameter["DefaultValue"] = names, names[0]
    if volume_key:
        find_step(changed, "FineTune")["Arguments"]["ResourceConfig"]["VolumeKmsKeyId"] = "${KmsKeyArn}"
    return changed


@pytest.mark.parametrize("name", TRAINING_TYPES)
def test_every_training_type_against_the_volume_key_rule(definition, name):
    problems = violations(with_training_types(definition, [name], volume_key=True))
    if INSTANCE_TYPES[name].has_local_storage:
        assert problems == [
            f"step FineTune: ResourceConfig.InstanceType: {name} has local NVMe storage, and AWS rejects "
            "ResourceConfig.VolumeKmsKeyId on such types (API_ResourceConfig / API_ProcessingClusterConfig); "
            "omit the key"
        ]
    else:
        assert problems == []
    assert violations(with_training_types(definition, [name], volume_key=False)) == []


@pytest.mark.parametrize("name", TRAINING_TYPES)
def test_every_training_type_against_the_settings_rules(cdk_context, name):
    """Each type the table allows for training either loads with matching settings or says which rule fails."""
    row = INSTANCE_TYPES[name]
    overrides = {
        "training.instance_type": name,
        "training.instance_count": "2" if row.efa else "1",
        "hyperparameters.precision": "bf16" if row.bf16 else "fp16",
    }
    if name not in TRAINING_USD_PER_HOUR or row.gpu is None or row.gpu.peak_dense_tflops is None:
        with pytest.raises(ValueError, match=f"{name} has no (list price|GPU with a known peak)"):
            load_settings({**cdk_context, **overrides})
        return
    settings = load_settings({**cdk_context, **overrides})
    assert settings.training_instance_types[0] == name
    if row.efa:
        with pytest.raises(ValueError, match="smddp does not run") if not row.smddp else nullcontext():
            load_settings({**cdk_context, **overrides, "training.distribution": "smddp"})
    else:
        with pytest.raises(ValueError, match="needs an EFA-capable instance type"):
            load_settings({**cdk_context, **overrides, "training.instance_count": "2"})
    if not row.bf16:
        with pytest.raises(ValueError, match=f"precision=bf16 is not supported by the GPUs of {name}"):
            load_settings({**cdk_context, **overrides, "hyperparameters.precision": "bf16"})


def test_an_instance_type_outside_botocores_enum_is_rejected_at_synth(cdk_context, monkeypatch):
    """Even if the facts table wrongly lists a type, the build checks AWS's own enum and names the key."""
    fake = dataclasses.replace(INSTANCE_TYPES["ml.p5.48xlarge"], name="ml.p9.48xlarge")
    monkeypatch.setitem(INSTANCE_TYPES, fake.name, fake)
    monkeypatch.setitem(TRAINING_USD_PER_HOUR, fake.name, 100.0)
    settings = load_settings({**cdk_context, "training.instance_type": fake.name})
    with pytest.raises(AwsRuleViolation, match=r"step FineTune: ResourceConfig\.InstanceType: ml\.p9\.48xlarge is "):
        build_definition(settings)


def test_a_free_form_instance_type_parameter_is_rejected(definition):
    changed = copy.deepcopy(definition)
    [parameter] = [p for p in changed["Parameters"] if p["Name"] == "TrainingInstanceType"]
    del parameter["EnumValues"]
    with pytest.raises(AwsRuleViolation, match="parameter TrainingInstanceType is free-form"):
        check_definition(changed)


@pytest.mark.parametrize(
    ("keep_alive", "spot", "expected"),
    [
        (600, True, r"KeepAlivePeriodInSeconds \(600\) with EnableManagedSpotTraining: warm pools cannot be used"),
        (10**6, False, r"KeepAlivePeriodInSeconds is 1000000; AWS allows 0-\d+"),
        (600, False, None),
    ],
)
def test_a_warm_pool_is_in_range_and_never_on_spot(definition, keep_alive, spot, expected):
    """https://docs.aws.amazon.com/sagemaker/latest/dg/train-warm-pools.html (Considerations) and
    API_ResourceConfig's range: a definition edited past the settings' checks is still refused."""
    changed = copy.deepcopy(definition)
    arguments = find_step(changed, "FineTune")["Arguments"]
    arguments["ResourceConfig"]["KeepAlivePeriodInSeconds"] = keep_alive
    arguments["EnableManagedSpotTraining"] = spot
    with pytest.raises(AwsRuleViolation, match=expected) if expected else nullcontext():
        check_definition(changed)


def test_processing_volume_may_not_exceed_local_storage(cpu_job_definition):
    changed = copy.deepcopy(cpu_job_definition)
    cluster = find_step(changed, "ValidateAndTokenize")["Arguments"]["ProcessingResources"]["ClusterConfig"]
    cluster["InstanceType"] = next(t.name for t in INSTANCE_TYPES.values() if t.processing and t.has_local_storage)
    cluster["VolumeSizeInGB"] = INSTANCE_TYPES[cluster["InstanceType"]].local_nvme_gb + 1
    assert [p for p in violations(changed) if "VolumeSizeInGB" in p]


def test_inference_instance_types_are_checked(definition):
    changed = copy.deepcopy(definition)
    register = next(s for s in all_steps(changed["Steps"]) if s["Type"] == "RegisterModel")
    register["Arguments"]["InferenceSpecification"]["SupportedRealtimeInferenceInstanceTypes"] = ["ml.nope.large"]
    assert violations(changed) == [
        f"step {register['Name']}: InferenceSpecification.SupportedRealtimeInferenceInstanceTypes: ml.nope.large is "
        "not a valid ProductionVariantInstanceType"
    ]


def test_container_arguments_longer_than_aws_allows_are_named(cpu_job_definition):
    changed = copy.deepcopy(cpu_job_definition)
    pre = find_step(changed, "ValidateAndTokenize")
    arguments = pre["Arguments"]["AppSpecification"]["ContainerArguments"]
    assert all(len(a) <= 256 for a in arguments if isinstance(a, str))  # the real definition fits
    arguments.append("x" * 257)
    assert violations(changed) == [
        f"step ValidateAndTokenize: AppSpecification.ContainerArguments[{len(arguments) - 1}] is 257 characters; "
        "AWS allows 256 (ContainerArgument)"
    ]


def test_a_model_package_description_longer_than_aws_allows_is_named(cpu_job_definition):
    """ModelPackageDescription holds at most 1,024 characters (API_CreateModelPackage, botocore's
    EntityDescription: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModelPackage.html); it
    is built from the model.base_model setting, which has no length limit of its own. botocore's ParamValidator
    checks no maximum, so before this rule a 1,025-character description synthesized; so did 101 arguments."""
    changed = copy.deepcopy(cpu_job_definition)
    register = find_step(changed, "RegisterModel-RegisterModel")["Arguments"]
    assert len(register["ModelPackageDescription"]) <= 1024  # the real definition fits
    register["ModelPackageDescription"] = "x" * 1025
    find_step(changed, "ValidateAndTokenize")["Arguments"]["AppSpecification"]["ContainerArguments"][:] = ["a"] * 101
    assert violations(changed) == [
        "step ValidateAndTokenize: AppSpecification.ContainerArguments has 101 items; AWS allows 100",
        "step RegisterModel-RegisterModel: ModelPackageDescription is 1025 characters; AWS allows 1024 "
        "(EntityDescription)",
    ]


def test_a_fail_message_that_run_time_values_could_push_past_aws_limit_is_named(definition):
    """A Fail step's ErrorMessage holds at most 3,072 characters (API_FailStepMetadata:
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_FailStepMetadata.html); each parameter or step
    output in it may be 1,024 (API_Parameter, API_OutputParameter). TrainingCostAboveLimit quotes two such values
    beside its text: within the limit, but 900 more characters of text would not be."""
    changed = copy.deepcopy(definition)
    values = find_step(changed, "TrainingCostAboveLimit")["Arguments"]["ErrorMessage"]["Std:Join"]["Values"]
    text = sum(len(v) for v in values if isinstance(v, str)) + len(values) - 1
    assert text + 2 * 1024 <= 3072  # the real message fits
    values.append("x" * 900)
    assert violations(changed) == [
        f"step TrainingCostAboveLimit: ErrorMessage can reach {text + 901 + 2 * 1024} characters; AWS allows 3072 "
        "(FailStepMetadata)"
    ]


def test_training_instance_type_parameter_lists_exactly_the_validated_types(definition, settings):
    [parameter] = [p for p in definition["Parameters"] if p["Name"] == "TrainingInstanceType"]
    assert parameter["EnumValues"] == list(settings.training_instance_types)
    assert parameter["DefaultValue"] == settings.training.instance_type


def preprocess_cache_key(definition: dict, event: dict) -> str:
    """What SageMaker hashes for a cached Processing step: AppSpecification, Environment, ProcessingInputs
    with parameters resolved (https://docs.aws.amazon.com/sagemaker/latest/dg/pipelines-default-keys.html)."""
    parameters = {p["Name"]: p.get("DefaultValue") for p in definition["Parameters"]}
    parameters |= {name: extract_event_value(event, path) for name, path in PIPELINE_PARAMETERS_FROM_EVENT.items()}
    # ClaimManifest's InputUri: one folder per manifest version (training_code/pipeline_functions.py).
    digest = claim_digest(parameters["DatasetBucket"], parameters["ManifestKey"], parameters["ManifestVersionId"])
    claimed = {"ClaimManifest": {"OutputParameters": {"InputUri": f"s3://artifacts/inputs/{digest}/"}}}
    resolver = ExpressionResolver(parameters, {"PipelineExecutionId": "x"}, claimed)
    arguments = find_step(definition, "ValidateAndTokenize")["Arguments"]
    keyed = {k: resolver.resolve(arguments.get(k)) for k in ("AppSpecification", "Environment", "ProcessingInputs")}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()


def test_same_manifest_key_with_new_content_gets_a_new_cache_key(cpu_job_definition, settings):
    definition = cpu_job_definition
    account, region = "123456789012", "us-east-1"
    key, bucket = DatasetLayout().manifest_key("squad", "v1"), settings.bucket_name("datasets", account, region)
    first = object_created_event(bucket, key, b'[{"prefix": "s3://b/"}, "a.json"]', account, region)
    corrected = object_created_event(bucket, key, b'[{"prefix": "s3://b/"}, "b.json"]', account, region)
    assert preprocess_cache_key(definition, first) != preprocess_cache_key(definition, corrected)
    # The same event delivered twice (at-least-once delivery) is the same upload: same key.
    assert preprocess_cache_key(definition, first) == preprocess_cache_key(definition, copy.deepcopy(first))


def test_the_unset_version_default_is_the_one_the_claim_step_refuses(definition):
    """The claim refuses qa.outputs' MANIFEST_VERSION_UNSET (tests/training_code/test_pipeline_functions.py)."""
    from qa.outputs import MANIFEST_VERSION_UNSET

    [default] = [p["DefaultValue"] for p in definition["Parameters"] if p["Name"] == MANIFEST_VERSION_ID]
    assert default == MANIFEST_VERSION_UNSET


def test_the_gpus_people_have_build_with_the_rules_each_type_needs(definition, settings, cdk_context):
    """Issue 32: dev's default ml.g5.2xlarge (one A10G, local NVMe, no EFA) and ml.p5.48xlarge (8 x H100, NVMe,
    EFA; no list price, so the operator's training.usd_per_hour prices it) synthesize: no volume key on a type
    with local storage (API_ResourceConfig), the CUDA 13.0 image (sm_86 and sm_90 kernels: config/instance_types.py),
    several nodes only on an EFA type, SMDDP on neither (distributed-data-parallel-support.html)."""
    assert settings.training.instance_type == "ml.g5.2xlarge"
    p5 = load_settings({**cdk_context, "training.instance_type": "ml.p5.48xlarge", "training.usd_per_hour": "50",
                        "training.instance_count": "2"})  # fmt: skip
    for built, name in ((definition, "ml.g5.2xlarge"), (build_definition(p5), "ml.p5.48xlarge")):
        assert violations(built) == []
        train = find_step(built, "FineTune")["Arguments"]
        assert "VolumeKmsKeyId" not in train["ResourceConfig"]
        assert "-cu130-" in train["AlgorithmSpecification"]["TrainingImage"]
        [parameter] = [p for p in built["Parameters"] if p["Name"] == "TrainingInstanceType"]
        assert parameter["DefaultValue"] == name
        assert train["EnableManagedSpotTraining"] is True and train["CheckpointConfig"]["S3Uri"]
    assert p5.training.instance_count == 2 and INSTANCE_TYPES["ml.p5.48xlarge"].efa
    with pytest.raises(ValueError, match="needs an EFA-capable instance type"):
        load_settings({**cdk_context, "training.instance_count": "2"})
    for name in ("ml.g5.2xlarge", "ml.p5.48xlarge"):
        with pytest.raises(ValueError, match=f"smddp does not run on {name}"):
            load_settings({**cdk_context, "training.instance_type": name, "training.usd_per_hour": "50",
                           "training.distribution": "smddp"})  # fmt: skip
    # Without the operator's price p5 is refused, naming the fix; a type without local storage keeps the key.
    with pytest.raises(ValueError, match=r"ml\.p5\.48xlarge has no list price .* set training\.usd_per_hour"):
        load_settings({**cdk_context, "training.instance_type": "ml.p5.48xlarge"})
    ebs_only = {"training.instance_type": "ml.p3.2xlarge", "hyperparameters.precision": "fp16",
                "training.allowed_instance_types": '["ml.p3.2xlarge"]'}  # fmt: skip
    train = find_step(build_definition(load_settings({**cdk_context, **ebs_only})), "FineTune")["Arguments"]
    assert train["ResourceConfig"]["VolumeKmsKeyId"] == "${KmsKeyArn}"


@pytest.mark.parametrize(
    ("group", "named"),
    [("hfqa-dev-qa-models", False), ("x" * 63, False), ("x" * 64, True), ("hfqa-dev-qa-models-", True),
     ("hfqa_dev", True)],
)  # fmt: skip
def test_a_model_package_group_name_outside_aws_pattern_is_named(definition, group, named):
    """ModelPackageGroupName: 1-63 characters of ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$ (API_CreateModelPackageGroup,
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModelPackageGroup.html): the name is built
    from name_prefix and the task's RESOURCE_NAME, each checked on its own only."""
    changed = copy.deepcopy(definition)
    find_step(changed, "RegisterModel-RegisterModel")["Arguments"]["ModelPackageGroupName"] = group
    problems = [line for line in violations(changed) if "ModelPackageGroupName" in line]
    assert bool(problems) is named, problems


@pytest.mark.parametrize("task", TASK_NAMES)
def test_every_tasks_group_name_fits_for_the_longest_prefix(cdk_context, task):
    settings = load_settings({**cdk_context, "task": task, "name_prefix": "p" * longest_name_prefix(task)})
    assert MODEL_PACKAGE_GROUP_NAME.fullmatch(settings.model_package_group_name)
