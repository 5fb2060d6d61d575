"""Every validation rule of the settings, through the same loader that app.py uses."""

from __future__ import annotations

import math

import pytest
from tasks import TASK_NAMES, task

from config import ConfigError, load_settings
from tests.conftest import longest_name_prefix


def load(cdk_context, **overrides):
    return load_settings({**cdk_context, **overrides})


def test_dev_defaults_match_the_reference_workload(cdk_context):
    settings = load(cdk_context)
    assert settings.env_name == "dev"
    # Issue 32: a single A10G that a new account's quota allows, within dev's 90-minute deadline (make estimate).
    assert settings.training.instance_type == "ml.g5.2xlarge"
    assert settings.training.instance_count == 1 and settings.training.deadline_minutes == 90
    assert load(cdk_context, env="prod").training.instance_type == "ml.p4d.24xlarge"
    assert settings.training.distribution == "torchrun"
    assert settings.training.use_spot is True
    assert settings.model.base_model == "bert-large-uncased-whole-word-masking"
    assert (settings.hyperparameters.max_seq_length, settings.hyperparameters.doc_stride) == (384, 128)
    assert settings.account is None and settings.region is None  # environment-agnostic
    assert settings.removal_policy == "destroy"


def test_prod_is_selected_with_env_and_retains_data(cdk_context):
    settings = load(cdk_context, env="prod")
    assert settings.env_name == "prod"
    assert settings.removal_policy == "retain"
    assert settings.name_prefix == "hfqa-prod"


def test_cli_overrides_are_typed(cdk_context):
    settings = load(
        cdk_context,
        **{
            "training.instance_type": "ml.p4d.24xlarge",
            "training.instance_count": "4",
            "training.use_spot": "false",
            "hyperparameters.learning_rate": "5e-5",
        },
    )
    assert settings.training.instance_count == 4
    assert settings.training.use_spot is False
    assert settings.hyperparameters.learning_rate == pytest.approx(5e-5)


def test_unknown_environment_names_the_known_ones(cdk_context):
    with pytest.raises(ConfigError, match=r"unknown environment 'staging'.*dev, prod"):
        load(cdk_context, env="staging")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"training.instance_typo": "ml.p4d.24xlarge"}, r"training\.instance_typo: unknown key"),
        ({"trainin.instance_count": "2"}, r"trainin: unknown key"),
        ({"instance_count": "4"}, r"did you mean training\.instance_count"),
        (
            {"training.distribution": "smddp", "training.instance_type": "ml.p5.48xlarge"},
            r"smddp does not run on ml\.p5\.48xlarge.*ml\.p3dn\.24xlarge, ml\.p4d\.24xlarge, ml\.p4de\.24xlarge",
        ),
        (
            {"training.instance_type": "ml.p3.16xlarge", "training.instance_count": "2"},
            r"needs an EFA-capable instance type",
        ),
        (
            {"training.max_run_seconds": "7200", "training.max_wait_seconds": "3600"},
            r"max_wait_seconds \(3600\) must be >= training\.max_run_seconds \(7200\)",
        ),
        ({"training.checkpoint_prefix": ""}, r"use_spot=true needs training\.checkpoint_prefix"),
        # Warm pools cannot be used with spot instances (train-warm-pools.html, Considerations): one line, both keys.
        (
            {"training.keep_alive_seconds": "600"},
            r"training\.keep_alive_seconds=600 needs training\.use_spot=false: SageMaker warm pools cannot be used "
            r"with spot instances; set training\.use_spot=false or training\.keep_alive_seconds=0",
        ),
        ({"training.keep_alive_seconds": "3601"}, r"keep_alive_seconds: Input should be less than or equal to 3600"),
        ({"training.keep_alive_seconds": "-1"}, r"keep_alive_seconds: Input should be greater than or equal to 0"),
        ({"training.instance_count": "0"}, r"training\.instance_count: Input should be greater than 0"),
        (
            {"hyperparameters.per_device_train_batch_size": "-1"},
            r"per_device_train_batch_size\S*: Input should be greater than 0",
        ),
        ({"hyperparameters.epochs": "0"}, r"hyperparameters\.epochs: Input should be greater than 0"),
        ({"training.volume_size_gb": "0"}, r"training\.volume_size_gb: Input should be greater than 0"),
        ({"hyperparameters.doc_stride": "300"}, r"doc_stride \(300\) must be below half of max_seq_length"),
        (
            {"training.instance_type": "ml.p3dn.24xlarge"},
            r"precision=bf16 is not supported by the GPUs of ml\.p3dn\.24xlarge",
        ),
        ({"training.instance_type": "p4d.24xlarge"}, r"training\.instance_type: String should match pattern"),
        ({"training.max_run_seconds": str(30 * 24 * 3600)}, r"max_run_seconds: Input should be less than"),
        ({"evaluation.f1_threshold": "101"}, r"evaluation\.f1_threshold: Input should be less than or equal to 100"),
        ({"network.mode": "existing"}, r"network\.mode=existing needs network\.existing_vpc_id"),
        ({"model.base_model_s3_uri": "https://example.com/x"}, r"base_model_s3_uri: String should match pattern"),
        ({"account": "12345"}, r"account: String should match pattern"),
        # Not in botocore's ProcessingInstanceType enum.
        (
            {"processing.preprocess_instance_type": "ml.p4d.24xlarge"},
            r"processing\.preprocess_instance_type: SageMaker does not offer ml\.p4d\.24xlarge for processing jobs",
        ),
        ({"training.instance_type": "ml.x9.48xlarge"}, r"ml\.x9\.48xlarge is not in config/instance_types\.py"),
        (
            {"processing.preprocess_instance_type": "ml.g5.xlarge", "processing.volume_size_gb": "300"},
            r"processing\.volume_size_gb=300 exceeds the 250 GB of local NVMe storage of ml\.g5\.xlarge",
        ),
        (
            {"training.allowed_instance_types": '["ml.p4d.24xlarge", "ml.p3dn.24xlarge"]'},
            r"precision=bf16 is not supported by the GPUs of ml\.p3dn\.24xlarge",
        ),
        (
            {"training.allowed_instance_types": '["ml.p3dn.24xlarge"]', "hyperparameters.precision": "fp16"},
            r"allowed_instance_types must include training\.instance_type \(ml\.g5\.2xlarge\)",
        ),
        (
            {"training.allowed_instance_types": '["ml.p4d.24xlarge", "ml.p4de.24xlarge"]'},
            r"ml\.p4de\.24xlarge has no list price in config/costs\.py",
        ),
        (
            {
                "training.distribution": "smddp",
                "training.allowed_instance_types": '["ml.p4d.24xlarge", "ml.p5.48xlarge"]',
            },
            r"smddp does not run on ml\.p5\.48xlarge",
        ),
        (
            {
                "training.allowed_instance_types": '["ml.p4d.24xlarge", "ml.p3.16xlarge"]',
                "training.instance_count": "2",
                "hyperparameters.precision": "fp16",
            },
            r"instance_count=2 on ml\.p3\.16xlarge: multi-node data parallel needs an EFA-capable",
        ),
        ({"training.availability_zone": "us-east-1a"}, r"availability_zone needs the zones to be known at synth"),
        (
            {"network.availability_zones": '["us-east-1a", "us-east-1b"]', "training.availability_zone": "us-east-1c"},
            r"us-east-1c is not one of the network's zones",
        ),
        (
            {"region": "eu-west-1", "network.availability_zones": '["us-east-1a"]'},
            r"must be in region eu-west-1",
        ),
    ],
)
def test_invalid_settings_fail_with_a_clear_message(cdk_context, overrides, message):
    with pytest.raises(ConfigError, match=message):
        load(cdk_context, **overrides)


def test_a_region_without_a_dlc_registry_stops_synth_with_one_line(cdk_context):
    """The jobs pull their images from the Deep Learning Containers registry of their region
    (https://aws.github.io/deep-learning-containers/reference/region_availability/): a region that table lacks has
    none to pull from."""
    with pytest.raises(ConfigError) as err:
        load(cdk_context, region="xx-nowhere-1")
    [problem] = str(err.value).splitlines()[1:]  # under the "invalid settings" heading
    assert problem.startswith("  - region: no AWS Deep Learning Containers registry serves xx-nowhere-1 (")


def test_valid_combinations_pass(cdk_context):
    smddp = load(cdk_context, **{"training.distribution": "smddp", "training.instance_type": "ml.p4d.24xlarge"})
    assert smddp.training_image_repository.startswith("huggingface-pytorch-training:2.5.1-transformers4.49.0")
    single_node = load(
        cdk_context,
        **{
            "training.instance_type": "ml.p3.2xlarge",
            "training.instance_count": "1",
            "hyperparameters.precision": "fp16",
        },
    )
    assert single_node.training.instance_count == 1
    on_demand = load(
        cdk_context,
        **{"training.use_spot": "false", "training.checkpoint_prefix": "", "training.max_wait_seconds": "60"},
    )
    assert on_demand.training.use_spot is False
    v100 = load(cdk_context, **{"training.instance_type": "ml.p3dn.24xlarge", "hyperparameters.precision": "fp16"})
    assert v100.hyperparameters.precision == "fp16"


def test_all_problems_are_reported_at_once(cdk_context):
    with pytest.raises(ConfigError) as excinfo:
        load(cdk_context, **{"training.instance_count": "0", "hyperparameters.epochs": "0"})
    assert "training.instance_count" in str(excinfo.value)
    assert "hyperparameters.epochs" in str(excinfo.value)


def test_existing_vpc_settings(cdk_context):
    settings = load(
        cdk_context,
        **{
            "network.mode": "existing",
            "network.existing_vpc_id": "vpc-0123456789abcdef0",
            "network.existing_subnet_ids": '["subnet-0123456789abcdef0"]',
            "network.existing_availability_zones": '["us-east-1a"]',
        },
    )
    assert settings.network.existing_subnet_ids == ("subnet-0123456789abcdef0",)


def test_default_training_types_are_the_candidates_that_pass_every_rule(cdk_context):
    # p3dn: V100, no bf16; p4de: no list price in config/costs.py, so the cost guard could not price it.
    bf16 = load(cdk_context)
    assert bf16.training_instance_types == ("ml.g5.2xlarge", "ml.p4d.24xlarge")
    fp16 = load(cdk_context, **{"hyperparameters.precision": "fp16"})
    assert fp16.training_instance_types == ("ml.g5.2xlarge", "ml.p4d.24xlarge", "ml.p3dn.24xlarge")
    single = load(
        cdk_context,
        **{
            "training.instance_type": "ml.p3.2xlarge",
            "training.instance_count": "1",
            "hyperparameters.precision": "fp16",
        },
    )
    assert single.training_instance_types[0] == "ml.p3.2xlarge"


def test_training_zone_picks_its_subnet(cdk_context):
    settings = load(
        cdk_context,
        **{"network.availability_zones": '["us-east-1a", "us-east-1d"]', "training.availability_zone": "us-east-1d"},
    )
    assert settings.network.subnet_count == 2
    assert settings.training_subnet_index == 1
    assert load(cdk_context).training_subnet_index == 0


def test_several_rule_problems_are_listed_together(cdk_context):
    with pytest.raises(ConfigError) as excinfo:
        load(
            cdk_context,
            **{
                "training.instance_type": "ml.p3.16xlarge",
                "training.instance_count": "2",
                "training.max_wait_seconds": "60",
            },
        )
    message = str(excinfo.value)
    assert "EFA-capable" in message and "precision=bf16" in message and "max_wait_seconds (60)" in message


@pytest.mark.parametrize(
    ("env_name", "statuses"),
    [("dev", ("PendingManualApproval", "Approved", "Rejected")), ("prod", ("PendingManualApproval", "Rejected"))],
)
def test_only_dev_opts_in_to_approved_registration(cdk_context, env_name, statuses):
    assert load(cdk_context, env=env_name).registry.approval_statuses == statuses


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"registry.allow_approved_registration": "true"}, r"allow_approved_registration=true is not allowed in prod"),
        (
            {"evaluation.min_f1_threshold": "0", "evaluation.f1_threshold": "0"},
            r"needs evaluation\.min_f1_threshold > 0",
        ),
        ({"evaluation.f1_threshold": "50"}, r"f1_threshold \(50\.0\) is below evaluation\.min_f1_threshold \(90\.0\)"),
        ({"production": "false"}, r"the environment named prod must set production=true"),
        ({"removal_policy": "destroy"}, r"production needs removal_policy=retain"),
    ],
)
def test_production_keeps_the_approval_gate(cdk_context, overrides, message):
    with pytest.raises(ConfigError, match=message):
        load(cdk_context, env="prod", **overrides)


def test_approved_default_needs_the_opt_in(cdk_context):
    with pytest.raises(ConfigError, match=r"approval_status=Approved skips the manual approval"):
        load(cdk_context, **{"registry.approval_status": "Approved", "registry.allow_approved_registration": "false"})


def test_a_volta_training_type_picks_an_image_with_volta_kernels(cdk_context):
    # fp16 adds ml.p3dn.24xlarge (V100, sm_70) to the allowed types; the CUDA 13.0 torchrun image has no sm_70.
    volta = load(cdk_context, **{"hyperparameters.precision": "fp16"})
    assert "ml.p3dn.24xlarge" in volta.training_instance_types
    assert volta.training_image.has_volta_kernels
    assert volta.training_image_repository.startswith("huggingface-pytorch-training:2.5.1-transformers4.49.0")
    assert volta.training_framework_versions == ("4.49.0", "2.5.1", "py311")
    assert volta.inference_image_repository.startswith("huggingface-pytorch-inference:2.6.0-transformers4.49.0")
    ampere_only = load(
        cdk_context,
        **{
            "hyperparameters.precision": "fp16",
            "training.allowed_instance_types": '["ml.g5.2xlarge", "ml.p4d.24xlarge"]',
        },
    )
    assert "cu130" in ampere_only.training_image_repository
    assert not ampere_only.training_image.has_volta_kernels


def test_jobs_in_a_created_vpc_are_never_blind(cdk_context):
    assert "logs" in load(cdk_context).network.interface_endpoints
    with pytest.raises(ConfigError, match=r"interface_endpoints must include 'logs' with network\.mode=create"):
        load(cdk_context, **{"network.interface_endpoints": '["monitoring"]'})
    assert load(cdk_context, **{"network.mode": "none", "network.interface_endpoints": "[]"}).network.mode == "none"


def test_tracking_names_one_destination_for_aws_executions():
    from config.settings import TrackingSettings

    with pytest.raises(ValueError, match="set only one"):
        TrackingSettings(managed_server=True, mlflow_tracking_uri="http://mlflow:5000")
    with pytest.raises(ValueError, match="mlflow_version"):
        TrackingSettings(mlflow_version="latest")


def test_the_default_cost_ceiling_is_a_stated_multiple_of_the_configured_choices_estimate(cdk_context):
    """MaxTrainingCostUSD's default and its upper bound follow the configured choice (issue 30: it was $1000 for a
    run estimated at a few dollars), each rounded up to the dollar."""
    settings = load(cdk_context)
    estimate = settings.reference_training_usd
    assert 1 < estimate < 10  # 1 x g5.2xlarge, 2 epochs of SQuAD v1.1 (make estimate)
    assert settings.default_max_cost_usd == math.ceil(settings.limits.default_cost_multiple * estimate)
    assert settings.max_training_cost_usd == math.ceil(settings.limits.max_cost_multiple * estimate)
    p4d = load(cdk_context, **{"training.instance_type": "ml.p4d.24xlarge"})
    doubled = load(cdk_context, **{"training.instance_type": "ml.p4d.24xlarge", "training.instance_count": "2"})
    assert doubled.default_max_cost_usd > p4d.default_max_cost_usd  # the ceiling follows the choice
    explicit = load(cdk_context, **{"training.max_cost_usd": "20", "limits.max_training_cost_usd": "50"})
    assert (explicit.default_max_cost_usd, explicit.max_training_cost_usd) == (20, 50)
    # A model whose shape is not known offline has no estimate: both ceilings in USD, then it loads.
    usd = {"training.max_cost_usd": "20", "limits.max_training_cost_usd": "50"}
    assert load(cdk_context, **{"model.base_model": "my-encoder", **usd}).default_max_cost_usd == 20


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"hyperparameters.epochs": "11"}, r"hyperparameters\.epochs \(11\) is above limits\.max_epochs \(10\)"),
        ({"hyperparameters.learning_rate": "0.01"}, r"learning_rate \(0\.01\) is above limits\.max_learning_rate"),
        (
            {"training.instance_count": "4", "training.max_instance_count": "2"},
            r"training\.instance_count \(4\) is above training\.max_instance_count \(2\)",
        ),
        ({"training.max_cost_usd": "1000"}, r"default MaxTrainingCostUSD \(1000.*is above its upper bound \(\d+,"),
        ({"limits.max_executions_per_day": "0"}, r"limits\.max_executions_per_day"),
        ({"model.base_model": "my-encoder"}, r"set training\.max_cost_usd and limits\.max_training_cost_usd"),
    ],
)
def test_defaults_past_their_limits_fail_at_synth(cdk_context, overrides, message):
    with pytest.raises(ConfigError, match=message):
        load(cdk_context, **overrides)


@pytest.mark.parametrize("name", TASK_NAMES)
def test_each_task_has_its_model_package_group(cdk_context, name):
    """<prefix>-<RESOURCE_NAME>-models: question answering's stays the group that existed before tasks."""
    settings = load_settings({**cdk_context, "task": name})
    assert settings.model_package_group_name == f"hfqa-dev-{task(name).RESOURCE_NAME}-models"
    assert (settings.model_package_group_name == "hfqa-dev-qa-models") is (name == "question-answering")


@pytest.mark.parametrize("name", TASK_NAMES)
def test_each_tasks_pipeline_name_is_one_sagemaker_accepts_at_the_longest_prefix(cdk_context, name):
    """<prefix>-<RESOURCE_NAME>-fine-tuning (question answering's unchanged), within API_CreatePipeline's PipelineName
    (botocore's model: 1-256 characters of the pattern below;
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreatePipeline.html) for the longest and the
    oddest name_prefix its own pattern allows."""
    import re

    import botocore.session

    shape = botocore.session.get_session().get_service_model("sagemaker").shape_for("PipelineName").metadata
    longest = longest_name_prefix(name)
    for prefix in ("a" * longest, "a-" * (longest // 2), "hfqa-dev"):
        pipeline = load_settings({**cdk_context, "task": name, "name_prefix": prefix}).pipeline_name
        assert re.fullmatch(shape["pattern"], pipeline) and len(pipeline) <= shape["max"], pipeline
        assert pipeline == f"{prefix}-{task(name).RESOURCE_NAME}-fine-tuning"
    assert (load_settings({**cdk_context, "task": name}).pipeline_name == "hfqa-dev-qa-fine-tuning") is (
        name == "question-answering"
    )


@pytest.mark.parametrize("name", TASK_NAMES)
def test_a_name_prefix_too_long_for_the_tasks_role_names_is_refused_at_synth(cdk_context, name):
    """IAM role names are at most 64 characters (reference_iam-quotas.html): question answering's pipeline takes any
    prefix its pattern allows, the other tasks' (whose names carry their RESOURCE_INFIX) one of at most 15-16."""
    longest = longest_name_prefix(name)
    role = load_settings({**cdk_context, "task": name, "name_prefix": "a" * longest}).record_model_role_name(
        "ap-southeast-5"
    )
    assert len(role) == 64 or (longest == 20 and len(role) < 64), role
    if longest < 20:
        with pytest.raises(ConfigError, match=r"too long for the .* pipeline: its RecordModel role .* has 65 "):
            load_settings({**cdk_context, "task": name, "name_prefix": "a" * (longest + 1)})
