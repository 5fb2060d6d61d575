"""How long fine-tuning takes and what it costs, from model FLOPs, GPU peak throughput and list prices.

    time = training FLOPs / (GPUs x peak dense FLOP/s x MFU x data-parallel efficiency)

- Training FLOPs per token: 6 x matmul parameters (forward + backward) plus the attention scores and values,
  12 x layers x hidden x sequence length (Chowdhery et al. 2022, "PaLM", appendix B: 6N + 12LHQT; the
  same count as bench/gpu_throughput.py). Embedding tables are lookups, not matmuls.
- MFU (model FLOPs utilisation): measured, or a stated reference; the caller says which.
- Data-parallel efficiency: every optimizer step all-reduces the fp32 gradients, a ring inside each instance
  over NVLink/NVSwitch (2(g-1)/g x bytes / peer bandwidth) and a ring across instances over the network
  (2(n-1)/n x bytes / network bandwidth). DDP overlaps the all-reduce with the backward pass (2/3 of the
  compute), so only the communication beyond that is exposed: efficiency = compute / (compute + exposed).

Plain Python: runs in the preprocessing container (the cost guard) and in tools/estimate.py.
"""

from __future__ import annotations

from dataclasses import dataclass

# The model and sequence length of published throughput references (BERT-large, SQuAD, 384 tokens).
BERT_LARGE = {"num_hidden_layers": 24, "hidden_size": 1024, "intermediate_size": 4096, "vocab_size": 30522}
REFERENCE_SEQUENCE_LENGTH = 384
# The estimate when a type has no list price or reference: the cost guard stops rather than waves it through.
UNKNOWN_COST_USD = 1e12
BACKWARD_SHARE = 2 / 3  # of a training step's FLOPs: backward is twice the forward
GRADIENT_BYTES = 4  # fp32 gradients (mixed precision keeps fp32 master weights)


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
    def from_config(cls, config: dict) -> ModelShape:
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
            max_positions=config.get("max_position_embeddings", 512),
            type_vocab_size=config.get("type_vocab_size", 2),
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
    train_lengths: dict[int, int]  # sequence length -> number of features of that length
    validation_lengths: dict[int, int]
    epochs: float
    per_device_batch: int
    gradient_accumulation_steps: int = 1

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


@dataclass(frozen=True)
class Hardware:
    """What the estimate needs to know about one training instance type."""

    instance_type: str
    gpus: int
    peak_tflops: float  # per GPU, dense fp16/bf16
    network_gbps: float
    gpu_peer_gbs: float
    usd_per_hour: float | None  # on-demand list price; None: not in the price table
    mfu: float | None = None  # measured
    reference_sequences_per_second: float | None = None  # else: BERT-large at 384 tokens on one such GPU

    @classmethod
    def from_dict(cls, instance_type: str, facts: dict) -> Hardware:
        return cls(instance_type=instance_type, **facts)

    @property
    def utilisation(self) -> float:
        """MFU: the measured one, or the one implied by the published throughput reference."""
        if self.mfu is not None:
            return self.mfu
        if self.reference_sequences_per_second is None:
            raise ValueError(f"{self.instance_type}: neither a measured MFU nor a throughput reference")
        flops = self.reference_sequences_per_second * ModelShape.from_config(BERT_LARGE).training_flops(
            REFERENCE_SEQUENCE_LENGTH
        )
        return flops / (self.peak_tflops * 1e12)


@dataclass(frozen=True)
class Estimate:
    instance_type: str
    instance_count: int
    gpus: int
    training_seconds: float
    evaluation_seconds: float
    data_parallel_efficiency: float
    usd_per_hour: float | None

    @property
    def gpu_hours(self) -> float:
        return self.training_seconds / 3600 * self.gpus

    @property
    def training_usd(self) -> float | None:
        """On-demand cost of the training job's instances (list price x instances x hours)."""
        if self.usd_per_hour is None:
            return None
        return self.usd_per_hour * self.instance_count * self.training_seconds / 3600


def data_parallel_efficiency(workload: Workload, hardware: Hardware, instance_count: int) -> float:
    """Share of each optimizer step spent computing rather than waiting for the gradient all-reduce."""
    gpus_per_node = hardware.gpus
    step_sequences = workload.per_device_batch * workload.gradient_accumulation_steps
    compute = step_sequences * workload.model.training_flops(round(workload.mean_train_length)) / _flops(hardware)
    size = workload.model.parameters * GRADIENT_BYTES
    communication = 0.0
    if gpus_per_node > 1 and hardware.gpu_peer_gbs:
        communication += 2 * (gpus_per_node - 1) / gpus_per_node * size / (hardware.gpu_peer_gbs * 1e9)
    if instance_count > 1:
        communication += 2 * (instance_count - 1) / instance_count * size / (hardware.network_gbps / 8 * 1e9)
    exposed = max(0.0, communication - BACKWARD_SHARE * compute)
    return compute / (compute + exposed)


def _flops(hardware: Hardware) -> float:
    """Sustained FLOP/s of one GPU."""
    return hardware.peak_tflops * 1e12 * hardware.utilisation


def estimate(workload: Workload, hardware: Hardware, instance_count: int) -> Estimate:
    """Training time (and the GPU time of evaluating the validation set on the same GPU type) and cost."""
    gpus = hardware.gpus * instance_count
    efficiency = data_parallel_efficiency(workload, hardware, instance_count)
    training = workload.training_flops / (gpus * _flops(hardware) * efficiency)
    return Estimate(
        instance_type=hardware.instance_type,
        instance_count=instance_count,
        gpus=gpus,
        training_seconds=training,
        evaluation_seconds=workload.evaluation_flops / _flops(hardware),
        data_parallel_efficiency=efficiency,
        usd_per_hour=hardware.usd_per_hour,
    )


def run_estimate(
    cost_model: dict,
    model_config: dict,
    train_lengths: dict[int, int],
    validation_lengths: dict[int, int],
    instance_type: str,
    instance_count: int,
    epochs: float,
) -> dict:
    """The estimate of one pipeline run, as preprocess.py writes it into stats.json (the cost guard reads
    `training_on_demand_usd`). `cost_model` is built from the project settings by pipeline_steps:
    {"hardware": {instance type: Hardware fields}, "per_device_train_batch_size", "gradient_accumulation_steps"}."""
    facts = cost_model["hardware"].get(instance_type)
    if facts is None:  # no GPU peak or throughput reference in the project's tables
        return {"instance_type": instance_type, "training_on_demand_usd": UNKNOWN_COST_USD}
    hardware = Hardware.from_dict(instance_type, facts)
    workload = Workload(
        model=ModelShape.from_config(model_config),
        train_lengths=train_lengths,
        validation_lengths=validation_lengths,
        epochs=epochs,
        per_device_batch=cost_model["per_device_train_batch_size"],
        gradient_accumulation_steps=cost_model.get("gradient_accumulation_steps", 1),
    )
    result = estimate(workload, hardware, instance_count)
    return {
        "instance_type": instance_type,
        "instance_count": instance_count,
        "epochs": epochs,
        "training_tokens": workload.tokens,
        "training_flops": workload.training_flops,
        "mfu": round(hardware.utilisation, 4),
        "data_parallel_efficiency": round(result.data_parallel_efficiency, 4),
        "training_seconds": round(result.training_seconds, 1),
        "gpu_hours": round(result.gpu_hours, 3),
        "usd_per_instance_hour": hardware.usd_per_hour,
        "training_on_demand_usd": UNKNOWN_COST_USD if result.training_usd is None else result.training_usd,
    }
