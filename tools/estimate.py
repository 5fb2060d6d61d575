"""What a run waits for and what AWS bills, before it starts: `make estimate ENV=dev [DATASET=dir] [PLOT=png]`.

Offline. The pipeline is modelled step by step along its critical path, in the graph of
`processing.tokenize_in` (`--tokenize-in` or `-c processing.tokenize_in=...` for a what-if): fine_tune (the
claim step validates in Lambda, FineTune tokenizes on its node's vCPUs, trains and evaluates: one instance cold
start) or cpu_job (the cached CPU job ValidateAndTokenize, then FineTune: two), each job as SageMaker bills it:
provisioning (not billed), image pull, downloads, start, compute, upload (billed, per instance). Beside the
total: which tokenize_in pays (deadline first, cost second), the physical floor, a warm second run inside a warm
pool's window, and the dataset size at which two nodes start to pay. The FineTune figures are the cost guard's
(training_code/qa/cost.py, constants in config/costs.py). The model's shape comes from a known config
(BERT-large) or a local config.json; token counts from the dataset tokenized with the bundled BERT uncased
WordPiece tokenizer, or SQuAD v1.1's known size.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from qa.cost import WEIGHT_BYTES, Hardware, JobEstimate, JobTerms, ModelShape, Workload, training_job

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
from config.instance_types import INSTANCE_TYPES, instance_type
from config.loader import DEFAULT_ENV
from config.paths import CDK_JSON, GPU_THROUGHPUT_RESULT
from pipeline_steps import names

GPU_RESULT = GPU_THROUGHPUT_RESULT
NODE_COUNTS = (1, 2, 4)
TOKENIZE_IN = ("fine_tune", "cpu_job")  # config/settings.py ProcessingSettings.tokenize_in
# Costs of two graphs closer than this share of the cheaper one count as equal when choosing tokenize_in (then the
# faster wins): below what this model resolves, whose rates (tokenization, S3, Lambda) are assumptions.
COST_RESOLUTION = 0.01
# The largest dataset the two-node break-even searches, as a multiple of the one estimated.
BREAK_EVEN_MAX_SCALE = 10_000.0
# The seed article (/work/shared/seeds, the blog post's hyperparameters and closing section): bert-large-uncased-
# whole-word-masking, SQuAD v1.1, fp16, batch 4 per GPU, pad_to_max_length, 2 epochs, one HF training job that
# downloads, tokenizes (run_qa.py, one process), trains and evaluates; ~4 h / ~$15 on 1 x ml.p3.2xlarge,
# 28 min / $24 on 2 x ml.p3.16xlarge.
SEED_RUNS = (("ml.p3.2xlarge", 1, 4 * 60.0, 15.0), ("ml.p3.16xlarge", 2, 28.0, 24.0))
NO_PRICE = "no list price"


def dataset_lengths(
    dataset: Path, max_seq_length: int, doc_stride: int
) -> tuple[dict[int, int], dict[int, int], int, int]:
    """Feature lengths of each split of a local dataset, validated and tokenized as its task's (the folder's
    declaration, qa.declared_task; none: question answering) like preprocess.py does, and its training and total
    record counts."""
    from qa.data import SPLITS, load_dataset_files, summarize_problems
    from qa.declared_task import declared_task
    from tasks import DEFAULT_TASK, task
    from transformers import AutoTokenizer

    from config.paths import bundled_model_dir

    files = {
        split: sorted(p for p in (dataset / split).rglob("*") if p.suffix in (".json", ".jsonl")) for split in SPLITS
    }
    if not all(files.values()):
        raise SystemExit(f"error: {dataset} needs train/ and validation/ folders with .json or .jsonl files")
    try:
        declared = declared_task(dataset)
        records_task = task(declared.task or DEFAULT_TASK)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    report = load_dataset_files(files, dataset, task=records_task, label_names=declared.label_names)
    if report.problems:
        raise SystemExit(f"{summarize_problems(report.problems)}\nerror: fix the dataset, then estimate again")
    tokenizer = AutoTokenizer.from_pretrained(str(bundled_model_dir()))
    counts = []
    for split in SPLITS:
        features = records_task.train_features(report.records[split], tokenizer, max_seq_length, doc_stride)
        counts.append(dict(Counter(len(ids) for ids in features["input_ids"])))
    return counts[0], counts[1], len(report.records[SPLITS[0]]), sum(len(r) for r in report.records.values())


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
    """One execution along its critical path; `job` is FineTune's (with its tokenization in fine_tune mode)."""

    steps: list[Step]
    job: JobEstimate
    tokenize_in: str = "cpu_job"

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

    def seconds_around(self, name: str) -> tuple[float, float]:
        """Seconds of the critical path before step `name` starts and after it ends."""
        index = next(i for i, step in enumerate(self.steps) if step.name == name)
        return sum(s.seconds for s in self.steps[:index]), sum(s.seconds for s in self.steps[index + 1 :])


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


def compute_seconds(job: JobEstimate) -> float:
    """What FineTune's instances compute: its tokenization (fine_tune mode), training and evaluation."""
    return job.phases.get("tokenization", 0.0) + job.phases["training"] + job.phases["evaluation"]


def fine_tune_step(job: JobEstimate) -> Step:
    work = compute_seconds(job)
    startup = c.PIPELINE_STEP_SECONDS + job.wall_seconds - work
    return Step(names.TRAIN_STEP, "gpu job", startup, work, job.on_demand_usd or 0.0)


def tokenizing_job(job: JobEstimate, workload: Workload, examples: int, dataset_mb: float) -> JobEstimate:
    """FineTune in fine_tune mode: it downloads the records instead of features, and tokenizes them on its node's
    vCPUs before training (every node tokenizes its copy at once, so nothing waits on another node)."""
    model_mb = workload.model.parameters * WEIGHT_BYTES / 1e6
    phases: dict[str, float] = {}
    for name, seconds in job.phases.items():
        if name == "input download":
            seconds = (model_mb + dataset_mb) / c.S3_DOWNLOAD_MB_PER_SECOND
        if name == "training":
            phases["tokenization"] = tokenize_seconds(examples, job.instance_type)
        phases[name] = seconds
    return replace(job, phases=phases)


def claim_validation_seconds(dataset_mb: float) -> float:
    """ClaimManifest's duration when it validates every record (fine_tune mode)."""
    return c.CLAIM_FUNCTION[0] + dataset_mb / c.CLAIM_VALIDATE_MB_PER_SECOND


def claim_can_validate(dataset_mb: float) -> bool:
    """Whether the claim step validates this dataset: within its size limit and Lambda's 15 minutes."""
    return (
        dataset_mb <= c.CLAIM_VALIDATE_MAX_DATASET_MB and claim_validation_seconds(dataset_mb) <= c.LAMBDA_MAX_SECONDS
    )


def pipeline(
    settings: Settings,
    workload: Workload,
    job: JobEstimate,
    examples: int,
    dataset_mb: float,
    cached: bool,
    tokenize_in: str = "cpu_job",
) -> Pipeline:
    """The critical path of one execution in the graph of `tokenize_in` (`cached`: cpu_job's tokenization is a
    cache hit; fine_tune caches nothing). `job`: FineTune's training and evaluation (qa.cost.training_job)."""
    model_mb = workload.model.parameters * WEIGHT_BYTES / 1e6
    record = [
        _lambda(names.RECORD_STEP, model_mb / c.LAMBDA_HASH_MB_PER_SECOND, c.RECORD_FUNCTION_MB),
        _control(names.F1_CONDITION_STEP),
        _control(names.REGISTER_STEP, c.REGISTER_SECONDS),
    ]
    guard = [_lambda(names.ESTIMATE_STEP, *c.ESTIMATE_FUNCTION), _control(names.COST_CONDITION_STEP)]
    if tokenize_in == "fine_tune":
        job = tokenizing_job(job, workload, examples, dataset_mb)
        steps = [
            _lambda(names.CLAIM_STEP, claim_validation_seconds(dataset_mb), c.CLAIM_VALIDATE_FUNCTION_MB),
            _control(names.PARAMETERS_STEP),
            _control(names.FIRST_DELIVERY_STEP),
            _control(names.DATASET_VALID_STEP),
            *guard,
            fine_tune_step(job),
            *record,
        ]
        return Pipeline(steps, job, tokenize_in)
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
        *guard,
        fine_tune_step(job),
        *record,
    ]
    return Pipeline(steps, job, tokenize_in)


def choose_tokenize_in(options: dict[str, Pipeline], deadline: float, claim_ok: bool) -> tuple[str, str]:
    """Where to validate and tokenize: among the possible graphs (fine_tune only when the claim step can validate
    the dataset), those within the deadline first, then the cheaper on demand. Returns (choice, why)."""
    if not claim_ok:
        return "cpu_job", (
            "the dataset is above what the claim step validates (config/costs.py CLAIM_VALIDATE_MAX_DATASET_MB, "
            "Lambda's 15 minutes)"
        )
    fine, cpu = options["fine_tune"], options["cpu_job"]
    minutes = f"{_minutes(fine.seconds)} vs {_minutes(cpu.seconds)}"
    within = [mode for mode in TOKENIZE_IN if options[mode].seconds <= deadline]
    if len(within) == 1:
        return within[0], f"deadline: only {within[0]} makes {deadline / 60:g} min ({minutes})"
    if not within:
        faster = min(TOKENIZE_IN, key=lambda mode: options[mode].seconds)
        return faster, f"deadline: neither makes {deadline / 60:g} min; {faster} is faster ({minutes})"
    costs = f"{usd(fine.on_demand_usd)} vs {usd(cpu.on_demand_usd)} on demand"
    low = min(fine.on_demand_usd, cpu.on_demand_usd)
    if abs(fine.on_demand_usd - cpu.on_demand_usd) <= COST_RESOLUTION * low:
        faster = min(TOKENIZE_IN, key=lambda mode: options[mode].seconds)
        return faster, (
            f"deadline: both make {deadline / 60:g} min ({minutes}); cost: within {COST_RESOLUTION:.0%} ({costs}), "
            f"below what this model resolves, so the faster: {faster}"
        )
    cheaper = min(TOKENIZE_IN, key=lambda mode: options[mode].on_demand_usd)
    return cheaper, f"deadline: both make {deadline / 60:g} min ({minutes}); cost: {cheaper} is cheaper ({costs})"


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
    """1, 2 and 4 nodes of every allowed type (multi-node only where EFA allows it), the configured one too, then
    one node of every other GPU training type of the catalogue (config/instance_types.py) that can be estimated."""
    rows = [
        (name, count)
        for name in settings.training_instance_types
        for count in NODE_COUNTS
        if count == 1 or instance_type(name).efa
    ]
    configured = (settings.training.instance_type, settings.training.instance_count)
    rows = rows if configured in rows else [*rows, configured]
    return rows + [(name, 1) for name in catalogue_types() if name not in settings.training_instance_types]


def catalogue_types() -> list[str]:
    """The GPU training types of the catalogue whose hardware facts and throughput reference are known."""
    return [name for name in _gpu_training_types() if not not_estimated(name)]


def _gpu_training_types() -> list[str]:
    """The catalogue's GPU training types, in its order (by family and size)."""
    return [name for name, row in INSTANCE_TYPES.items() if row.training and row.gpus > 0]


def not_estimated(name: str) -> str | None:
    """Why `name` cannot be estimated (config/costs.py hardware_facts' message), or None."""
    try:
        c.hardware_facts(name)
    except KeyError as err:
        return str(err.args[0])
    return None


def priced(pipeline: Pipeline) -> bool:
    """Whether FineTune's type has a price (a list price or training.usd_per_hour): else its cost is unknown."""
    return pipeline.job.usd_per_hour is not None


def _context_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (e.g. processing.tokenize_in=fine_tune)")
    return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default=DEFAULT_ENV)
    parser.add_argument("--dataset", type=Path, help="a local SQuAD-format dataset (default: SQuAD v1.1's size)")
    parser.add_argument("--model-config", type=Path, help="config.json of a model whose shape is not known offline")
    parser.add_argument("--epochs", type=_positive_float, help="default: the environment's hyperparameters.epochs")
    parser.add_argument("--per-device-batch", type=_positive_int, help="default: per_device_train_batch_size")
    parser.add_argument("--pad-to-max-length", action="store_true", help="count every feature as max_seq_length")
    parser.add_argument(
        "--tokenize-in", choices=TOKENIZE_IN, help="what if processing.tokenize_in were this (default: the setting)"
    )
    parser.add_argument(
        "-c",
        "--context",
        type=_context_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a settings override, as cdk -c takes it (e.g. -c training.keep_alive_seconds=600)",
    )
    parser.add_argument("--plot", type=Path, help="write a timeline PNG of the configured pipeline and the seed's")
    args = parser.parse_args(argv)
    try:
        return report(args)
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
            return 1
        raise


@dataclass(frozen=True)
class Scenario:
    """What every modelled execution of one report shares: the settings, the dataset and FineTune's job terms."""

    settings: Settings
    workload: Workload
    examples: int  # records of every split
    train_examples: int
    dataset_mb: float
    terms: JobTerms
    measured: tuple[str, float] | None = None

    auto_batch: bool = False  # size the per-device batch per type, as train.py does for "auto"

    def hardware(self, name: str) -> tuple[Hardware, str]:
        return c.hardware_facts(name, self.measured, c.training_usd_per_hour(self.settings, name))

    def workload_on(self, name: str) -> Workload:
        """The workload with the per-device batch a job on `name` trains with."""
        if not self.auto_batch:
            return self.workload
        return replace(self.workload, per_device_batch=c.configured_per_device_batch(self.settings, name))

    def pipeline(self, name: str, count: int, tokenize_in: str, cached: bool = False) -> Pipeline:
        workload = self.workload_on(name)
        job = training_job(workload, self.hardware(name)[0], self.terms, count)
        return pipeline(self.settings, workload, job, self.examples, self.dataset_mb, cached, tokenize_in)

    def scaled(self, factor: float) -> Scenario:
        """The same kind of dataset, `factor` times as large (every split and length bucket)."""

        def scale(lengths: Mapping[int, int]) -> dict[int, int]:
            return {n: max(1, round(count * factor)) for n, count in lengths.items()}

        workload = replace(
            self.workload,
            train_lengths=scale(self.workload.train_lengths),
            validation_lengths=scale(self.workload.validation_lengths),
        )
        return replace(
            self,
            workload=workload,
            examples=max(1, round(self.examples * factor)),
            train_examples=max(1, round(self.train_examples * factor)),
            dataset_mb=self.dataset_mb * factor,
        )

    def possible(self, tokenize_in: str) -> str:
        """`tokenize_in`, or cpu_job where the claim step cannot validate a dataset this large."""
        return tokenize_in if tokenize_in == "cpu_job" or claim_can_validate(self.dataset_mb) else "cpu_job"


def report(args: argparse.Namespace) -> int:
    from config.loader import ConfigError

    overrides = dict(args.context)
    if args.tokenize_in:
        overrides["processing.tokenize_in"] = args.tokenize_in
    try:
        settings = load_settings({**read_cdk_json_context(CDK_JSON), "env": args.env, **overrides})
    except ConfigError as err:
        raise SystemExit(f"error: {err}") from None
    hps = settings.hyperparameters
    if args.dataset:
        train, validation, train_examples, examples = dataset_lengths(args.dataset, hps.max_seq_length, hps.doc_stride)
        if args.pad_to_max_length:
            train = {hps.max_seq_length: sum(train.values())}
        dataset_mb = sum(p.stat().st_size for p in args.dataset.rglob("*") if p.is_file()) / 1e6
        source = f"{args.dataset} tokenized with the bundled BERT uncased WordPiece tokenizer"
    else:
        train = squad_lengths(SQUAD_TRAIN_FEATURES, SQUAD_TRAIN_EXAMPLES, hps.max_seq_length, args.pad_to_max_length)
        validation = squad_lengths(
            SQUAD_VALIDATION_FEATURES, SQUAD_VALIDATION_EXAMPLES, hps.max_seq_length, args.pad_to_max_length
        )
        train_examples, examples = SQUAD_TRAIN_EXAMPLES, SQUAD_TRAIN_EXAMPLES + SQUAD_VALIDATION_EXAMPLES
        dataset_mb, source = SQUAD_MB, SQUAD_SOURCE
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
    scenario = Scenario(
        settings,
        workload,
        examples,
        train_examples,
        dataset_mb,
        c.training_job_terms(settings.training.encrypt_inter_container_traffic),
        c.measured_mfu(GPU_RESULT),
        auto_batch=not args.per_device_batch and hps.per_device_train_batch_size == "auto",
    )
    mode = settings.processing.tokenize_in
    configured = (settings.training.instance_type, settings.training.instance_count)
    deadline = settings.training.deadline_minutes * 60
    print(
        f"{settings.model.base_model}: {shape.matmul_parameters / 1e6:,.0f} M matmul parameters; "
        f"{workload.train_features:,} training features x {workload.epochs:g} epochs = "
        f"{workload.tokens / 1e6:,.1f} M tokens, {workload.training_flops:.3g} FLOPs\n"
        f"data: {source}; mean feature {workload.mean_train_length:.0f} tokens, "
        f"{padded_mean(train, workload.per_device_batch):.0f} padded in length-grouped batches of "
        f"{workload.per_device_batch}\nconfigured: {configured[1]} x {configured[0]}; deadline "
        f"training.deadline_minutes={settings.training.deadline_minutes:g} (whole pipeline"
        f"{', tokenization not cached' if mode == 'cpu_job' else ''}); graph: processing.tokenize_in={mode}\n"
    )
    rows, sources, results = [], set(), {}
    for name, count in choices(settings):
        sources.add(f"{name}: MFU {scenario.hardware(name)[0].utilisation:.1%} from {scenario.hardware(name)[1]}")
        cold = scenario.pipeline(name, count, mode)
        cached = scenario.pipeline(name, count, mode, cached=True) if mode == "cpu_job" else None
        results[(name, count)] = cold
        rows.append((name, count, cold, cached))
    within = [key for key, p in results.items() if p.seconds <= deadline and priced(p)]
    cheapest = min(within, key=lambda key: results[key].on_demand_usd) if within else None
    single = [key for key, p in results.items() if p.job.gpus == 1 and priced(p)]
    cheapest_single = min(single, key=lambda key: results[key].on_demand_usd) if single else None
    allowed = set(settings.training_instance_types)
    header = ["instances", "FineTune start-up", "compute", "billed/instance", "DP eff.", "pipeline", "cached",
              "on-demand", f"spot {c.SPOT_DISCOUNT:.0%} off", ""]  # fmt: skip
    table = [header]
    for name, count, cold, cached in rows:
        job = cold.job
        marks = [
            *(["configured"] if (name, count) == configured else []),
            *([f"cheapest within {settings.training.deadline_minutes:g} min"] if (name, count) == cheapest else []),
            *(["cheapest single GPU"] if (name, count) == cheapest_single else []),
            *(["catalogue only"] if name not in allowed else []),
        ]
        cost = usd(cold.on_demand_usd) if priced(cold) else NO_PRICE
        spot = usd(cold.spot_usd(c.SPOT_DISCOUNT)) if priced(cold) else NO_PRICE
        table.append(
            [
                f"{count} x {name}",
                _minutes(job.wall_seconds - compute_seconds(job)),
                _minutes(compute_seconds(job)),
                _minutes(job.billed_seconds),
                f"{job.step.efficiency:.0%}",
                _minutes(cold.seconds),
                _minutes(cached.seconds) if cached else "-",
                cost,
                spot,
                f"<- {', '.join(marks)}" if marks else "",
            ]
        )
    _print_table(table)
    print(_catalogue_note(settings))
    default = results.get(configured) or next(iter(results.values()))
    name, count = default.job.instance_type, default.job.instance_count
    floor = physical_floor(default.job, scenario.hardware(name)[0], workload)
    print()
    print(_breakdown(default))
    print(_floor_line(default, floor))
    print("\n".join(placement_notes(scenario, name, count, mode, deadline)))
    print(_warm_run_line(settings, scenario, name, count, mode))
    print(two_node_break_even(scenario, name, mode, deadline))
    print(_notes(settings, default, sources, cheapest, deadline))
    print(_seed_report(shape))
    print(
        f"\nsummary: {_minutes(default.seconds)}, {usd(default.on_demand_usd)} on demand, "
        f"{usd(default.spot_usd(c.SPOT_DISCOUNT))} spot at {c.SPOT_DISCOUNT:.0%} off; instance cold starts on the "
        f"critical path {default.cold_starts}; floor {_minutes(floor.seconds)} ({usd(floor.billed_usd)} billed) "
        f"[{count} x {name}, tokenize_in={mode}]"
    )
    if args.plot:
        from tools.timeline import plot_timeline

        other = "cpu_job" if mode == "fine_tune" else "fine_tune"
        runs = [
            (f"this pipeline, tokenize_in={mode}", default),
            (f"tokenize_in={other} (what if)", scenario.pipeline(name, count, other)),
            *(("seed article", seed_pipeline(shape, seed, seeds)) for seed, seeds, _, _ in SEED_RUNS),
        ]
        plot_timeline(args.plot, runs)
        print(f"\ntimeline written to {args.plot}")
    return 0


def _catalogue_note(settings: Settings) -> str:
    """What the catalogue-only rows, the unpriced rows and the types left out mean."""
    left_out = [f"{name} ({why})" for name in _gpu_training_types() if (why := not_estimated(name))]
    return (
        f"catalogue only: not a value of this environment's TrainingInstanceType parameter; -c "
        f"training.instance_type=<type> configures one. {NO_PRICE}: config/costs.py has no on-demand list price for "
        f"the type (none was found in the stored AWS pages): its time is modelled, its cost is not; "
        f"training.usd_per_hour=<your price> sets one for training.instance_type"
        + (f"\nnot estimated: {'; '.join(left_out)}" if left_out else "")
    )


def _print_table(table: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _breakdown(p: Pipeline) -> str:
    job = p.job
    uncached = " (tokenization not cached)" if p.tokenize_in == "cpu_job" else ""
    lines = [f"critical path of {job.instance_count} x {job.instance_type}, tokenize_in={p.tokenize_in}{uncached}:"]
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
    cached = f" ({p.cold_starts - 1} when the tokenization is a cache hit)" if p.tokenize_in == "cpu_job" else ""
    lines.append(
        f"  total {_minutes(p.seconds)}, {usd(p.on_demand_usd)} on demand; instance cold starts on the critical "
        f"path: {p.cold_starts}{cached}"
    )
    return "\n".join(lines)


@dataclass(frozen=True)
class Floor:
    """What no configuration of this job beats: one cold start and the training FLOPs at the GPUs' peak."""

    provisioning: float
    image_pull: float
    compute: float
    billed_usd: float  # the image pull and the compute at peak, on every instance (provisioning is not billed)
    gpus: int
    peak_tflops: float

    @property
    def seconds(self) -> float:
        return self.provisioning + self.image_pull + self.compute


def physical_floor(job: JobEstimate, hardware: Hardware, workload: Workload) -> Floor:
    """Provisioning + image pull + training FLOPs / (GPUs x peak dense bf16), and what the billed part costs."""
    compute = workload.training_flops / (job.gpus * hardware.peak_tflops * 1e12)
    pull = job.phases["image pull"]
    rate = (job.usd_per_hour or 0.0) * job.instance_count / 3600
    return Floor(job.phases["provisioning"], pull, compute, rate * (pull + compute), job.gpus, hardware.peak_tflops)


def _floor_line(p: Pipeline, floor: Floor) -> str:
    return (
        f"physical floor: {_minutes(floor.seconds)} = provisioning {floor.provisioning:.0f} s ({c.PROVISIONING_SOURCE})"
        f" + image pull {floor.image_pull:.0f} s ({c.GPU_TRAINING_IMAGE_MB:,} MB at {c.IMAGE_PULL_MB_PER_SECOND:g} "
        f"MB/s: {c.IMAGE_PULL_SOURCE}) + compute at peak {floor.compute:.0f} s (training FLOPs / ({floor.gpus} GPUs x "
        f"{floor.peak_tflops:g} TFLOP/s peak dense bf16, {c.PEAK_SOURCE})); billed floor (pull + "
        f"compute at peak) {usd(floor.billed_usd)} on demand; this estimate is {p.seconds / floor.seconds:.1f}x the "
        f"floor's time, {p.on_demand_usd / max(floor.billed_usd, 1e-12):.1f}x its cost"
    )


def placement_notes(scenario: Scenario, name: str, count: int, configured: str, deadline: float) -> list[str]:
    """Why each step is where it is, for `count` x `name`: deadline first, cost second."""
    fine = scenario.pipeline(name, count, "fine_tune")
    cpu = scenario.pipeline(name, count, "cpu_job")
    cached = scenario.pipeline(name, count, "cpu_job", cached=True)
    claim_ok = claim_can_validate(scenario.dataset_mb)
    choice, why = choose_tokenize_in({"fine_tune": fine, "cpu_job": cpu}, deadline, claim_ok)
    cpu_step = next(step for step in cpu.steps if step.kind == "cpu job")
    on_gpu = fine.job.phases["tokenization"]
    gpu_usd = (fine.job.usd_per_hour or 0.0) * count * on_gpu / 3600
    threshold = tokenization_threshold(scenario.settings, cpu.job)
    settings_line = (
        f"configured: processing.tokenize_in={configured}"
        if choice == configured
        else f"configure processing.tokenize_in={choice} (-c processing.tokenize_in={choice}; now {configured})"
    )
    return [
        f"where each step runs ({count} x {name}; deadline first, cost second):",
        f"  validation in {names.CLAIM_STEP} (fine_tune): {scenario.dataset_mb:,.1f} MB at "
        f"{c.CLAIM_VALIDATE_MB_PER_SECOND:g} MB/s (measured, qa/claim_validation.py) = "
        f"{claim_validation_seconds(scenario.dataset_mb):.1f} s of Lambda, "
        f"{'within' if claim_ok else 'ABOVE'} the claim's limit ({c.CLAIM_VALIDATE_MAX_DATASET_MB:,.0f} MB) and "
        f"Lambda's {c.LAMBDA_MAX_SECONDS / 60:.0f} min; else in {names.PREPROCESS_STEP}; either "
        "way bad data is refused before any GPU is billed",
        f"  tokenization inside {names.TRAIN_STEP}: saves the CPU cold start of {_minutes(cpu_step.startup)}, costs "
        f"{usd(gpu_usd)} more GPU time ({on_gpu:.0f} s on {c.VCPUS[name]} vCPUs of each of {count} instance(s), "
        f"before training) against the CPU job's {usd(cpu_step.usd)}: "
        f"{'chosen' if choice == 'fine_tune' else 'not chosen'} because {why}; by cost alone it costs less in its "
        f"cached CPU job above {threshold:,.0f} examples (this dataset: {scenario.examples:,})",
        f"  evaluation inside {names.TRAIN_STEP}: on the GPUs that trained, no second cold start",
        f"  tokenize_in={choice}; a rerun of the same dataset in cpu_job mode is a cache hit: "
        f"{_minutes(cached.seconds)}, {usd(cached.on_demand_usd)}",
        f"  {settings_line}",
    ]


@dataclass(frozen=True)
class WarmRun:
    """A second execution whose FineTune reuses the first one's warm pool."""

    seconds: float
    usd: float  # on demand: warm pools cannot be used with spot
    skipped: float  # provisioning and the image pull
    idle: float  # the pool waits from FineTune's end until the next FineTune starts
    idle_usd: float
    window: int
    window_usd: float  # the whole window, when no execution comes

    @property
    def reused(self) -> bool:
        return self.idle <= self.window


def warm_second_run(first: Pipeline, second: Pipeline, keep_alive: int) -> WarmRun:
    """`second` (the next execution, started the moment `first` ends) on `first`'s warm pool: its FineTune skips
    provisioning and the image pull; the pool bills its instances for the idle time between the two jobs
    (ResourceRetainedBillableTimeInSeconds x InstanceCount, API_WarmPoolStatus) at the training list price."""
    job = second.job
    rate = (job.usd_per_hour or 0.0) * job.instance_count / 3600
    pull = job.phases["image pull"]
    skipped = job.phases["provisioning"] + pull
    idle = first.seconds_around(names.TRAIN_STEP)[1] + second.seconds_around(names.TRAIN_STEP)[0]
    return WarmRun(
        second.seconds - skipped,
        second.on_demand_usd - rate * pull,
        skipped,
        idle,
        rate * min(idle, keep_alive),
        keep_alive,
        rate * keep_alive,
    )


def _warm_run_line(settings: Settings, scenario: Scenario, name: str, count: int, mode: str) -> str:
    keep_alive = settings.training.keep_alive_seconds
    label = f"training.keep_alive_seconds={keep_alive}"
    if not keep_alive:
        keep_alive = c.WHAT_IF_KEEP_ALIVE_SECONDS
        label = f"what if training.keep_alive_seconds={keep_alive} (it is 0: off)"
    first = scenario.pipeline(name, count, mode)
    run = warm_second_run(first, scenario.pipeline(name, count, mode, cached=True), keep_alive)
    if not run.reused:
        return (
            f"warm second run ({label}): the next FineTune starts {run.idle:.0f} s after this one ends, past the "
            f"window: no reuse; the pool bills its whole window, {usd(run.window_usd)}"
        )
    return (
        f"warm second run ({label}; needs training.use_spot=false and a warm pool quota): the same dataset again, "
        f"started as this execution ends, reuses the pool: FineTune skips provisioning and the image pull "
        f"({run.skipped:.0f} s): {_minutes(run.seconds)}, {usd(run.usd)} on demand; the keep-alive bills "
        f"{count} x {name} for the {run.idle:.0f} s between the two jobs ({usd(run.idle_usd)}), the whole "
        f"{keep_alive} s window ({usd(run.window_usd)}) when no execution comes (train-warm-pools.html; the price "
        "and the skipped pull are assumptions, config/costs.py)"
    )


def two_node_break_even(scenario: Scenario, name: str, mode: str, deadline: float) -> str:
    """Where two nodes of `name` start to pay: the training set size above which one node misses the deadline
    while two make it, and, for this dataset, the deadlines only two nodes make. Computed by bisection on the
    dataset's size (every split scaled alike; fine_tune falls back to cpu_job above the claim's limit)."""
    if not instance_type(name).efa:
        return f"two nodes: {name} has no EFA, so FineTune runs on one node"

    def seconds(nodes: int, factor: float) -> float:
        scaled = scenario.scaled(factor)
        return scaled.pipeline(name, nodes, scaled.possible(mode)).seconds

    def first_miss(nodes: int) -> float | None:
        """The smallest scale at which `nodes` miss the deadline (None: not even at the largest searched)."""
        low, high = 0.0, BREAK_EVEN_MAX_SCALE
        if seconds(nodes, high) <= deadline:
            return None
        for _ in range(60):
            middle = (low + high) / 2
            low, high = (low, middle) if seconds(nodes, middle) > deadline else (middle, high)
        return high

    workload, gpus = scenario.workload, scenario.hardware(name)[0].gpus
    batch = workload.per_device_batch * workload.gradient_accumulation_steps * gpus
    encrypted = "on" if scenario.settings.training.encrypt_inter_container_traffic else "off"
    what = (
        f"two nodes (2 x {name}: global batch {batch} -> {2 * batch}, inter-container traffic encryption {encrypted}, "
        f"at this model and settings)"
    )
    one, two = first_miss(1), first_miss(2)
    examples = scenario.train_examples

    def size(factor: float | None) -> str:
        return "never" if factor is None else f"{factor * examples:,.0f} training examples"

    single, double = scenario.pipeline(name, 1, mode).seconds, scenario.pipeline(name, 2, mode).seconds
    this_dataset = (
        f"for this dataset only 2 nodes make deadlines from {_minutes(double)} to {_minutes(single)}"
        if double < single
        else f"for this dataset 2 nodes are no faster ({_minutes(double)} vs {_minutes(single)})"
    )
    if one is None:
        return (
            f"{what}: 1 node makes the {deadline / 60:g}-min deadline up to the largest size searched; {this_dataset}"
        )
    if two is not None and two <= one:
        return (
            f"{what}: never pay against the {deadline / 60:g}-min deadline: 1 node misses it above {size(one)}, "
            f"2 nodes above {size(two)}; {this_dataset}"
        )
    return (
        f"{what}: start to pay above {size(one)}, where 1 node misses the {deadline / 60:g}-min deadline while 2 "
        f"nodes make it up to {size(two)}; {this_dataset}"
    )


def tokenization_threshold(settings: Settings, job: JobEstimate) -> float:
    """Examples above which the cached CPU job costs less than tokenizing inside FineTune's cold start."""
    cpu = settings.processing.preprocess_instance_type
    fixed = c.CPU_IMAGE_MB / c.IMAGE_PULL_MB_PER_SECOND + c.CONTAINER_START_SECONDS + c.PREPROCESS_SCRIPT_SETUP_SECONDS
    cpu_usd_s = c.PROCESSING_USD_PER_HOUR.get(cpu, 0.0) / 3600
    gpu_usd_s = (job.usd_per_hour or 0.0) * job.instance_count / 3600
    per_example_gpu = gpu_usd_s * tokenize_seconds(1, job.instance_type)
    per_example_cpu = cpu_usd_s * tokenize_seconds(1, cpu)
    return fixed * cpu_usd_s / (per_example_gpu - per_example_cpu) if per_example_gpu > per_example_cpu else 0.0


def _notes(settings: Settings, p: Pipeline, sources: set[str], cheapest: tuple | None, deadline: float) -> str:
    job = p.job
    interval = c.young_daly_minutes(job.instance_count)
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
