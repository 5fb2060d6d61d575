"""The cost estimator: FLOP count against a real model, data-parallel model, and calibration against the
reference article (BERT-large, SQuAD v1.1, 2 epochs: about 4 h / $15 on 1 x ml.p3.2xlarge, 28 min / $24 on
2 x ml.p3.16xlarge; /work/shared/seeds, the blog post's closing section)."""

from __future__ import annotations

import pytest
from qa.cost import BERT_LARGE, Hardware, ModelShape, Workload, data_parallel_efficiency, estimate, run_estimate

from config.costs import ASSUMPTIONS, hardware_facts

ARTICLE_FEATURES = 88_729  # SQuAD v1.1 train at 384/128 (tools/estimate.py states the source)
ARTICLE_VALIDATION = 10_822
ARTICLE_EXAMPLES = 98_169


def test_parameter_count_matches_transformers_bert_for_question_answering():
    from transformers import BertConfig, BertForQuestionAnswering

    config = BertConfig(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=256)
    model = BertForQuestionAnswering(config)
    assert ModelShape.from_config(config.to_dict()).parameters == sum(p.numel() for p in model.parameters())


def test_bert_large_shape_has_the_published_size():
    assert ModelShape.from_config(BERT_LARGE).parameters == 334_094_338  # BertForQuestionAnswering, bert-large


def article_workload() -> Workload:
    # The article's hyperparameters: fp16, batch 4 per GPU, pad_to_max_length (every feature 384 tokens), 2 epochs.
    return Workload(
        model=ModelShape.from_config(BERT_LARGE),
        train_lengths={384: ARTICLE_FEATURES},
        validation_lengths={384: ARTICLE_VALIDATION},
        epochs=2,
        per_device_batch=4,
    )


def article_job(name: str, count: int) -> tuple[float, float]:
    """(wall seconds, billed USD) of the article's single training job: start-up, tokenizing SQuAD, training,
    evaluating on the job's GPUs, all on the training instances (start-up not billed)."""
    hardware = Hardware.from_dict(name, hardware_facts(name)[0])
    assert hardware.usd_per_hour is not None, f"{name} has no list price in config/costs.py"
    result = estimate(article_workload(), hardware, count)
    work = (
        ARTICLE_EXAMPLES / ASSUMPTIONS.preprocess_examples_per_second
        + result.training_seconds
        + result.evaluation_seconds / result.gpus
    )
    return ASSUMPTIONS.gpu_job_startup_seconds + work, work / 3600 * count * hardware.usd_per_hour


@pytest.mark.parametrize(
    ("name", "count", "article_seconds", "article_usd"),
    [("ml.p3.2xlarge", 1, 4 * 3600, 15.0), ("ml.p3.16xlarge", 2, 28 * 60, 24.0)],
)
def test_calibration_against_the_article_within_35_percent(name, count, article_seconds, article_usd):
    seconds, usd = article_job(name, count)
    assert abs(seconds / article_seconds - 1) <= 0.35, f"{seconds / 60:.0f} min vs {article_seconds / 60:.0f} min"
    assert abs(usd / article_usd - 1) <= 0.35, f"${usd:.2f} vs ${article_usd:.2f}"


def test_single_gpu_and_network_bound_multi_node_efficiency():
    workload = article_workload()
    p3 = Hardware.from_dict("ml.p3.16xlarge", hardware_facts("ml.p3.16xlarge")[0])
    p4d = Hardware.from_dict("ml.p4d.24xlarge", hardware_facts("ml.p4d.24xlarge")[0])
    assert data_parallel_efficiency(workload, Hardware.from_dict("x", {**hardware_facts("ml.p3.2xlarge")[0]}), 1) == 1
    # 25 Gbit/s between p3.16xlarge nodes cannot hide a 1.3 GB all-reduce behind a 0.2 s step; 400 Gbit/s EFA can.
    assert data_parallel_efficiency(workload, p3, 2) < 0.5 < data_parallel_efficiency(workload, p4d, 2)
    assert data_parallel_efficiency(workload, p4d, 4) < data_parallel_efficiency(workload, p4d, 2)


def test_run_estimate_scales_with_epochs_and_stops_unknown_types():
    model = {"hardware": {"ml.p4d.24xlarge": hardware_facts("ml.p4d.24xlarge")[0]}, "per_device_train_batch_size": 8}
    one = run_estimate(model, BERT_LARGE, {200: 1000}, {200: 100}, "ml.p4d.24xlarge", 2, 1.0)
    two = run_estimate(model, BERT_LARGE, {200: 1000}, {200: 100}, "ml.p4d.24xlarge", 2, 2.0)
    assert two["training_on_demand_usd"] == pytest.approx(2 * one["training_on_demand_usd"])
    unknown = run_estimate(model, BERT_LARGE, {200: 1000}, {200: 100}, "ml.g5.2xlarge", 1, 1.0)
    assert unknown["training_on_demand_usd"] >= 1e12


def test_distilbert_field_names_size_the_model_and_a_config_without_them_names_the_fields():
    distilbert = {"n_layers": 6, "dim": 768, "hidden_dim": 3072, "vocab_size": 30522}
    bert_like = {"num_hidden_layers": 6, "hidden_size": 768, "intermediate_size": 3072, "vocab_size": 30522}
    assert ModelShape.from_config(distilbert) == ModelShape.from_config(bert_like)
    with pytest.raises(ValueError, match="has none of num_hidden_layers, n_layers"):
        ModelShape.from_config({"hidden_size": 768, "intermediate_size": 3072, "vocab_size": 30522})
