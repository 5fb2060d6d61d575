"""What a fine-tuning job bills and how long it takes: start-up, compute and upload, per instance.

Stdlib only: runs in the EstimateTrainingCost Lambda function (Python 3.12 runtime, the pipeline's cost guard)
and in tools/estimate.py (`make estimate`), so both use the same figures. Every constant comes in through
`cost_model` (built from config/costs.py, where each one is cited); this module holds only the arithmetic.

A SageMaker training job, as AWS bills it (DescribeTrainingJob: "You are billed for the time interval between
TrainingStartTime and TrainingEndTime", per instance: BillableTimeInSeconds x InstanceCount):

    provisioning (Starting, not billed) | image pull + input download + container/script start + compute +
    evaluation + model archive upload (billed, on every instance)

Compute, per optimizer step on one GPU: batch x FLOPs per feature / (peak dense FLOP/s x kernel efficiency)
plus the step's fixed costs (optimizer, gradient clipping, autocast's weight casts: memory-bound, independent
of the batch), over (GPUs x data-parallel efficiency). The kernel efficiency is calibrated so that the published
throughput reference (BERT-large, 384 tokens, at the reference's own batch) is reproduced exactly: a smaller
batch then spends a larger share of its step on the fixed costs, and models a lower MFU.
- Training FLOPs per token: 6 x matmul parameters (forward + backward) plus attention scores and values,
  12 x layers x hidden x sequence length (Chowdhery et al. 2022, "PaLM", appendix B: 6N + 12LHQT), summed over
  the real length histogram (dynamic padding: each batch is padded to its own longest feature only).
- Data-parallel efficiency per optimizer step: compute / (compute + exposed all-reduce). The all-reduce moves
  the gradients in their wire precision (bf16 with the loop's NCCL compression hook) at the MEASURED algorithm
  bandwidth of the cluster (nccl-tests busbw -> algbw = busbw x R / (2 (R - 1)) for R ranks). DDP starts the
  all-reduce while the backward pass still runs; only `allreduce_overlap` of the backward hides it (buckets
  become ready one by one and the NCCL kernels share the GPU), and the last bucket is always exposed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

# The model and sequence length of the published throughput references (BERT-large, SQuAD, 384 tokens).
BERT_LARGE = {"num_hidden_layers": 24, "hidden_size": 1024, "intermediate_size": 4096, "vocab_size": 30522}
REFERENCE_SEQUENCE_LENGTH = 384
# The estimate when a type has no list price or reference: the cost guard stops rather than waves it through.
UNKNOWN_COST_USD = 1e12
BACKWARD_SHARE = 2 / 3  # of a training step's FLOPs: backward is twice the forward
WEIGHT_BYTES = 4  # fp32 weights in the base model download and in model.tar.gz


@dataclass(frozen=True)
class ModelShape:
    """The transformer dimensions that determine FLOPs (a BERT-style encoder with a QA head)."""

    layers: int
    hidden: int
    intermediate: int
    vocab_size: int
    max_positions: int = 512
    type_vocab_size: int = 2

    @classmethod
    def from_config(cls, config: Mapping) -> ModelShape:
        """From a Hugging Face config.json: BERT/RoBERTa field names, or DistilBERT's (n_layers, dim, hidden_dim)."""

        def field(*names: str) -> int:
            for name in names:
                if name in config:
                    return int(config[name])
            raise ValueError(
                f"the model's config.json has none of {', '.join(names)}: the cost estimate cannot size the model"
            )

        return cls(
            layers=field("num_hidden_layers", "n_layers"),
            hidden=field("hidden_size", "dim"),
            intermediate=field("intermediate_size", "hidden_dim"),
            vocab_size=field("vocab_size"),
            max_positions=int(config.get("max_position_embeddings", 512)),
            type_vocab_size=int(config.get("type_vocab_size", 2)),
        )

    @property
    def matmul_parameters(self) -> int:
        """Weights and biases of every matrix multiply (attention, feed-forward, QA head), LayerNorms included;
        `BertForQuestionAnswering` has no pooler."""
        h, i = self.hidden, self.intermediate
        per_layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 2 * 2 * h
        return self.layers * per_layer + (2 * h + 2)

    @property
    def parameters(self) -> int:
        """All parameters (what the gradient all-reduce moves): matmuls plus embedding tables."""
        embeddings = (self.vocab_size + self.max_positions + self.type_vocab_size) * self.hidden + 2 * self.hidden
        return self.matmul_parameters + embeddings

    def training_flops(self, sequence_length: int) -> float:
        """Forward + backward FLOPs of one sequence of `sequence_length` tokens."""
        per_token = 6 * self.matmul_parameters + 12 * self.layers * self.hidden * sequence_length
        return float(per_token * sequence_length)

    def inference_flops(self, sequence_length: int) -> float:
        """Forward FLOPs of one sequence (a third of training)."""
        return self.training_flops(sequence_length) / 3


@dataclass(frozen=True)
class Workload:
    """One fine-tuning run: the features of one epoch (as a length histogram) and the loop's settings."""

    model: ModelShape
    train_lengths: Mapping[int, int]  # sequence length -> number of features of that length
    validation_lengths: Mapping[int, int]
    epochs: float
    per_device_batch: int
    gradient_accumulation_steps: int = 1
    gradient_bytes: int = 2  # bytes per gradient on the wire: bf16/fp16 with the NCCL compression hook

    @property
    def train_features(self) -> int:
        return sum(self.train_lengths.values())

    @property
    def mean_train_length(self) -> float:
        return sum(n * c for n, c in self.train_lengths.items()) / max(self.train_features, 1)

    @property
    def training_flops(self) -> float:
        return self.epochs * sum(c * self.model.training_flops(n) for n, c in self.train_lengths.items())

    @property
    def evaluation_flops(self) -> float:
        return sum(c * self.model.inference_flops(n) for n, c in self.validation_lengths.items())

    @property
    def tokens(self) -> float:
        """Training tokens over all epochs."""
        return self.epochs * sum(n * c for n, c in self.train_lengths.items())

    @property
    def features_mb(self) -> float:
        """Size of the tokenized features a job downloads: input ids, token types, attention mask (int32 each)."""
        tokens = sum(n * c for lengths in (self.train_lengths, self.validation_lengths) for n, c in lengths.items())
        return tokens * 3 * 4 / 1e6


@dataclass(frozen=True)
class Hardware:
    """What the estimate needs to know about one training instance type (config/costs.py cites each field)."""

    instance_type: str
    gpus: int
    peak_tflops: float  # per GPU, dense fp16/bf16
    usd_per_hour: float | None  # on-demand list price; None: not in the price table
    busbw_gbs: Mapping[str, float]  # nodes ("1", "2", ...) -> all-reduce bus bandwidth, GB/s (nccl-tests)
    mfu: float | None = None  # measured (at its own batch: used as the kernel efficiency, no fixed term)
    reference_sequences_per_second: float | None = None  # else: BERT-large at 384 tokens on one such GPU
    reference_batch: int = 32  # the per-GPU batch the reference was published at
    fixed_step_seconds: float = 0.0  # optimizer + clipping + autocast weight casts per optimizer step
    memory_gb: float | None = None  # per GPU (GiB, nominal): sizes an "auto" per-device batch (qa/memory.py)

    @classmethod
    def from_dict(cls, instance_type: str, facts: Mapping) -> Hardware:
        known = {f.name for f in fields(cls)} - {"instance_type"}
        return cls(instance_type=instance_type, **{k: v for k, v in facts.items() if k in known})

    def facts(self) -> dict[str, Any]:
        """The fields from_dict reads back (the set ones), as the cost model carries them per instance type."""
        return {k: v for k, v in asdict(self).items() if k != "instance_type" and v is not None}

    @property
    def utilisation(self) -> float:
        """MFU: the measured one, or the one implied by the published throughput reference (at its batch)."""
        if self.mfu is not None:
            return self.mfu
        if self.reference_sequences_per_second is None:
            raise ValueError(f"{self.instance_type}: neither a measured MFU nor a throughput reference")
        flops = self.reference_sequences_per_second * ModelShape.from_config(BERT_LARGE).training_flops(
            REFERENCE_SEQUENCE_LENGTH
        )
        return flops / (self.peak_tflops * 1e12)

    @property
    def kernel_efficiency(self) -> float:
        """Share of the peak the forward + backward kernels reach: a measured MFU as it is; else calibrated so
        that reference_batch sequences of 384 tokens take exactly the reference's step time, fixed costs
        included."""
        if self.mfu is not None:
            return self.mfu
        reference_step = (
            self.reference_batch
            / (self.peak_tflops * 1e12 * self.utilisation)
            * (ModelShape.from_config(BERT_LARGE).training_flops(REFERENCE_SEQUENCE_LENGTH))
        )
        kernels = reference_step - self.fixed_step_seconds
        if kernels <= 0:
            raise ValueError(f"{self.instance_type}: fixed step costs exceed the reference's whole step")
        return self.utilisation * reference_step / kernels

    @property
    def step_fixed_seconds(self) -> float:
        """The fixed per-step costs the model adds (none with a measured MFU, which includes them)."""
        return 0.0 if self.mfu is not None else self.fixed_step_seconds

    def compute_seconds(self, features: float, flops_per_feature: float) -> float:
        """One optimizer step's compute on one GPU: kernels plus fixed costs."""
        kernels = features * flops_per_feature / (self.peak_tflops * 1e12 * self.kernel_efficiency)
        return kernels + self.step_fixed_seconds

    @property
    def gpu_flops(self) -> float:
        """Sustained FLOP/s of one GPU."""
        return self.peak_tflops * 1e12 * self.utilisation

    def allreduce_gbs(self, nodes: int) -> float:
        """Algorithm bandwidth (bytes reduced per second) of an all-reduce over `nodes` instances: the bus
        bandwidth measured at that node count (beyond the largest measured count: the largest one's), turned
        into algbw for R ranks (nccl-tests PERFORMANCE.md: busbw = algbw x 2 (R - 1) / R)."""
        measured = {int(k): float(v) for k, v in self.busbw_gbs.items()}
        busbw = measured.get(nodes) or measured[max(n for n in measured if n <= nodes)]
        ranks = self.gpus * nodes
        return busbw * ranks / (2 * (ranks - 1))


@dataclass(frozen=True)
class JobTerms:
    """Start-up and I/O of one SageMaker training job (config/costs.py cites each value)."""

    provisioning_seconds: float  # Starting: "Preparing the instances for training" (not billed)
    image_mb: float  # the training image's size
    image_pull_mb_per_second: float
    container_start_seconds: float  # image ready -> the user script runs (training toolkit, imports)
    script_setup_seconds: float  # the script's own start: process group, model load onto the GPUs
    s3_download_mb_per_second: float  # input channels (base model, features)
    archive_mb_per_second: float  # SageMaker tars and gzips /opt/ml/model into model.tar.gz, then uploads it
    allreduce_overlap: float  # share of the backward pass that hides the gradient all-reduce
    bucket_mb: float  # DDP bucket (fp32 MB): the last one's all-reduce is always exposed
    # How many times longer an all-reduce across instances takes: inter-container traffic encryption (1: off).
    # Within one instance nothing is encrypted, so a 1-node job never pays it.
    internode_allreduce_slowdown: float

    @classmethod
    def from_dict(cls, terms: Mapping) -> JobTerms:
        return cls(**{f.name: float(terms[f.name]) for f in fields(cls)})


@dataclass(frozen=True)
class StepTime:
    """One optimizer step on one GPU, seconds."""

    compute: float  # kernels + fixed costs
    allreduce: float
    exposed: float
    mfu: float = 0.0  # model FLOPs of the step / (wall step x peak)

    @property
    def efficiency(self) -> float:
        return self.compute / (self.compute + self.exposed)

    @property
    def seconds(self) -> float:
        return self.compute + self.exposed


def step_time(workload: Workload, hardware: Hardware, terms: JobTerms, nodes: int) -> StepTime:
    """Compute of a mean step (over the real length histogram) against the gradient all-reduce that follows it."""
    flops_per_feature = workload.training_flops / workload.epochs / max(workload.train_features, 1)
    # Accumulation: one all-reduce per optimizer step of (batch x accumulation) features per GPU.
    features = workload.per_device_batch * workload.gradient_accumulation_steps
    compute = hardware.compute_seconds(features, flops_per_feature)
    peak = hardware.peak_tflops * 1e12
    if hardware.gpus * nodes == 1:
        return StepTime(compute, 0.0, 0.0, features * flops_per_feature / (compute * peak))
    wire = workload.model.parameters * workload.gradient_bytes
    bandwidth = hardware.allreduce_gbs(nodes) * 1e9
    if nodes > 1:
        bandwidth /= terms.internode_allreduce_slowdown
    allreduce = wire / bandwidth
    last_bucket = min(wire, terms.bucket_mb * 1e6 * workload.gradient_bytes / 4) / bandwidth
    backward = BACKWARD_SHARE * (compute - hardware.step_fixed_seconds)
    exposed = max(last_bucket, allreduce - terms.allreduce_overlap * backward)
    return StepTime(compute, allreduce, exposed, features * flops_per_feature / ((compute + exposed) * peak))


@dataclass(frozen=True)
class JobEstimate:
    """One training job: each phase in seconds (wall, the same on every instance), and what it bills."""

    instance_type: str
    instance_count: int
    gpus: int
    phases: dict[str, float]  # in order; "provisioning" is not billed
    step: StepTime
    usd_per_hour: float | None

    @property
    def wall_seconds(self) -> float:
        return sum(self.phases.values())

    @property
    def billed_seconds(self) -> float:
        """BillableTimeInSeconds of one instance (on demand): TrainingStartTime to TrainingEndTime."""
        return self.wall_seconds - self.phases["provisioning"]

    @property
    def startup_seconds(self) -> float:
        """Everything before and after the GPUs compute: provisioning, pull, downloads, start, upload."""
        return self.wall_seconds - self.phases["training"] - self.phases["evaluation"]

    @property
    def on_demand_usd(self) -> float | None:
        if self.usd_per_hour is None:
            return None
        return self.usd_per_hour * self.instance_count * self.billed_seconds / 3600

    @property
    def gpu_hours(self) -> float:
        return self.phases["training"] / 3600 * self.gpus


def optimizer_steps(workload: Workload, gpus: int) -> float:
    """Optimizer steps of the run (fractional: the step model is of the mean step)."""
    per_step = gpus * workload.per_device_batch * workload.gradient_accumulation_steps
    return workload.epochs * workload.train_features / per_step


def training_job(workload: Workload, hardware: Hardware, terms: JobTerms, instance_count: int) -> JobEstimate:
    """The phases of one FineTune job (train, then evaluate the validation features on the same GPUs)."""
    gpus = hardware.gpus * instance_count
    step = step_time(workload, hardware, terms, instance_count)
    model_mb = workload.model.parameters * WEIGHT_BYTES / 1e6
    phases = {
        "provisioning": terms.provisioning_seconds,
        "image pull": terms.image_mb / terms.image_pull_mb_per_second,
        "input download": (model_mb + workload.features_mb) / terms.s3_download_mb_per_second,
        "container start": terms.container_start_seconds + terms.script_setup_seconds,
        "training": optimizer_steps(workload, gpus) * step.seconds,
        "evaluation": workload.evaluation_flops / (gpus * hardware.gpu_flops),
        "model upload": model_mb / terms.archive_mb_per_second,
    }
    return JobEstimate(hardware.instance_type, instance_count, gpus, phases, step, hardware.usd_per_hour)


def compile_pays(compute_seconds: float, speedup: float, compile_seconds: float) -> bool:
    """Whether torch.compile shortens a run of `compute_seconds` of eager training: the time it saves,
    compute x (1 - 1 / speedup), exceeds the time it takes to compile (config/costs.py states both figures)."""
    return compute_seconds * (1 - 1 / speedup) > compile_seconds


def _positive(name: str, value: object, integer: bool = False) -> float:
    """`value` as a positive finite number, else ValueError naming the parameter (the guard is never fooled)."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} is not a number") from None
    if not math.isfinite(number) or number <= 0 or (integer and number != int(number)):
        raise ValueError(f"{name}={value!r} must be a positive {'whole number' if integer else 'number'}")
    return number


def cost_model_document(
    hardware: list[Hardware],
    job: JobTerms,
    per_device_train_batch_size: int | str,
    gradient_accumulation_steps: int,
    gradient_bytes: int,
    per_device_batch_cap: int = 32,
) -> dict[str, Any]:
    """The cost model run_estimate reads (JSON-serialisable; config/costs.py `cost_model` builds it from the
    settings): each allowed type's facts (GPU memory included), a FineTune job's start-up terms and the loop's
    batch settings ("auto": sized per type by qa/memory.py up to `per_device_batch_cap`, as train.py does)."""
    return {
        "hardware": {h.instance_type: h.facts() for h in hardware},
        "job": asdict(job),
        "per_device_train_batch_size": per_device_train_batch_size,
        "per_device_batch_cap": per_device_batch_cap,
        "gradient_accumulation_steps": gradient_accumulation_steps,
        "gradient_bytes": gradient_bytes,
    }


def resolved_batch(cost_model: Mapping, facts: Mapping, model: ModelShape, longest: int) -> int:
    """The per-device batch of a job on the type of `facts`: the configured number, or for "auto" what train.py
    picks on that GPU: qa/memory.py for the longest training feature, 16-bit activations unless gradients go
    in fp32 (precision "no")."""
    from qa.memory import per_device_batch  # qa/memory.py imports this module

    configured = cost_model["per_device_train_batch_size"]
    if configured != "auto":
        return int(configured)
    if facts.get("memory_gb") is None:
        raise ValueError("the cost model has no GPU memory for this type: cannot size an 'auto' batch")
    activation_bytes = int(cost_model.get("gradient_bytes", 2))
    cap = int(cost_model.get("per_device_batch_cap", 32))
    return per_device_batch(model, float(facts["memory_gb"]), longest, cap, activation_bytes)


def run_estimate(
    cost_model: Mapping,
    model_config: Mapping,
    train_lengths: Mapping[int, int],
    validation_lengths: Mapping[int, int],
    instance_type: str,
    instance_count: int,
    epochs: float,
) -> dict:
    """The cost guard's estimate of one FineTune job: what EstimateTrainingCost returns as EstimatedCostUSD.

    cost_model: a cost_model_document (config/costs.py `cost_model(settings)`, passed as JSON).
    model_config: the base model's config.json (its shape).
    train_lengths / validation_lengths: feature length -> count (stats.json's length histograms).
    Returns `training_on_demand_usd`: on-demand list price x instances x billed seconds (start-up included),
    rounded UP to the cent, so never below the estimate; UNKNOWN_COST_USD for a type without price or GPU facts.
    Raises ValueError (one line naming the parameter) for a count or epochs that is not positive.
    """
    count = int(_positive("TrainingInstanceCount", instance_count, integer=True))
    epochs = _positive("Epochs", epochs)
    if "job" not in cost_model:
        raise ValueError("cost_model has no 'job' start-up terms: build it with config.costs.cost_model(settings)")
    facts = cost_model["hardware"].get(instance_type)
    if facts is None or facts.get("usd_per_hour") is None:  # no price or GPU facts in the project's tables
        return {"instance_type": instance_type, "training_on_demand_usd": UNKNOWN_COST_USD}
    model = ModelShape.from_config(model_config)
    train = {int(n): int(c) for n, c in train_lengths.items()}
    workload = Workload(
        model=model,
        train_lengths=train,
        validation_lengths={int(n): int(c) for n, c in validation_lengths.items()},
        epochs=epochs,
        per_device_batch=resolved_batch(cost_model, facts, model, max(train, default=REFERENCE_SEQUENCE_LENGTH)),
        gradient_accumulation_steps=int(cost_model.get("gradient_accumulation_steps", 1)),
        gradient_bytes=int(cost_model.get("gradient_bytes", 2)),
    )
    hardware = Hardware.from_dict(instance_type, facts)
    job = training_job(workload, hardware, JobTerms.from_dict(cost_model["job"]), count)
    cost = job.on_demand_usd
    assert cost is not None and cost > 0  # start-up alone bills > 0 on every instance
    return {
        "instance_type": instance_type,
        "instance_count": count,
        "epochs": epochs,
        "training_tokens": workload.tokens,
        "mfu": round(job.step.mfu, 4),
        "data_parallel_efficiency": round(job.step.efficiency, 4),
        "billed_seconds_per_instance": round(job.billed_seconds, 1),
        "training_seconds": round(job.phases["training"], 1),
        "usd_per_instance_hour": facts["usd_per_hour"],
        "training_on_demand_usd": math.ceil(cost * 100) / 100,
    }
