"""Prices and throughput references for the cost estimate (`tools/estimate.py`, the pipeline's cost guard).

LIST PRICES, not what an account pays (savings plans, private pricing and spot differ). Amazon SageMaker AI
on-demand prices, region us-east-1 (N. Virginia), per instance-hour, "Training" and "Processing" tabs of
https://aws.amazon.com/sagemaker/pricing/ as transcribed on PRICES_AS_OF; they were not re-fetched in the
session that wrote this table (no internet): check them before relying on a figure. The p3 prices agree with
the reference article's figures ($3.825 x its ~4 h = its "$15").

MFU references: NVIDIA's published BERT-large SQuAD v1.1 fine-tuning throughput (sequence length 384, mixed
precision), turned into MFU with the same FLOP count as the estimator (training_code/qa/cost.py):
- V100 16 GB, batch 4 per GPU: 19.46 sequences/s on 1 GPU (NVIDIA DeepLearningExamples, TensorFlow BERT
  README, "NVIDIA DGX-1 (8x V100 16G)", TensorFlow 19.03 NGC container) -> MFU 11.5 %. That table sits among
  the fine-tuning results but its caption names the pre-training script: the weakest of the three sources.
- V100 32 GB, batch 16 per GPU: 52 sequences/s on 1 GPU (DeepLearningExamples, PyTorch BERT README,
  "Fine-tuning NVIDIA DGX-1 With 32G", pytorch:21.11 NGC container) -> MFU 30.8 %.
- A100 80 GB, batch 32 per GPU: 110.5 sequences/s on 1 GPU (same README, "Fine-tuning NVIDIA DGX A100 (8x
  A100 80GB)") -> MFU 26.2 %; used for A100 40 GB too.
- H100: no published figure of the same kind: A100's MFU is assumed (said so in the output).
A measured MFU (bench/results/gpu_throughput.json) replaces the reference for the GPU model it was measured on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from config.instance_types import GPU_MODELS, instance_type

PRICES_AS_OF = "2026-11-30"
PRICE_REGION = "us-east-1"
PRICE_SOURCE = "https://aws.amazon.com/sagemaker/pricing/ (on-demand list prices)"

TRAINING_USD_PER_HOUR: dict[str, float] = {
    "ml.p3.2xlarge": 3.825,
    "ml.p3.8xlarge": 14.688,
    "ml.p3.16xlarge": 28.152,
    "ml.p3dn.24xlarge": 35.894,
    "ml.p4d.24xlarge": 37.688,
    "ml.g5.2xlarge": 1.515,
}
PROCESSING_USD_PER_HOUR: dict[str, float] = {
    "ml.m5.4xlarge": 0.922,
    "ml.g5.2xlarge": 1.515,
}


@dataclass(frozen=True)
class ThroughputReference:
    """A published training throughput of BERT-large on SQuAD (sequence length 384) on one GPU."""

    sequences_per_second: float
    source: str


# GPU model (config.instance_types.GPU_MODELS) -> reference; see the module docstring for the sources.
THROUGHPUT_REFERENCES: dict[str, ThroughputReference] = {
    "V100": ThroughputReference(19.46, "NVIDIA DeepLearningExamples TF BERT, DGX-1 V100 16G, fp16, batch 4"),
    "V100-32GB": ThroughputReference(52.0, "NVIDIA DeepLearningExamples PyTorch BERT, DGX-1 V100 32G, batch 16"),
    "A100": ThroughputReference(110.5, "NVIDIA DeepLearningExamples PyTorch BERT, DGX A100 80G, batch 32"),
    "A100-80GB": ThroughputReference(110.5, "NVIDIA DeepLearningExamples PyTorch BERT, DGX A100 80G, batch 32"),
}
ASSUMED_LIKE = {"H100": "A100"}  # GPU models without a reference: use this model's MFU (stated in the output)


@dataclass(frozen=True)
class PipelineAssumptions:
    """Times the FLOP model does not cover, stated in every estimate."""

    gpu_job_startup_seconds: float = 300  # provisioning + pulling a ~10 GB training image (assumption)
    cpu_job_startup_seconds: float = 180  # provisioning + image pull of a processing job (assumption)
    preprocess_examples_per_second: float = 1500  # validate + tokenize on ml.m5.4xlarge (assumption)
    spot_savings: tuple[float, float] = (0.3, 0.7)  # managed spot: "up to 90%" per AWS; assumed range


ASSUMPTIONS = PipelineAssumptions()


def measured_mfu(path: Path) -> tuple[str, float] | None:
    """(GPU name, MFU) from bench/gpu_throughput.py's result file, when it exists."""
    if not path.is_file():
        return None
    result = json.loads(path.read_text())
    return str(result["gpu"]), float(result["mfu"])


def hardware_facts(name: str, measured: tuple[str, float] | None = None) -> tuple[dict, str]:
    """The estimator's `Hardware` fields (training_code/qa/cost.py) for training instance type `name`, and where
    its MFU comes from: a measured MFU, or the published throughput the estimator turns into one."""
    facts = instance_type(name)
    gpu = facts.gpu
    if gpu is None or gpu.peak_dense_tflops is None:
        raise KeyError(f"{name} has no GPU with a known peak in config/instance_types.py: cannot estimate")
    fields = {
        "gpus": facts.gpus,
        "peak_tflops": gpu.peak_dense_tflops,
        "network_gbps": facts.network_gbps,
        "gpu_peer_gbs": facts.gpu_peer_gbs,
        "usd_per_hour": TRAINING_USD_PER_HOUR.get(name),
    }
    if measured and gpu.name.split("-")[0] in measured[0]:
        return {**fields, "mfu": measured[1]}, f"MFU measured on {measured[0]} (bench/results/gpu_throughput.json)"
    basis = ASSUMED_LIKE.get(gpu.name, gpu.name)
    reference = THROUGHPUT_REFERENCES.get(basis)
    basis_peak_tflops = GPU_MODELS[basis].peak_dense_tflops
    if reference is None or basis_peak_tflops is None:
        raise KeyError(f"no throughput reference for GPU {gpu.name}: add one to config/costs.py")
    # The reference's sequences/s on the basis GPU, scaled to this GPU's peak: the same MFU.
    scaled = reference.sequences_per_second * gpu.peak_dense_tflops / basis_peak_tflops
    source = reference.source if basis == gpu.name else f"MFU assumed equal to {basis}'s ({reference.source})"
    return {**fields, "reference_sequences_per_second": scaled}, source
