"""What a run waits for and what AWS bills, before it starts: `make estimate ENV=dev [DATASET=dir] [PLOT=png]`.

Offline. The pipeline is modelled step by step along its critical path (GRAPH.md's graph: Lambda steps, the
cached CPU tokenization job, the GPU FineTune job that also evaluates, the record and register steps), each
job as SageMaker bills it: provisioning (not billed), image pull, downloads, start, compute, upload (billed,
per instance). The FineTune figures are the cost guard's (training_code/qa/cost.py, constants in
config/costs.py). The model's shape comes from a known config (BERT-large) or a local config.json; token counts
from the dataset tokenized with the bundled BERT uncased WordPiece tokenizer, or SQuAD v1.1's known size.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from qa.cost import WEIGHT_BYTES, JobEstimate, ModelShape, Workload, training_job

from config import Settings, load_settings, read_cdk_json_context
from config import costs as c
from config.costs import (
    KNOWN_SHAPES,
    SQUAD_MB,
    SQUAD_SOURCE,
    SQUAD_TRAIN_EXAMPLES,
    SQUAD_TRAIN_FEATURES,
    SQUAD_VALIDATION_EXAMPLES,
    SQUAD_VALIDATION_FEATURES,
    squad_lengths,
)
from config.instance_types import instance_type
from config.loader import DEFAULT_ENV
from config.paths import CDK_JSON, GPU_THROUGHPUT_RESULT
from pipeline_steps import names

GPU_RESULT = GPU_THROUGHPUT_RESULT
NODE_COUNTS = (1, 2, 4)
# The seed article (/work/shared/seeds, the blog post's hyperparameters and closing section): bert-large-uncased-
# whole-word-masking, SQuAD v1.1, fp16, batch 4 per GPU, pad_to_max_length, 2 epochs, one HF training job that
# downloads, tokenizes (run_qa.py, one process), trains and evaluates; ~4 h / ~$15 on 1 x ml.p3.2xlarge,
# 28 min / $24 on 2 x ml.p3.16xlarge.
SEED_RUNS = (("ml.p3.2xlarge", 1, 4 * 60.0, 15.0), ("ml.p3.16xlarge", 2, 28.0, 24.0))


def dataset_lengths(dataset: Path, max_seq_length: int, doc_stride: int) -> tuple[dict[int, int], dict[int, int], int]:
    """Feature lengths of each split of a local SQuAD-format dataset, tokenized like preprocess.py does."""
    from qa.data import SPLITS, load_dataset_files, summarize_problems
    from qa.features import prepare_train_features
    from transformers import AutoTokenizer

    from config.paths import bundled_model_dir

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


def padded_mean(lengths: dict[int, int], batch: int) -> float:
    """Mean padded length with length-grouped batches (the loop's sampler): each batch padded to its longest."""
    ordered = sorted(n for n, count in lengths.items() for _ in range(count))
    batches = [ordered[i : i + batch] for i in range(0, len(ordered), batch)]
    return sum(max(b) * len(b) for b in batches) / max(len(ordered), 1)


def model_shape(base_model: str, config_path: Path | None) -> ModelShape:
    if config_path is not None:
        try:
            return ModelShape.from_config(json.loads(config_path.read_text()))
        except OSError as err:
            raise SystemExit(f"error: --model-config {config_path}: {err.strerror or err}") from None
        except (json.JSONDecodeError, ValueError) as err:
            raise SystemExit(f"error: --model-config {config_path}: {err}") from None
    if base_model not in KNOWN_SHAPES:
        raise SystemExit(
            f"error: the shape of {base_model} is not known offline; pass --model-config <its config.json>"
        )
    return ModelShape.from_config(KNOWN_SHAPES[base_model])


@dataclass
class Step:
    """One step on the critical path: its start-up and its work (seconds) and what it bills (USD)."""

    name: str
    kind: str  # "lambda", "cpu job", "gpu job", "control"
    startup: float
    work: float
    usd: float = 0.0

    @property
    def seconds(self) -> float:
        return self.startup + self.work


@dataclass
class Pipeline:
    steps: list[Step]
    job: JobEstimate

    @property
    def seconds(self) -> float:
        return sum(step.seconds for step in self.steps)

    @property
    def on_demand_usd(self) -> float:
        return sum(step.usd for step in self.steps)

    def spot_usd(self, discount: float) -> float:
        """Training on spot at `discount`; the processing job and the Lambda functions stay on demand."""
        return self.on_demand_usd - discount * (self.job.on_demand_usd or 0.0)

    @property
    def cold_starts(self) -> int:
        return sum(step.kind.endswith("job") for step in self.steps)


def _lambda(name: str, seconds: float, memory_mb: int) -> Step:
    usd = c.LAMBDA_USD_PER_GB_SECOND * seconds * memory_mb / 1024 + c.LAMBDA_USD_PER_REQUEST
    return Step(name, "lambda", c.PIPELINE_STEP_SECONDS, seconds, usd)


def _control(name: str, seconds: float = 0.0) -> Step:
    return Step(name, "control", c.PIPELINE_STEP_SECONDS, seconds)


def tokenize_seconds(examples: int, instance: str) -> float:
    return examples / (c.TOKENIZE_EXAMPLES_PER_VCPU_SECOND * c.VCPUS[instance] * c.TOKENIZE_PARALLEL_EFFICIENCY)


def tokenization_job(settings: Settings, examples: int, dataset_mb: float, features_mb: float) -> Step:
    """ValidateAndTokenize on its CPU image: billed from the image pull to the end of the output upload."""
    name = settings.processing.preprocess_instance_type
    pull = c.CPU_IMAGE_MB / c.IMAGE_PULL_MB_PER_SECOND
    io = (dataset_mb + features_mb) / c.S3_DOWNLOAD_MB_PER_SECOND
    start = c.CONTAINER_START_SECONDS + c.PREPROCESS_SCRIPT_SETUP_SECONDS
    work = tokenize_seconds(examples, name)
    billed = pull + io + start + work
    usd = c.PROCESSING_USD_PER_HOUR.get(name, 0.0) * billed / 3600
    startup = c.PIPELINE_STEP_SECONDS + c.PROVISIONING_SECONDS + pull + io + start
    return Step(names.PREPROCESS_STEP, "cpu job", startup, work, usd)


def fine_tune_step(job: JobEstimate) -> Step:
    work = job.phases["training"] + job.phases["evaluation"]
    return Step(
        names.TRAIN_STEP, "gpu job", c.PIPELINE_STEP_SECONDS + job.startup_seconds, work, job.on_demand_usd or 0.0
    )


def pipeline(
    settings: Settings, workload: Workload, job: JobEstimate, examples: int, dataset_mb: float, cached: bool
) -> Pipeline:
    """GRAPH.md's critical path for one execution (`cached`: the tokenization is a cache hit)."""
    model_mb = workload.model.parameters * WEIGHT_BYTES / 1e6
    tokenize = (
        _control(f"{names.PREPROCESS_STEP} (cache hit)")
        if cached
        else tokenization_job(settings, examples, dataset_mb, workload.features_mb)
    )
    steps = [
        _lambda(names.CLAIM_STEP, *c.CLAIM_FUNCTION),
        _control(names.PARAMETERS_STEP),
        _control(names.FIRST_DELIVERY_STEP),
        tokenize,
        _lambda(names.ESTIMATE_STEP, *c.ESTIMATE_FUNCTION),
        _control(names.COST_CONDITION_STEP),
        fine_tune_step(job),
        _lambda(names.RECORD_STEP, model_mb / c.LAMBDA_HASH_MB_PER_SECOND, c.RECORD_FUNCTION_MB),
        _control(names.F1_CONDITION_STEP),
        _control(names.REGISTER_STEP, c.REGISTER_SECONDS),
    ]
    return Pipeline(steps, job)


def seed_job(shape: ModelShape, name: str, count: int) -> tuple[JobEstimate, float]:
    """The seed article's single job: (the training job's phases, its tokenization seconds inside the job)."""
    workload = Workload(
        model=shape,
        train_lengths={384: SQUAD_TRAIN_FEATURES},
        validation_lengths={384: SQUAD_VALIDATION_FEATURES},
        epochs=2,
        per_device_batch=4,
        gradient_bytes=4,  # 2021: fp16 AMP keeps fp32 gradients, all-reduced as they are
    )
    # Its estimator leaves inter-container traffic encryption off, the SageMaker SDK's default.
    terms = replace(
        c.training_job_terms(encrypted=False), image_mb=c.SEED_IMAGE_PULL_SECONDS * c.IMAGE_PULL_MB_PER_SECOND
    )
    job = training_job(workload, c.hardware_facts(name)[0], terms, count)
    # run_qa.py tokenizes in one process (preprocessing_num_workers unset) on every node, before training.
    tokenize = (SQUAD_TRAIN_EXAMPLES + SQUAD_VALIDATION_EXAMPLES) / c.TOKENIZE_EXAMPLES_PER_VCPU_SECOND
    phases = {**job.phases, "tokenization": tokenize}
    return JobEstimate(job.instance_type, count, job.gpus, phases, job.step, job.usd_per_hour), tokenize


def _minutes(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min"


def usd(value: float | None) -> str:
    """Readable money: cents from a cent up, two significant digits below it."""
    if value is None:
        return "n/a"
    return f"${value:,.2f}" if abs(value) >= 0.01 else f"${value:.2g}"


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive number")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be a positive whole number")
    return value


def choices(settings: Settings) -> list[tuple[str, int]]:
    """1, 2 and 4 nodes of every allowed type (multi-node only where EFA allows it), the configured one too."""
    rows = [
        (name, count)
        for name in settings.training_instance_types
        for count in NODE_COUNTS
        if count == 1 or instance_type(name).efa
    ]
    configured = (settings.training.instance_type, settings.training.instance_count)
    return rows if configured in rows else [*rows, configured]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default=DEFAULT_ENV)
    parser.add_argument("--dataset", type=Path, help="a local SQuAD-format dataset (default: SQuAD v1.1's size)")
    parser.add_argument("--model-config", type=Path, help="config.json of a model whose shape is not known offline")
    parser.add_argument("--epochs", type=_positive_float, help="default: the environment's hyperparameters.epochs")
    parser.add_argument("--per-device-batch", type=_positive_int, help="default: per_device_train_batch_size")
    parser.add_argument("--pad-to-max-length", action="store_true", help="count every feature as max_seq_length")
    parser.add_argument("--plot", type=Path, help="write a timeline PNG of the configured pipeline and the seed's")
    args = parser.parse_args(argv)
    try:
        return report(args)
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
            return 1
        raise


def report(args: argparse.Namespace) -> int:
    from config.loader import ConfigError

    try:
        settings = load_settings({**read_cdk_json_context(CDK_JSON), "env": args.env})
    except ConfigError as err:
        raise SystemExit(f"error: {err}") from None
    hps = settings.hyperparameters
    if args.dataset:
        train, validation, examples = dataset_lengths(args.dataset, hps.max_seq_length, hps.doc_stride)
        if args.pad_to_max_length:
            train = {hps.max_seq_length: sum(train.values())}
        dataset_mb = sum(p.stat().st_size for p in args.dataset.rglob("*") if p.is_file()) / 1e6
        source = f"{args.dataset} tokenized with the bundled BERT uncased WordPiece tokenizer"
    else:
        train = squad_lengths(SQUAD_TRAIN_FEATURES, SQUAD_TRAIN_EXAMPLES, hps.max_seq_length, args.pad_to_max_length)
        validation = squad_lengths(
            SQUAD_VALIDATION_FEATURES, SQUAD_VALIDATION_EXAMPLES, hps.max_seq_length, args.pad_to_max_length
        )
        examples, dataset_mb, source = SQUAD_TRAIN_EXAMPLES + SQUAD_VALIDATION_EXAMPLES, SQUAD_MB, SQUAD_SOURCE
    shape = model_shape(settings.model.base_model, args.model_config)
    workload = Workload(
        model=shape,
        train_lengths=train,
        validation_lengths=validation,
        epochs=args.epochs or hps.epochs,
        per_device_batch=args.per_device_batch
        or c.configured_per_device_batch(settings, settings.training.instance_type),
        gradient_accumulation_steps=hps.gradient_accumulation_steps,
        gradient_bytes=c.gradient_bytes(hps.precision),
    )
    terms = c.training_job_terms(settings.training.encrypt_inter_container_traffic)
    measured = c.measured_mfu(GPU_RESULT)
    configured = (settings.training.instance_type, settings.training.instance_count)
    deadline = settings.training.deadline_minutes * 60
    print(
        f"{settings.model.base_model}: {shape.matmul_parameters / 1e6:,.0f} M matmul parameters; "
        f"{workload.train_features:,} training features x {workload.epochs:g} epochs = "
        f"{workload.tokens / 1e6:,.1f} M tokens, {workload.training_flops:.3g} FLOPs\n"
        f"data: {source}; mean feature {workload.mean_train_length:.0f} tokens, "
        f"{padded_mean(train, workload.per_device_batch):.0f} padded in length-grouped batches of "
        f"{workload.per_device_batch}\nconfigured: {configured[1]} x {configured[0]}; deadline "
        f"training.deadline_minutes={settings.training.deadline_minutes:g} (whole pipeline, tokenization not cached)\n"
    )
    rows, sources, results = [], set(), {}
    for name, count in choices(settings):
        hardware, mfu_source = c.hardware_facts(name, measured)
        sources.add(f"{name}: MFU {hardware.utilisation:.1%} from {mfu_source}")
        job = training_job(workload, hardware, terms, count)
        cold = pipeline(settings, workload, job, examples, dataset_mb, cached=False)
        warm = pipeline(settings, workload, job, examples, dataset_mb, cached=True)
        results[(name, count)] = cold
        rows.append((name, count, job, cold, warm))
    within = [key for key, p in results.items() if p.seconds <= deadline]
    cheapest = min(within, key=lambda key: results[key].on_demand_usd) if within else None
    header = ["instances", "FineTune start-up", "compute", "billed/instance", "DP eff.", "pipeline", "cached",
              "on-demand", f"spot {c.SPOT_DISCOUNT:.0%} off", ""]  # fmt: skip
    table = [header]
    for name, count, job, cold, warm in rows:
        marks = [
            *(["configured"] if (name, count) == configured else []),
            *([f"cheapest within {settings.training.deadline_minutes:g} min"] if (name, count) == cheapest else []),
        ]
        table.append(
            [
                f"{count} x {name}",
                _minutes(job.startup_seconds),
                _minutes(job.phases["training"] + job.phases["evaluation"]),
                _minutes(job.billed_seconds),
                f"{job.step.efficiency:.0%}",
                _minutes(cold.seconds),
                _minutes(warm.seconds),
                usd(cold.on_demand_usd),
                usd(cold.spot_usd(c.SPOT_DISCOUNT)),
                f"<- {', '.join(marks)}" if marks else "",
            ]
        )
    _print_table(table)
    default = results.get(configured) or next(iter(results.values()))
    print()
    print(_breakdown(default))
    print(_notes(settings, default, sources, examples, cheapest, deadline))
    print(_seed_report(shape))
    if args.plot:
        from tools.timeline import plot_timeline

        plot_timeline(args.plot, default, [seed_pipeline(shape, name, count) for name, count, _, _ in SEED_RUNS])
        print(f"\ntimeline written to {args.plot}")
    return 0


def _print_table(table: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _breakdown(p: Pipeline) -> str:
    job = p.job
    lines = [f"critical path of {job.instance_count} x {job.instance_type} (tokenization not cached):"]
    for step in p.steps:
        lines.append(
            f"  {step.name:<34} {step.kind:<8} start-up {step.startup:6.0f} s  work {step.work:6.0f} s  {usd(step.usd)}"
        )
    phases = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in job.phases.items())
    lines.append(f"  FineTune phases: {phases}; billed {job.billed_seconds:.0f} s per instance (provisioning is not)")
    timing = job.step
    lines.append(
        f"  step model: {timing.compute * 1e3:.1f} ms compute per optimizer step per GPU, all-reduce "
        f"{timing.allreduce * 1e3:.1f} ms ({job.instance_count} node(s)), exposed {timing.exposed * 1e3:.1f} ms"
    )
    lines.append(
        f"  total {_minutes(p.seconds)}, {usd(p.on_demand_usd)} on demand; instance cold starts on the critical "
        f"path: {p.cold_starts} ({p.cold_starts - 1} when the tokenization is a cache hit)"
    )
    return "\n".join(lines)


def tokenization_threshold(settings: Settings, job: JobEstimate) -> float:
    """Examples above which the cached CPU job costs less than tokenizing inside FineTune's cold start."""
    cpu = settings.processing.preprocess_instance_type
    fixed = c.CPU_IMAGE_MB / c.IMAGE_PULL_MB_PER_SECOND + c.CONTAINER_START_SECONDS + c.PREPROCESS_SCRIPT_SETUP_SECONDS
    cpu_usd_s = c.PROCESSING_USD_PER_HOUR.get(cpu, 0.0) / 3600
    gpu_usd_s = (job.usd_per_hour or 0.0) * job.instance_count / 3600
    per_example_gpu = gpu_usd_s * tokenize_seconds(1, job.instance_type)
    per_example_cpu = cpu_usd_s * tokenize_seconds(1, cpu)
    return fixed * cpu_usd_s / (per_example_gpu - per_example_cpu) if per_example_gpu > per_example_cpu else 0.0


def _notes(
    settings: Settings, p: Pipeline, sources: set[str], examples: int, cheapest: tuple | None, deadline: float
) -> str:
    job = p.job
    interval = c.young_daly_minutes(job.instance_count)
    threshold = tokenization_threshold(settings, job)
    cpu_job = next((s for s in p.steps if s.kind == "cpu job"), None)
    wait_low, wait_high = c.SPOT_WAIT_MINUTES_RANGE
    low, high = c.SPOT_DISCOUNT_RANGE
    compute = job.phases["training"]
    reclaim = job.startup_seconds + compute
    lines = [
        "",
        f"prices: LIST prices, SageMaker on-demand, {c.PRICE_REGION}, as of {c.PRICES_AS_OF}: {c.PRICE_SOURCE}; "
        f"Lambda https://aws.amazon.com/lambda/pricing/",
        "billed: each job from its image pull to the end of its upload (TrainingStartTime..TrainingEndTime), per "
        "instance; provisioning is waited for, not billed",
        f"spot: training at {c.SPOT_DISCOUNT:.0%} off (assumption; {low:.0%}-{high:.0%} off gives "
        f"{usd(p.spot_usd(high))} - {usd(p.spot_usd(low))}); "
        f"waiting for spot capacity adds {wait_low:.0f}-{wait_high:.0f} min of wall time, not billed (assumption)",
        f"start-up: provisioning {c.PROVISIONING_SECONDS:.0f} s, image pull at {c.IMAGE_PULL_MB_PER_SECOND:.0f} MB/s "
        f"({c.GPU_TRAINING_IMAGE_MB:,} MB GPU image, {c.CPU_IMAGE_MB:,} MB CPU image), container start "
        f"{c.CONTAINER_START_SECONDS:.0f} s (published job logs, config/costs.py); were the CPU image as large as its "
        f"build file's ceiling ({c.CPU_IMAGE_CEILING_MB:,} MB), a cache miss would take "
        f"{(c.CPU_IMAGE_CEILING_MB - c.CPU_IMAGE_MB) / c.IMAGE_PULL_MB_PER_SECOND / 60:.1f} min longer",
        "time = FLOPs / (GPUs x peak dense bf16 x MFU x data-parallel efficiency); DP efficiency: bf16 gradient "
        f"all-reduce at measured bus bandwidth (NVIDIA/nccl#527), {c.ALLREDUCE_OVERLAP:.0%} of the backward hides it",
        _encryption_note(settings.training.encrypt_inter_container_traffic),
        f"cost guard: MaxTrainingCostUSD defaults to {usd(settings.default_max_cost_usd)} (training.max_cost_usd, "
        f"else limits.default_cost_multiple x the configured choice's FineTune estimate on SQuAD v1.1, "
        f"{usd(settings.reference_training_usd)}); an execution may pass at most {usd(settings.max_training_cost_usd)}",
        *sorted(sources),
        f"tokenization: inside FineTune it would save the CPU cold start "
        f"({_minutes(cpu_job.startup) if cpu_job else 'n/a'} on a cache miss) but it costs less in its cached CPU "
        f"job above {threshold:,.0f} examples (this dataset: {examples:,}); the pipeline keeps the cached CPU job "
        "(validated before any GPU is billed; a cache hit skips it)",
        f"checkpoints: Young/Daly interval sqrt(2 x {c.CHECKPOINT_SECONDS} s x MTBF) = {interval:.0f} min for "
        f"{job.instance_count} spot instance(s) at {c.SPOT_INTERRUPTIONS_PER_INSTANCE_MONTH:g} interruptions per "
        f"instance-month; training computes {_minutes(compute)}, so "
        + (
            "no checkpoint fires: a reclaim costs the restart and all compute so far, at most "
            f"{_minutes(reclaim)} of billed time ({usd((job.usd_per_hour or 0) * job.instance_count * reclaim / 3600)} "
            "on demand)"
            if interval * 60 > compute
            else f"checkpoint every {interval:.0f} min"
        ),
    ]
    if cheapest is None:
        lines.append(f"no configuration finishes within training.deadline_minutes ({deadline / 60:g} min)")
    return "\n".join(lines)


def _encryption_note(encrypted: bool) -> str:
    if not encrypted:
        return "inter-container traffic encryption: off (training.encrypt_inter_container_traffic)"
    return (
        "inter-container traffic encryption: on (training.encrypt_inter_container_traffic): the all-reduce across "
        f"instances is counted {c.ENCRYPTED_INTERNODE_ALLREDUCE_SLOWDOWN:g}x slower (assumption: AWS says it can "
        f"increase distributed training time and publishes no figure, {c.ENCRYPTION_SOURCE}); 1 instance: no effect"
    )


def seed_pipeline(shape: ModelShape, name: str, count: int) -> Pipeline:
    job, tokenize = seed_job(shape, name, count)
    phases = job.phases
    upload = phases["model upload"]
    compute = phases["training"] + phases["evaluation"]
    steps = [
        Step("training job (start-up)", "gpu job", job.startup_seconds - tokenize - upload, 0.0),
        Step("tokenization (run_qa.py)", "control", 0.0, tokenize),
        Step("training + evaluation", "control", 0.0, compute, job.on_demand_usd or 0.0),
        Step("model upload", "control", upload, 0.0),
    ]
    return Pipeline(steps, job)


def _seed_report(shape: ModelShape) -> str:
    lines = ["", "seed article's configuration (fp16, batch 4, padded to 384, one job that also tokenizes):"]
    for name, count, minutes, article_usd in SEED_RUNS:
        job, _ = seed_job(shape, name, count)
        cost = job.on_demand_usd or 0.0
        lines.append(
            f"  {count} x {name}: {_minutes(job.wall_seconds)}, {usd(cost)} vs the article's {minutes:g} min, "
            f"${article_usd:g} ({job.wall_seconds / 60 / minutes - 1:+.0%} time, {cost / article_usd - 1:+.0%} "
            f"cost); DP eff. {job.step.efficiency:.0%}, instance cold starts 1"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
