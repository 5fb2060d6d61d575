"""The cost guard's estimator (qa/cost.py): FLOP count against a real model, billing
as AWS defines it, the data-parallel model, inputs that must not fool the guard, and start-up calibration
against published job logs (config/costs.py cites them)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from qa.cost import (
    BERT_LARGE,
    UNKNOWN_COST_USD,
    Hardware,
    ModelShape,
    Workload,
    cost_model_document,
    run_estimate,
    step_time,
    training_job,
)

from config import costs
from config.costs import hardware_facts, training_job_terms

TERMS = training_job_terms(encrypted=False)


def p4d() -> Hardware:
    return hardware_facts("ml.p4d.24xlarge")[0]


def squad_like(epochs: float = 2, gradient_bytes: int = 2) -> Workload:
    return Workload(
        model=ModelShape.from_config(BERT_LARGE),
        train_lengths={384: 1130, 198: 87_599},
        validation_lengths={384: 252, 198: 10_570},
        epochs=epochs,
        per_device_batch=8,
        gradient_bytes=gradient_bytes,
    )


def cost_model() -> dict:
    return cost_model_document([p4d()], TERMS, 8, 1, 2)


LENGTHS = {200: 1000}, {200: 100}


def test_parameter_count_matches_transformers_bert_for_question_answering():
    from transformers import BertConfig, BertForQuestionAnswering

    config = BertConfig(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=256)
    model = BertForQuestionAnswering(config)
    assert ModelShape.from_config(config.to_dict()).parameters == sum(p.numel() for p in model.parameters())


def test_bert_large_shape_has_the_published_size():
    assert ModelShape.from_config(BERT_LARGE).parameters == 334_094_338  # BertForQuestionAnswering, bert-large


def test_billed_time_is_from_the_image_pull_to_the_upload_on_every_instance():
    one, two = (training_job(squad_like(), p4d(), TERMS, n) for n in (1, 2))
    for job in (one, two):
        assert job.billed_seconds == pytest.approx(job.wall_seconds - TERMS.provisioning_seconds)
        assert job.phases["image pull"] == pytest.approx(TERMS.image_mb / TERMS.image_pull_mb_per_second)
    assert one.on_demand_usd == pytest.approx(37.688 * one.billed_seconds / 3600)
    assert two.on_demand_usd == pytest.approx(2 * 37.688 * two.billed_seconds / 3600)
    # Two nodes finish sooner, but start-up bills twice: the single node is cheaper.
    assert one.on_demand_usd is not None and two.on_demand_usd is not None
    assert two.wall_seconds < one.wall_seconds and two.on_demand_usd > one.on_demand_usd


def test_gpu_start_up_matches_the_published_job_logs():
    # Job start -> user script: Transformers4Rec#794 4 min 6 s (25 GB-class image); the model's provisioning +
    # pull + input + toolkit start for the 25 GB image must land within 25 % of it.
    job = training_job(squad_like(), p4d(), TERMS, 1)
    modelled = (
        sum(job.phases[p] for p in ("provisioning", "image pull", "input download")) + TERMS.container_start_seconds
    )
    assert abs(modelled / 246 - 1) <= 0.25, modelled


def test_multi_node_efficiency_comes_from_the_measured_bus_bandwidth():
    workload = squad_like()
    one, two, four = (step_time(workload, p4d(), TERMS, n) for n in (1, 2, 4))
    # 0.67 GB of bf16 gradients at NVIDIA/nccl#527's algbw: 16 ranks 57.17 GB/s busbw -> 30.5 GB/s algbw.
    assert two.allreduce == pytest.approx(334_094_338 * 2 / (57.17e9 * 16 / 30), rel=1e-3)
    assert one.efficiency > 0.95 > two.efficiency > four.efficiency
    assert 0.6 < two.efficiency < 0.9  # exposed: the backward at ~200 tokens is shorter than the all-reduce
    fp32 = step_time(squad_like(gradient_bytes=4), p4d(), TERMS, 2)
    assert fp32.efficiency < two.efficiency
    single_gpu = hardware_facts("ml.p3.2xlarge")[0]
    assert step_time(workload, single_gpu, TERMS, 1).efficiency == 1


def test_inter_container_encryption_slows_the_all_reduce_across_instances_only():
    """AWS: encryption "can increase training time, especially if you are using distributed deep learning
    algorithms", and "doesn't affect training jobs with a single compute instance"
    (https://docs.aws.amazon.com/sagemaker/latest/dg/train-encrypt.html). The slowdown factor is an assumption
    (config/costs.py): AWS publishes none."""
    clear, encrypted = training_job_terms(encrypted=False), training_job_terms(encrypted=True)
    one_clear, one_encrypted = (training_job(squad_like(), p4d(), terms, 1) for terms in (clear, encrypted))
    assert one_encrypted.phases == one_clear.phases and one_encrypted.step == one_clear.step
    two_clear, two_encrypted = (training_job(squad_like(), p4d(), terms, 2) for terms in (clear, encrypted))
    assert two_encrypted.step.allreduce == pytest.approx(
        costs.ENCRYPTED_INTERNODE_ALLREDUCE_SLOWDOWN * two_clear.step.allreduce
    )
    assert two_encrypted.wall_seconds > two_clear.wall_seconds
    assert (two_encrypted.on_demand_usd or 0) > (two_clear.on_demand_usd or 0)


def test_the_guard_counts_the_encryption_the_settings_turn_on():
    from config import load_settings, read_cdk_json_context

    settings = load_settings(read_cdk_json_context())
    assert settings.training.encrypt_inter_container_traffic  # the default
    unencrypted = settings.model_copy(
        update={"training": settings.training.model_copy(update={"encrypt_inter_container_traffic": False})}
    )

    squad = squad_like()

    def usd(chosen, count: int) -> float:
        lengths = squad.train_lengths, squad.validation_lengths
        estimate = run_estimate(costs.cost_model(chosen), BERT_LARGE, *lengths, "ml.p4d.24xlarge", count, 2.0)
        return estimate["training_on_demand_usd"]

    assert usd(settings, 1) == usd(unencrypted, 1)
    assert usd(settings, 2) > usd(unencrypted, 2)


def test_multi_node_p3_is_network_bound_where_p4d_is_not():
    # 25 Gbit/s between p3.16xlarge nodes (vs 400 Gbit/s EFA on p4d) scales the cross-node bus bandwidth down 16x:
    # the all-reduce no longer hides behind the step.
    p3 = hardware_facts("ml.p3.16xlarge")[0]
    workload = squad_like()
    assert step_time(workload, p3, TERMS, 2).efficiency < 0.5 < step_time(workload, p4d(), TERMS, 2).efficiency


def test_a_measured_mfu_replaces_the_published_figure_only_for_its_own_gpu():
    measured = ("NVIDIA A100-SXM4-40GB", 0.5)
    a100, a100_source = hardware_facts("ml.p4d.24xlarge", measured)
    assert a100.mfu == 0.5 and "measured on NVIDIA A100" in a100_source
    v100, v100_source = hardware_facts("ml.p3.2xlarge", measured)
    assert v100.mfu is None and v100 == hardware_facts("ml.p3.2xlarge")[0]
    assert "measured" not in v100_source


def test_run_estimate_grows_with_epochs_and_nodes_and_names_a_missing_job_model():
    lengths = {200: 20_000}, {200: 100}  # enough compute for an epoch to show in cents

    def usd(name: str, count: int, epochs: float) -> float:
        return run_estimate(cost_model(), BERT_LARGE, *lengths, name, count, epochs)["training_on_demand_usd"]

    one, two_epochs, two_nodes = (
        usd("ml.p4d.24xlarge", 1, 1.0),
        usd("ml.p4d.24xlarge", 1, 2.0),
        usd("ml.p4d.24xlarge", 2, 1.0),
    )
    assert one < two_epochs < 2 * one  # start-up bills once, compute twice
    assert two_nodes > one
    assert usd("ml.g5.2xlarge", 1, 1.0) == UNKNOWN_COST_USD
    with pytest.raises(ValueError, match=r"cost_model has no 'job' start-up terms: build it with config\.costs"):
        run_estimate({"hardware": {}}, BERT_LARGE, *LENGTHS, "ml.p4d.24xlarge", 1, 1)


def test_the_guard_rounds_up_and_is_never_zero_for_a_tiny_dataset():
    tiny = run_estimate(cost_model(), BERT_LARGE, {40: 1}, {40: 1}, "ml.p4d.24xlarge", 1, 1.0)
    job = training_job(Workload(ModelShape.from_config(BERT_LARGE), {48: 1}, {48: 1}, 1.0, 8), p4d(), TERMS, 1)
    assert job.on_demand_usd is not None
    assert tiny["training_on_demand_usd"] >= job.on_demand_usd > 1.0  # start-up alone bills minutes of a p4d
    assert tiny["training_on_demand_usd"] == math.ceil(tiny["training_on_demand_usd"] * 100) / 100


@pytest.mark.parametrize(
    ("count", "epochs", "message"),
    [
        (0, 1.0, r"TrainingInstanceCount=0 must be a positive whole number"),
        (-2, 1.0, r"TrainingInstanceCount=-2 must be a positive whole number"),
        (1.5, 1.0, r"TrainingInstanceCount=1.5 must be a positive whole number"),
        (1, 0.0, r"Epochs=0.0 must be a positive number"),
        (1, -1.0, r"Epochs=-1.0 must be a positive number"),
        (1, float("nan"), r"Epochs=nan must be a positive number"),
        (1, "two", r"Epochs='two' is not a number"),
    ],
)
def test_zero_negative_or_non_numbers_cannot_fool_the_guard(count, epochs, message):
    with pytest.raises(ValueError, match=message):
        run_estimate(cost_model(), BERT_LARGE, *LENGTHS, "ml.p4d.24xlarge", count, epochs)


def test_cost_model_is_json_for_the_lambda_and_holds_every_allowed_type():
    import json

    from config import load_settings, read_cdk_json_context

    settings = load_settings(read_cdk_json_context("cdk.json"))
    model = json.loads(json.dumps(costs.cost_model(settings)))
    assert set(model["hardware"]) == set(settings.training_instance_types)
    result = run_estimate(model, BERT_LARGE, *LENGTHS, settings.training.instance_type, 1, 2.0)
    assert result["training_on_demand_usd"] > 0


def test_young_daly_interval_shrinks_with_the_cluster():
    one, four = costs.young_daly_minutes(1), costs.young_daly_minutes(4)
    assert one == pytest.approx(math.sqrt(2 * costs.CHECKPOINT_SECONDS * 730 * 3600 / 0.2) / 60)
    assert four == pytest.approx(one / 2)


def test_distilbert_field_names_size_the_model_and_a_config_without_them_names_the_fields():
    distilbert = {"n_layers": 6, "dim": 768, "hidden_dim": 3072, "vocab_size": 30522}
    bert_like = {"num_hidden_layers": 6, "hidden_size": 768, "intermediate_size": 3072, "vocab_size": 30522}
    assert ModelShape.from_config(distilbert) == ModelShape.from_config(bert_like)
    with pytest.raises(ValueError, match="has none of num_hidden_layers, n_layers"):
        ModelShape.from_config({"hidden_size": 768, "intermediate_size": 3072, "vocab_size": 30522})


def test_the_step_model_reproduces_the_reference_at_its_batch_and_is_slower_per_sample_below_it():
    """Kernel efficiency calibrated on NVIDIA's 110.5 sequences/s at batch 32 x 384 tokens (config/costs.py), plus
    fixed per-step costs: batch 32 reproduces the reference MFU, batch 8 models less."""
    hardware = p4d()
    assert hardware.fixed_step_seconds == pytest.approx(costs.FIXED_STEP_SECONDS_A100)

    def full_windows(batch: int) -> Workload:
        return Workload(ModelShape.from_config(BERT_LARGE), {384: 10_000}, {384: 10}, 1.0, batch)

    at_32, at_8 = (step_time(full_windows(b), hardware, TERMS, 1) for b in (32, 8))
    # compute: one GPU's step; the 8 GPUs of a p4d add the exposed all-reduce on top
    assert at_32.compute == pytest.approx(32 / costs.THROUGHPUT_REFERENCES["A100"].sequences_per_second, rel=1e-9)
    assert at_32.mfu == pytest.approx(hardware.utilisation * at_32.efficiency, rel=1e-9)
    assert at_8.mfu < at_32.mfu
    assert at_8.compute / 8 > at_32.compute / 32  # per sample: the fixed costs weigh 4x more
    assert at_8.compute - hardware.fixed_step_seconds == pytest.approx(
        (at_32.compute - hardware.fixed_step_seconds) / 4
    )


def test_fixed_step_costs_scale_with_memory_bandwidth():
    assert hardware_facts("ml.p5.48xlarge")[0].fixed_step_seconds == pytest.approx(
        costs.FIXED_STEP_SECONDS_A100 * 1555 / 3350, abs=1e-6
    )


def test_an_auto_batch_is_sized_per_instance_type_by_the_memory_model():
    """The cost guard resolves "auto" per type with qa/memory.py, as train.py does on the GPU itself."""
    auto = cost_model_document([p4d(), hardware_facts("ml.p3.2xlarge")[0]], TERMS, "auto", 1, 2, 32)
    lengths = {384: 20_000}, {384: 100}
    p4d_auto = run_estimate(auto, BERT_LARGE, *lengths, "ml.p4d.24xlarge", 1, 1.0)
    p4d_8 = run_estimate(cost_model(), BERT_LARGE, *lengths, "ml.p4d.24xlarge", 1, 1.0)
    assert p4d_auto["mfu"] > p4d_8["mfu"]  # batch 32 on the A100 40 GB
    assert p4d_auto["training_seconds"] < p4d_8["training_seconds"]
    v100 = run_estimate(auto, BERT_LARGE, *lengths, "ml.p3.2xlarge", 1, 1.0)
    assert v100["training_on_demand_usd"] > 0  # 16 GB: batch 16 (tests/training_code/test_memory.py)


def test_compile_pays_when_the_saved_compute_exceeds_the_compile_time():
    from qa.cost import compile_pays

    assert compile_pays(1000, 1.3, 90)  # saves 231 s
    assert not compile_pays(106, 1.3, 90)  # the reference workload on 1 x p4d: saves 24 s
    assert not compile_pays(1000, 1.0, 0.5)  # no speedup, nothing saved


def test_the_definition_defaults_follow_the_recipe_and_compile_only_where_it_pays():
    from config import load_settings, read_cdk_json_context

    settings = load_settings({**read_cdk_json_context(), "training.instance_type": "ml.p4d.24xlarge"})
    assert costs.configured_per_device_batch(settings, "ml.p4d.24xlarge") == 32
    assert costs.configured_per_device_batch(settings, "ml.p3.2xlarge") == 16  # V100 16 GB
    assert costs.default_learning_rate(settings) == 4.6e-5  # 32 x 8 GPUs = the recipe's global batch of 256
    two_nodes = settings.model_copy(update={"training": settings.training.model_copy(update={"instance_count": 2})})
    assert costs.default_learning_rate(two_nodes) == pytest.approx(4.6e-5 * 2**0.5, rel=1e-2)
    assert costs.compile_hyperparameter(settings) == "false"  # ~106 s of compute saves ~24 s < 90 s
    long = settings.model_copy(update={"hyperparameters": settings.hyperparameters.model_copy(update={"epochs": 10})})
    assert costs.compile_hyperparameter(long) == "true"


@pytest.mark.parametrize(
    ("name", "gpu"), [("ml.g5.2xlarge", "A10G"), ("ml.g6.2xlarge", "L4"), ("ml.g6e.xlarge", "L40S")]
)
def test_a_single_gpu_step_has_no_collective_and_scales_by_the_gpus_peak_and_bandwidth(name, gpu):
    """Issue 32: one GPU all-reduces nothing; its kernels take the A100 reference's time scaled by the peaks (the
    same MFU assumed, config/costs.py ASSUMED_LIKE) and its fixed per-step costs scale by the memory bandwidth."""
    from config.instance_types import GPU_MODELS

    hardware, source = hardware_facts(name)
    assert hardware.gpus == 1 and "MFU assumed equal to A100's" in source
    peak, bandwidth = GPU_MODELS[gpu].peak_dense_tflops, GPU_MODELS[gpu].memory_bandwidth_gbs
    assert peak and bandwidth
    assert hardware.fixed_step_seconds == pytest.approx(costs.FIXED_STEP_SECONDS_A100 * 1555 / bandwidth, abs=1e-6)
    workload = Workload(ModelShape.from_config(BERT_LARGE), {384: 10_000}, {384: 10}, 1.0, 32)
    step = step_time(workload, hardware, TERMS, 1)
    assert (step.allreduce, step.exposed, step.efficiency) == (0.0, 0.0, 1.0)
    # At the reference's batch (32) the whole step, fixed costs included, is the reference's scaled by the peaks;
    # at a quarter of it a GPU whose memory is slow for its peak (L4, L40S; not A10G) spends a larger share on the
    # fixed costs than the A100 does.
    a100 = step_time(workload, p4d(), TERMS, 1)
    assert step.compute / a100.compute == pytest.approx(312 / peak, rel=1e-6)
    small = replace(workload, per_device_batch=8)
    share = step_time(small, hardware, TERMS, 1).compute / step.compute
    assert (share > step_time(small, p4d(), TERMS, 1).compute / a100.compute) == (peak / bandwidth > 312 / 1555)


def test_gpus_without_nvlink_all_reduce_over_pcie():
    """The multi-GPU g sizes have no NVLink: the p4d bus bandwidth scaled by PCIe 4.0 x16's 31.5 GB/s."""
    g5_12, _ = hardware_facts("ml.g5.12xlarge")
    assert g5_12.busbw_gbs["1"] == pytest.approx(costs.P4D_BUSBW_GBS[1] * 31.5 / 600, abs=0.01)
    assert 0 < g5_12.busbw_gbs["1"] < p4d().busbw_gbs["1"]
