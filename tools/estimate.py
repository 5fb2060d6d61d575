"""What a fine-tuning run will take and cost, before it starts: `make estimate ENV=dev [DATASET=dir]`.

Offline: the model's shape comes from a known config (BERT-large) or a local config.json, token counts from
the dataset tokenized with the bundled BERT uncased WordPiece tokenizer (or SQuAD v1.1's known size), prices
from config/costs.py. The estimator is the one the pipeline's cost guard runs (training_code/qa/cost.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from qa.cost import BERT_LARGE, Estimate, Hardware, ModelShape, Workload, estimate

from config import Settings, load_settings, read_cdk_json_context
from config.costs import (
    ASSUMPTIONS,
    PRICE_REGION,
    PRICE_SOURCE,
    PRICES_AS_OF,
    PROCESSING_USD_PER_HOUR,
    PipelineAssumptions,
    hardware_facts,
    measured_mfu,
)

ROOT = Path(__file__).resolve().parents[1]

GPU_RESULT = ROOT / "bench" / "results" / "gpu_throughput.json"
# Same shape, different names: the configs of these hub models are known without downloading them.
KNOWN_SHAPES = {
    name: BERT_LARGE
    for name in ("bert-large-uncased-whole-word-masking", "bert-large-uncased", "bert-large-cased-whole-word-masking")
}
CHOICES = (
    ("ml.p3.2xlarge", 1),
    ("ml.p3.16xlarge", 2),
    ("ml.p3dn.24xlarge", 1),
    ("ml.p3dn.24xlarge", 2),
    ("ml.p4d.24xlarge", 1),
    ("ml.p4d.24xlarge", 2),
    ("ml.p4d.24xlarge", 4),
)
# SQuAD v1.1 without a DATASET: 87,599 train / 10,570 validation questions (Rajpurkar et al. 2016, the
# published train-v1.1.json / dev-v1.1.json); 88,729 / 10,822 features at 384 tokens, stride 128 (Hugging Face
# course, chapter 7 "Question answering"). Length shape (assumption, the one bench/common.py uses): 12 % of
# features are full 384-token windows of long paragraphs, the rest average about 175 tokens.
SQUAD_TRAIN_FEATURES, SQUAD_VALIDATION_FEATURES, SQUAD_EXAMPLES = 88_729, 10_822, 98_169
SQUAD_SOURCE = "SQuAD v1.1 (88,729 train / 10,822 validation features at 384/128; assumed length shape)"


def squad_lengths(features: int, max_seq_length: int, padded: bool) -> dict[int, int]:
    """SQuAD v1.1's feature lengths; every feature is `max_seq_length` long when batches are padded to it."""
    if padded:
        return {max_seq_length: features}
    full = round(features * 0.12)
    return {max_seq_length: full, min(175, max_seq_length): features - full}


def dataset_lengths(dataset: Path, max_seq_length: int, doc_stride: int) -> tuple[dict[int, int], dict[int, int], int]:
    """Feature lengths of each split of a local SQuAD-format dataset, tokenized like preprocess.py does."""
    from qa.data import SPLITS, load_dataset_files, summarize_problems
    from qa.features import prepare_train_features
    from transformers import AutoTokenizer

    from tools.demo_models import bundled_model_dir

    files = {
        split: sorted(p for p in (dataset / split).rglob("*") if p.suffix in (".json", ".jsonl")) for split in SPLITS
    }
    if not all(files.values()):
        raise SystemExit(f"error: {dataset} needs train/ and validation/ folders with .json or .jsonl files")
    report = load_dataset_files(files, dataset)
    if report.problems:
        raise SystemExit(f"{summarize_problems(report.problems)}\nerror: fix the dataset, then estimate again")
    tokenizer = AutoTokenizer.from_pretrained(str(bundled_model_dir()))
    counts = []
    for split in SPLITS:
        records = report.records[split]
        batch = {key: [record[key] for record in records] for key in ("id", "question", "context", "answers")}
        features = prepare_train_features(batch, tokenizer, max_seq_length, doc_stride)
        counts.append(dict(Counter(len(ids) for ids in features["input_ids"])))
    return counts[0], counts[1], sum(len(r) for r in report.records.values())


def model_shape(base_model: str, config_path: Path | None) -> ModelShape:
    if config_path is not None:
        return ModelShape.from_config(json.loads(config_path.read_text()))
    if base_model not in KNOWN_SHAPES:
        raise SystemExit(
            f"error: the shape of {base_model} is not known offline; pass --model-config <its config.json>"
        )
    return ModelShape.from_config(KNOWN_SHAPES[base_model])


def pipeline_seconds(result: Estimate, preprocess_examples: int, assumptions: PipelineAssumptions) -> float:
    """Start-up of the three jobs, preprocessing, training, evaluation (on one GPU of the training type)."""
    return (
        assumptions.cpu_job_startup_seconds
        + preprocess_examples / assumptions.preprocess_examples_per_second
        + 2 * assumptions.gpu_job_startup_seconds
        + result.training_seconds
        + result.evaluation_seconds
    )


def _duration(seconds: float) -> str:
    if seconds < 600:
        return f"{seconds / 60:.1f} min"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.2f}"


def estimate_table(
    settings: Settings, workload: Workload, choices: list[tuple[str, int]], examples: int
) -> tuple[list[list[str]], set[str]]:
    configured = (settings.training.instance_type, settings.training.instance_count)
    """One row per (instance type, count) and the MFU sources used."""
    measured = measured_mfu(GPU_RESULT)
    rows, sources = [], set()
    low, high = ASSUMPTIONS.spot_savings
    for name, count in choices:
        facts, source = hardware_facts(name, measured)
        sources.add(f"{name}: MFU {Hardware.from_dict(name, facts).utilisation:.1%} from {source}")
        result = estimate(workload, Hardware.from_dict(name, facts), count)
        cost = result.training_usd
        rows.append(
            [
                f"{count} x {name}" + (" (configured)" if (name, count) == configured else ""),
                _duration(result.training_seconds),
                _duration(pipeline_seconds(result, examples, ASSUMPTIONS)),
                _usd(None if cost is None else cost + processing_usd(settings, result, examples)),
                "n/a" if cost is None else f"{_usd(cost * (1 - high))} - {_usd(cost * (1 - low))}",
                f"{result.gpu_hours:,.1f}",
                f"{result.data_parallel_efficiency:.0%}",
            ]
        )
    return rows, sources


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="dev")
    parser.add_argument("--dataset", type=Path, help="a local SQuAD-format dataset (default: SQuAD v1.1's size)")
    parser.add_argument("--model-config", type=Path, help="config.json of a model whose shape is not known offline")
    parser.add_argument("--epochs", type=float, help="default: the environment's hyperparameters.epochs")
    parser.add_argument("--per-device-batch", type=int, help="default: hyperparameters.per_device_train_batch_size")
    parser.add_argument("--pad-to-max-length", action="store_true", help="count every feature as max_seq_length")
    args = parser.parse_args(argv)

    settings = load_settings({**read_cdk_json_context(ROOT / "cdk.json"), "env": args.env})
    hps = settings.hyperparameters
    if args.dataset:
        train, validation, examples = dataset_lengths(args.dataset, hps.max_seq_length, hps.doc_stride)
        if args.pad_to_max_length:
            train = {hps.max_seq_length: sum(train.values())}
        source = f"{args.dataset} tokenized with the bundled BERT uncased WordPiece tokenizer"
    else:
        train = squad_lengths(SQUAD_TRAIN_FEATURES, hps.max_seq_length, args.pad_to_max_length)
        validation = squad_lengths(SQUAD_VALIDATION_FEATURES, hps.max_seq_length, args.pad_to_max_length)
        examples, source = SQUAD_EXAMPLES, SQUAD_SOURCE
    workload = Workload(
        model=model_shape(settings.model.base_model, args.model_config),
        train_lengths=train,
        validation_lengths=validation,
        epochs=args.epochs or hps.epochs,
        per_device_batch=args.per_device_batch or hps.per_device_train_batch_size,
        gradient_accumulation_steps=hps.gradient_accumulation_steps,
    )
    configured = (settings.training.instance_type, settings.training.instance_count)
    choices = [*CHOICES, *([configured] if configured not in CHOICES else [])]
    rows, sources = estimate_table(settings, workload, choices, examples)
    print(
        f"{settings.model.base_model}: {workload.model.matmul_parameters / 1e6:,.0f} M matmul parameters; "
        f"{workload.train_features:,} training features x {workload.epochs:g} epochs = "
        f"{workload.tokens / 1e6:,.1f} M tokens, {workload.training_flops:.3g} FLOPs\n"
        f"data: {source}\nconfigured: {configured[1]} x {configured[0]}, batch {workload.per_device_batch} per GPU\n"
    )
    header = ["instances", "training", "whole pipeline", "on-demand", "spot (range)", "GPU-hours", "DP eff."]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    low, high = ASSUMPTIONS.spot_savings
    print(
        "\n".join(
            [
                "",
                f"prices: LIST prices, SageMaker on-demand, {PRICE_REGION}, as of {PRICES_AS_OF}: {PRICE_SOURCE}",
                "on-demand: training job plus the preprocessing and evaluation jobs; spot: "
                f"training at {low:.0%}-{high:.0%} savings (assumption), processing not included",
                "time = FLOPs / (GPUs x peak dense fp16/bf16 x MFU x data-parallel efficiency); DP efficiency: fp32 "
                "gradient all-reduce over NVLink and the network, overlapped with the backward pass",
                *sorted(sources),
                f"whole pipeline adds job start-up ({ASSUMPTIONS.cpu_job_startup_seconds:.0f} s CPU, "
                f"{ASSUMPTIONS.gpu_job_startup_seconds:.0f} s per GPU job), preprocessing at "
                f"{ASSUMPTIONS.preprocess_examples_per_second:,.0f} examples/s, and evaluation at the training GPU's "
                "rate (assumptions)",
            ]
        )
    )
    return 0


def processing_usd(settings: Settings, result: Estimate, examples: int) -> float:
    """Preprocessing and evaluation jobs at their list prices, start-up included (billed for processing jobs);
    evaluation at the training GPU's rate (assumption)."""
    processing = settings.processing
    preprocess = ASSUMPTIONS.cpu_job_startup_seconds + examples / ASSUMPTIONS.preprocess_examples_per_second
    evaluate = ASSUMPTIONS.gpu_job_startup_seconds + result.evaluation_seconds
    return (
        PROCESSING_USD_PER_HOUR.get(processing.preprocess_instance_type, 0.0) * preprocess
        + PROCESSING_USD_PER_HOUR.get(processing.evaluate_instance_type, 0.0) * evaluate
    ) / 3600


if __name__ == "__main__":
    sys.exit(main())
