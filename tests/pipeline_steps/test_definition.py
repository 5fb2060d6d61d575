"""The pipeline definition: offline, deterministic, and wired as the mission asks."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
from dataclasses import asdict
from typing import Any

import pytest
from qa.cost import ModelShape
from qa.outputs import (
    EVALUATION_FILE,
    EVALUATION_PREFIX,
    TENSORBOARD_DIR,
    TRAINING_LINE,
    evaluation_line,
    metric_name,
)
from qa.parameter_rules import CONTROL_PARAMETERS
from syrupy.extensions.json import JSONSnapshotExtension

from config import load_settings
from config.costs import KNOWN_SHAPES
from config.instance_types import INSTANCE_TYPES
from pipeline_steps.definition import INLINE_LIMIT_BYTES, build_definition, definition_json
from pipeline_steps.names import MODEL_METADATA_DATASET_MANIFEST, evaluation_key
from pipeline_steps.placeholders import ACCOUNT, PSEUDO_PARAMETERS, REGION, placeholders
from pipeline_steps.walk import all_steps
from tests.conftest import ROOT, run_without_network, unshare_works
from tests.pipeline_steps.conftest import step
from tests.pipeline_steps.test_api_shapes import resolved


def artifacts_bucket(settings) -> str:
    """The artifacts bucket's name as the definition holds it (account and region are placeholders)."""
    return settings.bucket_name("artifacts", ACCOUNT, REGION)


TRAIN_LINE = TRAINING_LINE.format(step=120, epoch=0.5, loss=1.2345, learning_rate=2.5e-5, samples_per_second=321.0)


def test_two_builds_are_byte_identical(settings):
    assert definition_json(settings) == definition_json(settings)


@pytest.mark.skipif(not unshare_works(), reason="unshare -n needs root or user namespaces (CI runs as root)")
def test_build_needs_no_network_no_credentials_and_no_environment(settings):
    script = (
        "import hashlib; from config import load_settings, read_cdk_json_context;"
        "from pipeline_steps.definition import definition_json;"
        "print(hashlib.sha256(definition_json(load_settings(read_cdk_json_context())).encode()).hexdigest())"
    )
    env = {"PATH": os.path.dirname(sys.executable), "HOME": "/nonexistent"}
    result = run_without_network([sys.executable, "-c", script], env)
    assert result.returncode == 0, result.stderr[-3000:]
    # The last line: importing the SDK outside an entry point logs its config lookups to stdout first.
    assert result.stdout.strip().splitlines()[-1] == hashlib.sha256(definition_json(settings).encode()).hexdigest()


def differences(base: Any, other: Any, path: str = "$") -> dict[str, list[Any]]:
    """JSON path -> [base value, other value] for every leaf where two definitions differ; lists of named
    items (steps, parameters) are matched by name."""
    if isinstance(base, dict) and isinstance(other, dict):
        found: dict[str, list[Any]] = {}
        for key in sorted(base.keys() | other.keys()):
            found.update(differences(base.get(key), other.get(key), f"{path}.{key}"))
        return found
    if isinstance(base, list) and isinstance(other, list):
        if all(isinstance(item, dict) and "Name" in item for item in base + other):
            return differences({i["Name"]: i for i in base}, {i["Name"]: i for i in other}, path)
        if len(base) == len(other):
            found = {}
            for index, (left, right) in enumerate(zip(base, other, strict=True)):
                found.update(differences(left, right, f"{path}[{index}]"))
            return found
    return {} if base == other else {path: [base, other]}


def test_differences_match_named_items_and_report_leaves():
    base = {"Steps": [{"Name": "A", "X": 1}, {"Name": "B", "X": [1, 2]}], "V": "same"}
    other = {"Steps": [{"Name": "B", "X": [1, 3]}, {"Name": "A", "X": 1}, {"Name": "C"}], "V": "same"}
    assert differences(base, other) == {"$.Steps.B.X[1]": [2, 3], "$.Steps.C": [None, {"Name": "C"}]}


def test_snapshot(definition, prod_definition, snapshot):
    """One file pins both environments: dev in full, prod as its differences from dev (the template snapshots
    mask the embedded definition)."""
    pinned = {"dev": definition, "prod, where it differs from dev": differences(definition, prod_definition)}
    assert pinned == snapshot.use_extension(JSONSnapshotExtension)


def test_fits_inline(settings):
    assert len(definition_json(settings).encode()) < INLINE_LIMIT_BYTES


def test_step_order_and_parameters(cpu_job_definition, cpu_job_settings):
    definition, settings = cpu_job_definition, cpu_job_settings
    assert [s["Name"] for s in definition["Steps"]] == ["ClaimManifest", "ParametersValid"]
    checked = step(definition, "ParametersValid")["Arguments"]
    assert [s["Name"] for s in checked["IfSteps"]] == ["FirstDelivery"]
    [invalid] = checked["ElseSteps"]
    assert invalid["Type"] == "Fail"
    assert invalid["Arguments"]["ErrorMessage"] == {"Get": "Steps.ClaimManifest.OutputParameters['ParameterError']"}
    gated = step(definition, "FirstDelivery")["Arguments"]
    assert [s["Name"] for s in gated["IfSteps"]] == ["ValidateAndTokenize", "EstimateTrainingCost", "CheckTrainingCost"]
    assert gated["ElseSteps"] == []  # a duplicate delivery ends quietly: no Fail step, no failure alarm
    guarded = step(definition, "CheckTrainingCost")["Arguments"]["IfSteps"]
    assert [s["Name"] for s in guarded] == ["FineTune", "RecordModel", "CheckF1"]
    params = {p["Name"]: p for p in definition["Parameters"]}
    assert {
        "DatasetBucket",
        "ManifestKey",
        "BaseModelUri",
        "TrainingInstanceType",
        "TrainingInstanceCount",
        "Epochs",
        "LearningRate",
        "F1Threshold",
        "ModelApprovalStatus",
        "MaxTrainingCostUSD",
    } <= set(params)
    # A multiple of the configured choice's estimate on SQuAD v1.1 (limits.default_cost_multiple), not $1000.
    assert params["MaxTrainingCostUSD"]["DefaultValue"] == settings.default_max_cost_usd
    assert settings.default_max_cost_usd == math.ceil(3 * settings.reference_training_usd) < 1000
    assert params["TrainingInstanceType"]["DefaultValue"] == settings.training.instance_type
    assert params["TrainingInstanceCount"]["DefaultValue"] == settings.training.instance_count
    assert params["F1Threshold"]["DefaultValue"] == settings.evaluation.f1_threshold
    # The per-run controls: the deploy-time settings are their defaults; evaluation during training is off.
    hps = settings.hyperparameters
    assert {name: params[name]["DefaultValue"] for name in CONTROL_PARAMETERS} == {
        "PerDeviceTrainBatchSize": str(hps.per_device_train_batch_size),
        "MaxSeqLength": hps.max_seq_length,
        "DocStride": hps.doc_stride,
        "WarmupRatio": str(hps.warmup_ratio),
        "EvaluationStrategy": "no",
        "EvaluationSteps": 500,
        "EarlyStoppingPatience": 0,
    }
    assert params["EvaluationStrategy"]["EnumValues"] == ["no", "steps", "epoch"]
    assert params["ModelApprovalStatus"]["DefaultValue"] == "PendingManualApproval"
    assert params["BaseModelUri"]["DefaultValue"] == settings.base_model_uri(artifacts_bucket(settings))


def gpu_memory(instance_type: str) -> int:
    gpu = INSTANCE_TYPES[instance_type].gpu
    assert gpu is not None
    return gpu.memory_gb


def test_no_job_step_runs_before_the_claim_and_no_instance_runs_the_claim(definition, settings):
    claim = step(definition, "ClaimManifest")
    assert claim["Type"] == "Lambda" and claim["FunctionArn"] == "${ClaimFunctionArn}"
    inputs = claim["Arguments"]
    for name in (
        "Epochs",
        "LearningRate",
        "TrainingInstanceCount",
        "F1Threshold",
        "MaxTrainingCostUSD",
        "TrainingInstanceType",
        *CONTROL_PARAMETERS,
    ):
        assert inputs[name] == {"Get": f"Parameters.{name}"}  # checked before anything is billed
    assert inputs["ExecutionArn"] == {"Get": "Execution.PipelineExecutionArn"}
    assert json.loads(inputs["Bounds"]) == {
        "MaxInstanceCount": 8,
        "MinF1Threshold": 0.0,
        "MaxEpochs": 10.0,
        "MaxLearningRate": 1e-3,
        "MaxTrainingCostUSD": settings.max_training_cost_usd,
        "MaxExecutionsPerDay": 10,
        "MaxConcurrentExecutions": 2,
        # PerDeviceTrainBatchSize's memory model: each allowed type's GPU memory, the default model's shape.
        "GpuMemoryGiB": {name: gpu_memory(name) for name in settings.training_instance_types},
        "ModelShape": asdict(ModelShape.from_config(KNOWN_SHAPES[settings.model.base_model])),
        "ShapeModelUri": settings.base_model_uri(artifacts_bucket(settings)),
        "ActivationBytes": 2,
    }
    gated = step(definition, "FirstDelivery")["Arguments"]["Conditions"]
    assert {(c["LeftValue"]["Get"], c["RightValue"]) for c in gated} == {
        ("Steps.ClaimManifest.OutputParameters['Duplicate']", "false"),
        ("Steps.ClaimManifest.OutputParameters['Ignored']", ""),
    }


def test_in_fine_tune_mode_the_claim_validates_and_dataset_valid_fails_before_any_job(
    definition, settings, cpu_job_definition
):
    """processing.tokenize_in "fine_tune" (the default): the claim gets the windowing and SkipInvalidRecords, returns
    DatasetError and StatsUri; FirstDelivery -> DatasetValid, whose else branch fails with DatasetError; the estimate
    reads the claim's stats. cpu_job declares none of it."""
    fine_tune = definition
    claim = step(fine_tune, "ClaimManifest")
    assert {
        k: claim["Arguments"][k] for k in ("ValidateRecords", "MaxSeqLength", "DocStride", "MaxWindowsPerExample")
    } == {
        "ValidateRecords": "true",
        "MaxSeqLength": {"Get": "Parameters.MaxSeqLength"},
        "DocStride": {"Get": "Parameters.DocStride"},
        "MaxWindowsPerExample": settings.processing.max_windows_per_example,
    }
    assert claim["Arguments"]["SkipInvalidRecords"] == {"Get": "Parameters.SkipInvalidRecords"}
    declared = [o["OutputName"] for o in claim["OutputParameters"]]
    assert declared[-2:] == ["DatasetError", "StatsUri"]
    [valid] = step(fine_tune, "FirstDelivery")["Arguments"]["IfSteps"]
    assert valid["Name"] == "DatasetValid"
    error = {"Get": "Steps.ClaimManifest.OutputParameters['DatasetError']"}
    assert valid["Arguments"]["Conditions"] == [{"Type": "Equals", "LeftValue": error, "RightValue": ""}]
    [rejected] = valid["Arguments"]["ElseSteps"]
    assert (rejected["Name"], rejected["Type"], rejected["Arguments"]["ErrorMessage"]) == (
        "DatasetRejected",
        "Fail",
        error,
    )
    assert "EstimateTrainingCost" in [s["Name"] for s in valid["Arguments"]["IfSteps"]]
    assert step(fine_tune, "EstimateTrainingCost")["Arguments"]["StatsUri"] == {
        "Get": "Steps.ClaimManifest.OutputParameters['StatsUri']"
    }
    default_claim = step(cpu_job_definition, "ClaimManifest")
    assert "ValidateRecords" not in default_claim["Arguments"]
    assert "DatasetError" not in [o["OutputName"] for o in default_claim["OutputParameters"]]


def test_prod_bounds_the_f1_threshold_from_below(prod_definition, cdk_context):
    prod = load_settings({**cdk_context, "env": "prod"})
    bounds = json.loads(step(prod_definition, "ClaimManifest")["Arguments"]["Bounds"])
    assert bounds["MinF1Threshold"] == prod.evaluation.min_f1_threshold


def test_cost_guard_compares_the_lambda_estimate_with_the_parameter_before_training(
    cpu_job_definition, cpu_job_settings
):
    definition, settings = cpu_job_definition, cpu_job_settings
    estimate = step(definition, "EstimateTrainingCost")
    assert estimate["Type"] == "Lambda" and estimate["FunctionArn"] == "${EstimateFunctionArn}"
    inputs = estimate["Arguments"]
    assert inputs["StatsUri"]["Std:Join"]["Values"] == [
        {"Get": "Steps.ValidateAndTokenize.ProcessingOutputConfig.Outputs['stats'].S3Output.S3Uri"},
        "stats.json",
    ]
    for name in ("TrainingInstanceType", "TrainingInstanceCount", "Epochs"):
        assert inputs[name] == {"Get": f"Parameters.{name}"}
    cost_model = json.loads(inputs["CostModel"])
    assert sorted(cost_model["hardware"]) == sorted(settings.training_instance_types)
    assert all(facts["peak_tflops"] > 0 for facts in cost_model["hardware"].values())
    assert estimate["OutputParameters"] == [{"OutputName": "EstimatedCostUSD", "OutputType": "Float"}]
    [condition] = step(definition, "CheckTrainingCost")["Arguments"]["Conditions"]
    assert condition["Type"] == "LessThanOrEqualTo"
    assert condition["LeftValue"] == {"Get": "Steps.EstimateTrainingCost.OutputParameters['EstimatedCostUSD']"}
    assert condition["RightValue"] == {"Get": "Parameters.MaxTrainingCostUSD"}
    [fail] = step(definition, "CheckTrainingCost")["Arguments"]["ElseSteps"]
    assert fail["Type"] == "Fail" and fail["Name"] == "TrainingCostAboveLimit"


def test_fine_tune_mode_tokenizes_in_fine_tune_from_the_pinned_inputs_with_no_processing_job(env_definition):
    """processing.tokenize_in = "fine_tune": one instance cold start. No ValidateAndTokenize; FineTune reads the
    claim's pinned folder (and the staged benchmark folder, which it verifies against the pin), not features."""
    definition = env_definition
    assert "Processing" not in {s["Type"] for s in all_steps(definition["Steps"])}
    assert [s["Name"] for s in step(definition, "FirstDelivery")["Arguments"]["IfSteps"]] == ["DatasetValid"]
    gated = step(definition, "DatasetValid")["Arguments"]
    assert [s["Name"] for s in gated["IfSteps"]] == ["EstimateTrainingCost", "CheckTrainingCost"]
    # The claim's approximate statistics price the run (ClaimManifest's StatsUri output).
    assert step(definition, "EstimateTrainingCost")["Arguments"]["StatsUri"] == {
        "Get": "Steps.ClaimManifest.OutputParameters['StatsUri']"
    }
    assert "StatsUri" in {o["OutputName"] for o in step(definition, "ClaimManifest")["OutputParameters"]}
    training = step(definition, "FineTune")["Arguments"]
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in training["InputDataConfig"]}
    assert channels["data"] == {"Get": "Steps.ClaimManifest.OutputParameters['InputUri']"}
    assert channels["model"] == {"Get": "Parameters.BaseModelUri"}
    assert not {"train", "validation", "benchmark"} & set(channels)
    hyperparameters = training["HyperParameters"]
    assert hyperparameters["tokenize_data"] == '"true"'
    assert hyperparameters["skip_invalid"] == {"Get": "Parameters.SkipInvalidRecords"}
    benchmark = find_pinned_benchmark(definition)
    if benchmark is None:
        assert "benchmark_data" not in channels and "benchmark_sha256" not in hyperparameters
    else:
        folder, sha256 = benchmark
        assert channels["benchmark_data"].endswith(f"/{folder}")
        assert json.loads(hyperparameters["benchmark_sha256"]) == sha256


def test_the_per_run_controls_reach_fine_tune_and_the_deadline_leaves_time_to_save(definition, settings):
    """Each control parameter is one of FineTune's hyperparameters (numbers joined to text, as the SDK passes them);
    --stop_after_seconds is MaxRuntimeInSeconds less the reserve to evaluate, save and upload."""
    training = step(definition, "FineTune")["Arguments"]
    hyperparameters = training["HyperParameters"]
    for flag, parameter in {
        "per_device_train_batch_size": "PerDeviceTrainBatchSize",
        "max_seq_length": "MaxSeqLength",
        "doc_stride": "DocStride",
        "warmup_ratio": "WarmupRatio",
        "evaluation_strategy": "EvaluationStrategy",
        "evaluation_steps": "EvaluationSteps",
        "early_stopping_patience": "EarlyStoppingPatience",
    }.items():
        value = hyperparameters[flag]
        assert {"Get": f"Parameters.{parameter}"} in (value, *value.get("Std:Join", {}).get("Values", [])), flag
    max_run = training["StoppingCondition"]["MaxRuntimeInSeconds"]
    assert max_run == settings.training.max_run_seconds
    assert max_run - 3600 <= int(hyperparameters["stop_after_seconds"]) <= max_run - 600


def find_pinned_benchmark(definition) -> tuple[str, str] | None:
    """The benchmark's folder and manifest SHA-256 that RegisterModel records, or None (no benchmark)."""
    metadata = step(definition, "RegisterModel-RegisterModel")["Arguments"].get("CustomerMetadataProperties", {})
    if "benchmark_name" not in metadata:
        return None
    folder = f"benchmarks/{metadata['benchmark_name']}/{metadata['benchmark_version']}/"
    return folder, metadata["benchmark_manifest_sha256"]


def test_preprocessing_runs_isolated_on_a_cpu_image_with_the_pinned_inputs_and_is_cached(
    cpu_job_definition, cpu_job_settings
):
    definition, settings = cpu_job_definition, cpu_job_settings
    pre = step(definition, "ValidateAndTokenize")
    assert pre["CacheConfig"] == {"Enabled": True, "ExpireAfter": "P30D"}
    args = pre["Arguments"]
    assert args["ProcessingResources"]["ClusterConfig"]["InstanceType"] == settings.processing.preprocess_instance_type
    image = args["AppSpecification"]["ImageUri"]
    assert image.endswith(settings.processing_image_repository) and "-cpu-" in image and "-gpu-" not in image
    assert args["NetworkConfig"]["EnableNetworkIsolation"] is True
    inputs = {i["InputName"]: i["S3Input"] for i in args["ProcessingInputs"]}
    assert inputs["data"]["S3DataType"] == "S3Prefix"
    assert inputs["data"]["S3Uri"] == {"Get": "Steps.ClaimManifest.OutputParameters['InputUri']"}
    assert inputs["tokenizer"]["S3Uri"] == {"Get": "Parameters.BaseModelUri"}
    container_args = args["AppSpecification"]["ContainerArguments"]
    assert container_args[0] == "preprocess.py"
    assert container_args[container_args.index("--manifest") + 1] == "/opt/ml/processing/input/data/manifest.json"
    assert "AWS_DEFAULT_REGION" not in args.get("Environment", {})  # the job calls no AWS API itself


CACHE_KEY_FIELDS = ("AppSpecification", "Environment", "ProcessingInputs")  # pipelines-default-keys.html


def test_changing_epochs_or_the_instance_choice_leaves_the_cached_step_identical(cpu_job_definition):
    """The cache key of a processing step is its AppSpecification, Environment and ProcessingInputs
    (https://docs.aws.amazon.com/sagemaker/latest/dg/pipelines-default-keys.html), resolved per execution: two
    executions that differ in Epochs, TrainingInstanceType, TrainingInstanceCount and MaxTrainingCostUSD resolve
    them to the same values, while FineTune's arguments do differ."""
    from local_runner.expressions import ExpressionResolver

    definition = cpu_job_definition
    declared = {p["Name"]: p for p in definition["Parameters"]}
    defaults = {name: p["DefaultValue"] for name, p in declared.items()}
    other_type = "ml.p4de.24xlarge" if defaults["TrainingInstanceType"] != "ml.p4de.24xlarge" else "ml.p4d.24xlarge"
    changed = {
        **defaults,
        "Epochs": defaults["Epochs"] + 1,
        "TrainingInstanceType": other_type,
        "TrainingInstanceCount": defaults["TrainingInstanceCount"] + 1,
        "MaxTrainingCostUSD": defaults["MaxTrainingCostUSD"] * 2,
    }
    claimed = {"ClaimManifest": {"OutputParameters": {"InputUri": "s3://artifacts/inputs/abc/"}}}

    def resolved(parameters, step_name, fields):
        resolver = ExpressionResolver(parameters, {"PipelineExecutionId": "exec"}, claimed)
        arguments = step(definition, step_name)["Arguments"]
        return {field: resolver.resolve(arguments.get(field)) for field in fields}

    assert resolved(defaults, "ValidateAndTokenize", CACHE_KEY_FIELDS) == resolved(
        changed, "ValidateAndTokenize", CACHE_KEY_FIELDS
    )
    assert resolved(defaults, "FineTune", ["HyperParameters"]) != resolved(changed, "FineTune", ["HyperParameters"])


def test_every_job_step_retries_capacity_throttling_and_service_faults_with_backoff(cpu_job_definition):
    definition = cpu_job_definition
    for name in ("ValidateAndTokenize", "FineTune"):
        policies = step(definition, name)["RetryPolicies"]
        types = {kind for policy in policies for kind in policy["ExceptionType"]}
        assert {"SageMaker.CAPACITY_ERROR", "Step.THROTTLING", "Step.SERVICE_FAULT"} <= types, name
        assert all(p["BackoffRate"] > 1 and p["IntervalSeconds"] > 0 for p in policies), name
    [register] = step(definition, "CheckF1")["Arguments"]["IfSteps"]
    [policy] = register["RetryPolicies"]
    assert set(policy["ExceptionType"]) == {"Step.THROTTLING", "Step.SERVICE_FAULT"} and policy["BackoffRate"] > 1


def test_training_job_is_distributed_spot_and_checkpointed(cpu_job_definition, cpu_job_settings):
    definition, settings = cpu_job_definition, cpu_job_settings
    args = step(definition, "FineTune")["Arguments"]
    assert args["ResourceConfig"]["InstanceType"] == {"Get": "Parameters.TrainingInstanceType"}
    assert args["ResourceConfig"]["InstanceCount"] == {"Get": "Parameters.TrainingInstanceCount"}
    assert args["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert args["EnableManagedSpotTraining"] is True
    stopping = args["StoppingCondition"]
    assert stopping["MaxRuntimeInSeconds"] == settings.training.max_run_seconds
    assert stopping["MaxWaitTimeInSeconds"] == settings.training.max_wait_seconds
    checkpoint = args["CheckpointConfig"]
    assert checkpoint["LocalPath"] == "/opt/ml/checkpoints"
    values = checkpoint["S3Uri"]["Std:Join"]["Values"]
    assert values == [
        f"s3://{artifacts_bucket(settings)}/{settings.layout.checkpoints}",
        {"Get": "Execution.PipelineExecutionId"},
    ]
    # One subnet (one zone) for all nodes: EFA stays within a subnet, cross-zone traffic is billed.
    assert args["VpcConfig"] == {"SecurityGroupIds": ["${SecurityGroupId}"], "Subnets": ["${Subnet0}"]}
    assert args["EnableInterContainerTrafficEncryption"] is True
    assert args["OutputDataConfig"]["KmsKeyId"] == "${KmsKeyArn}"  # volume: local NVMe, see test_aws_rules.py
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in args["InputDataConfig"]}
    assert channels["model"] == {"Get": "Parameters.BaseModelUri"}
    assert channels["train"] == {
        "Get": "Steps.ValidateAndTokenize.ProcessingOutputConfig.Outputs['train'].S3Output.S3Uri"
    }
    assert channels["validation"] == {
        "Get": "Steps.ValidateAndTokenize.ProcessingOutputConfig.Outputs['validation'].S3Output.S3Uri"
    }
    # Isolated: the source bundle arrives as the `code` channel and the toolkit is pointed at its file.
    assert args["EnableNetworkIsolation"] is True
    assert channels["code"] == "s3://${CodeBucket}/${CodeKey}"
    assert args["HyperParameters"]["sagemaker_submit_directory"] == '"/opt/ml/input/data/code/${CodeKey}"'
    assert args["TensorBoardOutputConfig"] == {
        "LocalPath": TENSORBOARD_DIR,
        "S3OutputPath": {
            "Std:Join": {
                "On": "/",
                "Values": [
                    f"s3://{artifacts_bucket(settings)}/{settings.layout.tensorboard}",
                    {"Get": "Execution.PipelineExecutionId"},
                ],
            }
        },
    }
    assert "huggingface-pytorch-training:2.9.0-transformers5.3.0" in args["AlgorithmSpecification"]["TrainingImage"]
    assert args["HyperParameters"]["sagemaker_region"] == '"${AWS::Region}"'


def test_checkpoint_uri_lies_under_the_data_stacks_checkpoint_prefix(definition, dev):
    from aws_cdk import Stack

    values = step(definition, "FineTune")["Arguments"]["CheckpointConfig"]["S3Uri"]["Std:Join"]["Values"]
    exposed = Stack.of(dev.stacks.data).resolve(dev.stacks.data.checkpoint_s3_uri_prefix)
    rendered = "".join(p if isinstance(p, str) else "${" + p["Ref"] + "}" for p in exposed["Fn::Join"][1])
    assert rendered == values[0] + "/"


def test_metric_definitions_parse_the_training_log_line(definition):
    metrics = step(definition, "FineTune")["Arguments"]["AlgorithmSpecification"]["MetricDefinitions"]
    parsed = {m["Name"]: match.group(1) for m in metrics if (match := re.search(m["Regex"], TRAIN_LINE))}
    assert parsed == {
        "train:loss": "1.2345",
        "train:learning_rate": "2.500e-05",
        "train:samples_per_second": "321.00",
        "train:epoch": "0.500",
        "train:step": "120",
    }
    line = evaluation_line(EVALUATION_PREFIX, {"exact_match": 81.25, "f1": 88.5})
    evaluation = {m["Name"]: match.group(1) for m in metrics if (match := re.search(m["Regex"], line))}
    assert {k: float(v) for k, v in evaluation.items()} == {
        metric_name(EVALUATION_PREFIX, "exact_match"): 81.25,
        metric_name(EVALUATION_PREFIX, "f1"): 88.5,
    }


def test_smddp_backend_sets_its_flag_and_image(cdk_context):
    settings = load_settings(
        {**cdk_context, "training.distribution": "smddp", "training.instance_type": "ml.p4d.24xlarge"}
    )
    args = step(build_definition(settings), "FineTune")["Arguments"]
    assert args["HyperParameters"]["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert "sagemaker_torch_distributed_enabled" not in args["HyperParameters"]
    assert "2.5.1-transformers4.49.0-gpu-py311" in args["AlgorithmSpecification"]["TrainingImage"]


def transformers_version(image_uri: str) -> tuple[int, ...]:
    """(5, 3, 0) from '...huggingface-pytorch-training:2.9.0-transformers5.3.0-gpu-...'."""
    match = re.search(r"-transformers(\d+(?:\.\d+)*)-", image_uri)
    assert match, image_uri
    return tuple(int(part) for part in match.group(1).split("."))


@pytest.mark.parametrize("distribution", ["torchrun", "smddp"])
def test_registered_image_reads_what_the_training_image_saves(cdk_context, distribution):
    # SMDDP runs on p4d, not on dev's g5.2xlarge (config/instance_types.py): both backends on p4d.
    settings = load_settings(
        {**cdk_context, "training.distribution": distribution, "training.instance_type": "ml.p4d.24xlarge"}
    )
    definition = build_definition(settings)
    training_image = step(definition, "FineTune")["Arguments"]["AlgorithmSpecification"]["TrainingImage"]
    [register] = step(definition, "CheckF1")["Arguments"]["IfSteps"]
    [container] = register["Arguments"]["InferenceSpecification"]["Containers"]
    assert "/huggingface-pytorch-inference:" in container["Image"]
    assert transformers_version(container["Image"]) >= transformers_version(training_image)
    # transformers >= 5.3 has no question-answering pipeline for HF_TASK: the toolkit runs our module instead.
    assert "HF_TASK" not in container["Environment"]
    program = container["Environment"]["SAGEMAKER_PROGRAM"]
    assert (ROOT / "training_code" / program).is_file()


def test_no_vpc_and_no_spot_variants(cdk_context):
    settings = load_settings(
        {**cdk_context, "network.mode": "none", "training.use_spot": "false", "training.checkpoint_prefix": ""}
    )
    args = step(build_definition(settings), "FineTune")["Arguments"]
    assert "VpcConfig" not in args
    assert "EnableManagedSpotTraining" not in args or args["EnableManagedSpotTraining"] is False
    assert "CheckpointConfig" not in args


@pytest.mark.parametrize("keep_alive", [0, 900])
def test_warm_pool_keep_alive_reaches_the_resource_config_only_when_set(cdk_context, definition, keep_alive):
    """training.keep_alive_seconds -> ResourceConfig.KeepAlivePeriodInSeconds (on demand: warm pools cannot be used
    with spot); 0 leaves the key out, so the default definition is the one it was before the setting existed."""
    context = {**cdk_context, "training.use_spot": "false", "training.keep_alive_seconds": str(keep_alive)}
    args = step(build_definition(load_settings(context)), "FineTune")["Arguments"]
    if keep_alive:
        assert args["ResourceConfig"]["KeepAlivePeriodInSeconds"] == keep_alive
        assert "EnableManagedSpotTraining" not in args or args["EnableManagedSpotTraining"] is False
    else:
        assert "KeepAlivePeriodInSeconds" not in args["ResourceConfig"]
    assert "KeepAlivePeriodInSeconds" not in step(definition, "FineTune")["Arguments"]["ResourceConfig"]


def test_condition_registers_or_fails_with_the_numbers(definition, settings):
    check = step(definition, "CheckF1")["Arguments"]
    [condition] = check["Conditions"]
    assert condition["Type"] == "GreaterThanOrEqualTo"
    assert condition["LeftValue"] == {
        "Get": f"Steps.FineTune.FinalMetricDataList['{metric_name(EVALUATION_PREFIX, 'f1')}'].Value"
    }
    assert condition["RightValue"] == {"Get": "Parameters.F1Threshold"}
    [register] = check["IfSteps"]
    assert register["Type"] == "RegisterModel"
    arguments = register["Arguments"]
    assert arguments["ModelPackageGroupName"] == settings.model_package_group_name
    assert arguments["ModelApprovalStatus"] == {"Get": "Parameters.ModelApprovalStatus"}
    statistics = arguments["ModelMetrics"]["ModelQuality"]["Statistics"]
    assert statistics["S3Uri"] == {"Get": "Steps.RecordModel.OutputParameters['ReportUri']"}
    metadata = arguments["CustomerMetadataProperties"]
    assert metadata["model_archive_sha256"] == {"Get": "Steps.RecordModel.OutputParameters['ModelSha256']"}
    assert metadata["model_archive_version_id"] == {"Get": "Steps.RecordModel.OutputParameters['ModelVersionId']"}
    assert metadata["dataset_manifest_version_id"] == {"Get": "Parameters.ManifestVersionId"}
    # The approval notification quotes these two (stacks/notifications.py): a string F1, as the map requires.
    assert metadata[evaluation_key("f1")] == {"Std:Join": {"On": "", "Values": [condition["LeftValue"]]}}
    assert MODEL_METADATA_DATASET_MANIFEST in metadata
    [fail] = check["ElseSteps"]
    assert fail["Type"] == "Fail"
    message = fail["Arguments"]["ErrorMessage"]["Std:Join"]["Values"]
    assert condition["LeftValue"] in message and {"Get": "Parameters.F1Threshold"} in message


def test_record_model_reports_the_training_jobs_metrics(definition, settings):
    record = step(definition, "RecordModel")
    assert record["Type"] == "Lambda" and record["FunctionArn"] == "${RecordFunctionArn}"
    inputs = record["Arguments"]
    assert inputs["ModelArchiveUri"] == {"Get": "Steps.FineTune.ModelArtifacts.S3ModelArtifacts"}
    assert inputs["Task"] == settings.task == "question-answering"
    # The Metrics input is JSON text once FineTune's values are joined in: every one of the task's METRICS.
    run_time = {
        f"Steps.FineTune.FinalMetricDataList['{metric_name(EVALUATION_PREFIX, 'exact_match')}'].Value": "80.5",
        f"Steps.FineTune.FinalMetricDataList['{metric_name(EVALUATION_PREFIX, 'f1')}'].Value": "88.25",
    }
    assert json.loads(resolved(inputs["Metrics"], run_time)) == {"exact_match": 80.5, "f1": 88.25}
    assert inputs["ReportUri"]["Std:Join"]["Values"] == [
        f"s3://{artifacts_bucket(settings)}/{settings.layout.evaluation}",
        {"Get": "Execution.PipelineExecutionId"},
        EVALUATION_FILE,
    ]


def test_only_known_placeholders(settings, cpu_job_settings):
    """The cpu_job graph uses every deploy-time value (its processing job runs in every job subnet); the default
    fine_tune graph every one but the subnets its one training job does not use (Fn::Sub ignores unused ones)."""
    for built in (settings, cpu_job_settings):
        text = definition_json(built)
        deploy_time = set(placeholders(built).substitutions())
        # role, key, image registry account, code bucket + key + SHA-256, three functions, group, subnets
        assert len(deploy_time) == 10 + built.network.subnet_count
        used = set(re.findall(r"\$\{([^}]+)\}", text))
        unused_subnets = {name for name in deploy_time - used if name.startswith("Subnet")}
        assert used == (deploy_time - unused_subnets) | set(PSEUDO_PARAMETERS)
        assert bool(unused_subnets) is built.tokenizes_in_fine_tune
    assert json.loads(text)  # placeholders live inside JSON strings only
