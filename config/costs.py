"""Every figure of the cost and time estimate (`make estimate`, the EstimateTrainingCost cost guard), cited.

The arithmetic is in training_code/qa/cost.py (stdlib only: it also runs in the Lambda function); this module
holds the constants and builds `cost_model(settings)`, the JSON the cost guard receives. Each value says
where it comes from: an AWS page, a build file, a published job log or benchmark, a measurement in this
repository (bench/RESULTS.md), or "assumption" (no source found; the estimate states those as such).

LIST PRICES, not what an account pays (savings plans, private pricing and spot differ): Amazon SageMaker AI
on-demand, us-east-1 (N. Virginia), per instance-hour, "Training" and "Processing" tabs of
https://aws.amazon.com/sagemaker/pricing/ as transcribed on PRICES_AS_OF; they were not re-fetched in the
session that wrote this table (no internet): check them before relying on a figure. The p3 prices agree with
the seed article's figures ($3.825 x its ~4 h = its "$15").

Billing: "You are billed for the time interval between [TrainingStartTime] and the value of TrainingEndTime.
The start time in CloudWatch Logs might be later than this time. The difference is due to the time it takes
to download the training data and to the size of the training container"; TrainingEndTime is "after model
artifacts are uploaded"; BillableTimeInSeconds x InstanceCount is what a distributed job bills
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeTrainingJob.html). Provisioning
("Starting - Preparing the instances for training") comes before TrainingStartTime: waited for, not billed.
Published job logs agree: huggingface/blog PR #96 (2 nodes) bills 2882 s = 2 x 1441 s, "the duration from
'Downloading the training image' to 'Training job completed'". Processing jobs are billed the same way (by
the second, per instance, https://aws.amazon.com/sagemaker/pricing/ "Processing"); Lambda by duration x
memory plus requests (https://aws.amazon.com/lambda/pricing/).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qa.claim_validation import CLAIM_MAX_DATASET_MB, CLAIM_VALIDATION_MEMORY_MB, MEASURED_SQUAD_JSON_MB_S
from qa.cost import BERT_LARGE, Hardware, JobTerms, ModelShape, compile_pays, cost_model_document, run_estimate
from qa.memory import per_device_batch
from qa.recipe import RECIPE_PER_DEVICE_BATCH, recipe_learning_rate

from config.instance_types import GPU_MODELS, INSTANCE_TYPES, instance_type

if TYPE_CHECKING:
    from config.settings import Settings

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
    "ml.m5.large": 0.115,
    "ml.m5.4xlarge": 0.922,
    "ml.g5.2xlarge": 1.515,
}


def training_usd_per_hour(settings: Settings, name: str) -> float | None:
    """The on-demand price per instance-hour FineTune on `name` is estimated at: training.usd_per_hour for the
    configured training.instance_type when set (the operator's own price: their region's, or one this table
    lacks), else the list price above; None when neither is known."""
    training = settings.training
    if name == training.instance_type and training.usd_per_hour is not None:
        return training.usd_per_hour
    return TRAINING_USD_PER_HOUR.get(name)


def list_price_usd(kind: str, instance_type: str, instance_count: int, billable_seconds: float) -> float | None:
    """A job's billed seconds x instances at the on-demand list price above ("training" or "processing" jobs);
    None for a type not in the table
    (for spot, what the billed time would have cost on demand: spot prices vary and are not in the table)."""
    price = (TRAINING_USD_PER_HOUR if kind == "training" else PROCESSING_USD_PER_HOUR).get(instance_type)
    return None if price is None else price * instance_count * billable_seconds / 3600


# AWS Lambda, x86, us-east-1: $0.0000166667 per GB-second and $0.20 per 1M requests
# (https://aws.amazon.com/lambda/pricing/).
LAMBDA_USD_PER_GB_SECOND = 0.0000166667
LAMBDA_USD_PER_REQUEST = 0.20 / 1e6
# Managed spot: AWS says "up to 90%" off on-demand (https://aws.amazon.com/sagemaker/pricing/, "Managed Spot
# Training"); the discount varies by type, zone and hour. Stated assumption: 70 % (range shown: 50-80 %).
SPOT_DISCOUNT = 0.70
SPOT_DISCOUNT_RANGE = (0.50, 0.80)
# Waiting for spot capacity (not billed, bounded by MaxWaitTimeInSeconds - MaxRuntimeInSeconds): no published
# distribution; stated as a range (assumption), added to the wall time only.
SPOT_WAIT_MINUTES_RANGE = (0.0, 30.0)

# --- Start-up of a SageMaker job -----------------------------------------------------------------------------
# Published job logs (job start -> user script), seconds:
#   NVIDIA-Merlin/Transformers4Rec#794 (2024-12-09, GPU training job): Starting 22:15:03, Preparing the instances
#     22:15:17, Downloading input data 22:15:52, Downloading the training image 22:16:08, image download
#     completed 22:18:59, toolkit running 22:19:09: provisioning 49 s, input 16 s, image 171 s, start 10 s.
#   aws-samples/amazon-sagemaker-tensorflow-object-detection-api#35 (2023-04-15, ml.g4dn.2xlarge): Starting
#     10:29:57, Preparing 10:30:13, Downloading input data 10:30:55, image 10:31:20, image download completed
#     10:32:51, "Invoking user script" 10:33:19: provisioning 58 s, input 25 s, image 91 s, start 28 s.
#   huggingface/blog PR #96 (2021-04-01, HF training DLC, 2 x ml.p3dn.24xlarge): image download 149 s.
PROVISIONING_SECONDS = (49 + 58) / 2  # mean of the two logs above
CONTAINER_START_SECONDS = (10 + 28) / 2  # image ready -> user script, mean of the two logs above
# Image sizes: the DLC build files' `image_size_baseline` (MB; the build fails above 1.2x it):
#   aws/deep-learning-containers huggingface/pytorch/training/buildspec-2-7.yml: 25000 (HF PyTorch 2.7.1 GPU,
#   the newest HF training build file found; the PyTorch 2.9 GPU base is 28000 in pytorch/training/
#   buildspec-2-9-sm.yml, so 25000 is the low side for the 2.9.0 HF image);
#   pytorch/training/buildspec-2-9-sm.yml: 7200 (PyTorch 2.9.0 CPU, `2.9.0-cpu-py312-ubuntu22.04-sagemaker`): the
#   size class of a CPU DLC, used for ValidateAndTokenize's CPU image. The HF PyTorch inference CPU image the
#   step graph chose (2.6.0, py312) has its own row in huggingface/pytorch/inference/buildspec-2-6-0-
#   transformers-4-53-1.yml, 21000, the same figure as its GPU row beside it: a CI ceiling, not a size; the
#   estimate prints what the pipeline would take if the image were that large (CPU_IMAGE_CEILING_MB).
GPU_TRAINING_IMAGE_MB = 25_000
CPU_IMAGE_MB = 7_200
CPU_IMAGE_CEILING_MB = 21_000
# Pull rate: 25,000 MB in Transformers4Rec#794's 171 s (the issue's pairing of the ~25 GB image with the
# ~2m50s pull; that log's own image size is not printed). Cross-checks: PR #96's 149 s and #35's 91 s.
IMAGE_PULL_MB_PER_SECOND = round(GPU_TRAINING_IMAGE_MB / 171, 1)
# The seed article's image (HF DLC, transformers 4.6, PyTorch 1.7): the same generation as PR #96's: 149 s.
SEED_IMAGE_PULL_SECONDS = 149.0
# train.py's own start: imports of torch/transformers/accelerate, process group, loading 1.3 GB of weights
# onto 8 GPUs (assumption; the jobs log it as the gap between "Invoking user script" and the first step).
TRAINING_SCRIPT_SETUP_SECONDS = 30.0
PREPROCESS_SCRIPT_SETUP_SECONDS = 10.0  # imports (assumption)
# S3 -> instance for File-mode channels (assumption; SageMaker publishes no rate; #794 downloaded its input
# in 16 s, size not printed).
S3_DOWNLOAD_MB_PER_SECOND = 200.0
# SageMaker tars and gzips /opt/ml/model into model.tar.gz, then uploads it (assumption: one core of gzip on
# fp32 weights, which barely compress). PR #96 shows how long this can get: 11 min "Uploading", its
# output dir holding the Trainer's checkpoints; train.py writes checkpoints elsewhere (/opt/ml/checkpoints).
ARCHIVE_MB_PER_SECOND = 50.0

# --- Steps that start no instance ----------------------------------------------------------------------------
# SageMaker Pipelines schedules each step and polls its job; it publishes no figure for that overhead
# (assumption: 5 s per step on the critical path, conditions and Fail steps included).
PIPELINE_STEP_SECONDS = 5.0
# The Lambda steps (function duration in seconds, memory MB): claim + copy of the data files (server-side
# copy_object), the estimate, and the record step (streams model.tar.gz for its SHA-256 at an assumed
# 100 MB/s, so its duration follows the model size). Assumptions; the functions log their duration
# (CloudWatch REPORT lines).
CLAIM_FUNCTION = (3.0, 512)
ESTIMATE_FUNCTION = (1.0, 512)
RECORD_FUNCTION_MB = 1024
LAMBDA_HASH_MB_PER_SECOND = 100.0
REGISTER_SECONDS = 2.0  # CreateModelPackage: an API call (assumption)

# --- Tokenization --------------------------------------------------------------------------------------------
# Measured (bench/RESULTS.md section 2): read + validate + tokenize + write, 612 examples/s on 2 vCPUs of this
# VM = 306 per vCPU. A job's tokenizer processes scale with its vCPUs (ml.m5.4xlarge: 16; ml.p4d.24xlarge: 96;
# ml.p3.16xlarge: 64, https://aws.amazon.com/sagemaker/pricing/ instance details) at an assumed 80 %.
TOKENIZE_EXAMPLES_PER_VCPU_SECOND = 612 / 2
TOKENIZE_PARALLEL_EFFICIENCY = 0.8
# g5, g6, g6e: 4 vCPUs per "xlarge" unit of the size name (xlarge 4 ... 48xlarge 192; EC2 instance type specs,
# https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html).
VCPUS = {"ml.m5.large": 2, "ml.m5.4xlarge": 16, "ml.p3.2xlarge": 8, "ml.p3.8xlarge": 32, "ml.p3.16xlarge": 64,
         "ml.p3dn.24xlarge": 96, "ml.p4d.24xlarge": 96, "ml.p4de.24xlarge": 96, "ml.p5.48xlarge": 192,
         **{f"ml.{family}.{size}xlarge": 4 * int(size or 1) for family in ("g5", "g6", "g6e")
            for size in ("", "2", "4", "8", "12", "16", "24", "48")}}  # fmt: skip

# --- Where the dataset is validated and tokenized (processing.tokenize_in), warm pools: tools/estimate.py -------
# tokenize_in=fine_tune: ClaimManifest (a Lambda function) streams and validates every record, FineTune tokenizes
# on its node's vCPUs (TOKENIZE_EXAMPLES_PER_VCPU_SECOND x VCPUS above, before training: nothing runs beside it).
# The claim function validates at the slower format's rate measured on one core (SQuAD JSON; qa/claim_validation.py
# says how), up to the claim's own size limit (qa/claim_validation.py CLAIM_MAX_DATASET_MB: a third of its timeout at
# that rate, inside Lambda's 15 minutes, 10,240 MB of memory and of ephemeral storage:
# https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html); above it the estimate names the CPU job.
CLAIM_VALIDATE_MB_PER_SECOND = MEASURED_SQUAD_JSON_MB_S
CLAIM_VALIDATE_MAX_DATASET_MB = float(CLAIM_MAX_DATASET_MB)
CLAIM_VALIDATE_FUNCTION_MB = CLAIM_VALIDATION_MEMORY_MB
# Lambda's own ceiling on one invocation (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
LAMBDA_MAX_SECONDS = 900.0
# Warm pools (training.keep_alive_seconds): a matching job started inside the window runs on the kept instances,
# "reducing the time spent provisioning resources"; what the pool keeps is billed, ResourceRetainedBillableTimeIn
# Seconds x InstanceCount (https://docs.aws.amazon.com/sagemaker/latest/dg/train-warm-pools.html, https://docs.
# aws.amazon.com/sagemaker/latest/APIReference/API_WarmPoolStatus.html). Assumptions: kept time is billed at the
# training list price above (no separate warm pool price is published), and a reused instance also skips the
# image pull (the same image is already on it; AWS's best-practices post on warm pools reports subsequent jobs do
# not incur the cold start: https://aws.amazon.com/blogs/machine-learning/best-practices-for-amazon-sagemaker-
# training-managed-warm-pools/). The window the "what if" row assumes when training.keep_alive_seconds is 0:
WHAT_IF_KEEP_ALIVE_SECONDS = 600
# The physical floor's sources (the estimate prints them beside each term).
PROVISIONING_SOURCE = (
    "published job logs NVIDIA-Merlin/Transformers4Rec#794, "
    "aws-samples/amazon-sagemaker-tensorflow-object-detection-api#35"
)
IMAGE_PULL_SOURCE = (
    "aws/deep-learning-containers huggingface/pytorch/training/buildspec-2-7.yml image_size_baseline at the pull "
    "rate of Transformers4Rec#794"
)
PEAK_SOURCE = "NVIDIA data sheets, config/instance_types.py"

# --- GPU throughput ------------------------------------------------------------------------------------------
# MFU references: NVIDIA's published BERT-large SQuAD v1.1 fine-tuning throughput (sequence length 384, mixed
# precision), turned into MFU with the same FLOP count as the estimator (training_code/qa/cost.py):
# - V100 16 GB, batch 4 per GPU: 19.46 sequences/s on 1 GPU (NVIDIA DeepLearningExamples, TensorFlow BERT
#   README, "NVIDIA DGX-1 (8x V100 16G)", TensorFlow 19.03 NGC container) -> MFU 11.5 %. That table sits among
#   the fine-tuning results but its caption names the pre-training script: the weakest of the three sources.
# - V100 32 GB, batch 16 per GPU: 52 sequences/s on 1 GPU (DeepLearningExamples, PyTorch BERT README,
#   "Fine-tuning NVIDIA DGX-1 With 32G", pytorch:21.11 NGC container) -> MFU 30.8 %.
# - A100 80 GB, batch 32 per GPU: 110.5 sequences/s on 1 GPU (same README, "Fine-tuning NVIDIA DGX A100 (8x
#   A100 80GB)") -> MFU 26.2 %; used for A100 40 GB too.
# - H100: no published figure of the same kind: A100's MFU is assumed (said so in the output).
# A measured MFU (bench/results/gpu_throughput.json) replaces the reference for the GPU model it was measured on.


@dataclass(frozen=True)
class ThroughputReference:
    """A published training throughput of BERT-large on SQuAD (sequence length 384) on one GPU."""

    sequences_per_second: float
    source: str


THROUGHPUT_REFERENCES: dict[str, ThroughputReference] = {
    "V100": ThroughputReference(19.46, "NVIDIA DeepLearningExamples TF BERT, DGX-1 V100 16G, fp16, batch 4"),
    "V100-32GB": ThroughputReference(52.0, "NVIDIA DeepLearningExamples PyTorch BERT, DGX-1 V100 32G, batch 16"),
    "A100": ThroughputReference(110.5, "NVIDIA DeepLearningExamples PyTorch BERT, DGX A100 80G, batch 32"),
    "A100-80GB": ThroughputReference(110.5, "NVIDIA DeepLearningExamples PyTorch BERT, DGX A100 80G, batch 32"),
}
# - A10G, L4, L40S: no published figure of the same kind either; A100's MFU is assumed for them too. Their
#   memory bandwidth (config/instance_types.py) still sets the step's fixed costs, so a small batch on L4's
#   300 GB/s spends a larger share of its step on them.
ASSUMED_LIKE = {"H100": "A100", "A10G": "A100", "L4": "A100", "L40S": "A100"}  # use this model's MFU (stated)

# All-reduce bus bandwidth, GB/s, measured with nccl-tests all_reduce_perf (1 GiB, float) on 1-4 p4d.24xlarge
# over EFA (NVIDIA/nccl#527, 2022-07-25): 230.77, 57.17, 31.77, 29.61. Other types: no measurement of the same
# kind was found; the p4d figures are scaled by the NVLink bandwidth inside a node and by the network
# bandwidth across nodes (config/instance_types.py: NVSwitch 600 GB/s, 400 Gbit/s on p4d) - an assumption.
P4D_BUSBW_GBS = {1: 230.77, 2: 57.17, 3: 31.77, 4: 29.61}
P4D_PEER_GBS, P4D_NETWORK_GBPS = 600.0, 400.0
# GPUs without NVLink (the multi-GPU g5, g6, g6e sizes) exchange gradients over PCIe 4.0 x16: 16 GT/s x 16 lanes,
# 128b/130b encoding, ~31.5 GB/s per direction (PCI-SIG, PCI Express Base Specification 4.0). Assumption: the
# p4d bus bandwidth scaled by 31.5 / 600 (no nccl-tests figure for these types was found offline).
PCIE_GEN4_X16_GBS = 31.5
# DDP overlaps the all-reduce with the backward pass only partly: buckets become ready one by one, and NCCL's
# kernels share the SMs and memory bandwidth with the backward kernels. Share of the backward that hides
# communication: assumption 0.5 (0: none, 1: perfect; bench/RESULTS.md shows both ends).
ALLREDUCE_OVERLAP = 0.5
DDP_BUCKET_CAP_MB = 100.0  # training_code/qa/distributed.py
# Inter-container traffic encryption (training.encrypt_inter_container_traffic, on by default) "can increase
# training time, especially if you are using distributed deep learning algorithms"; it "doesn't affect training
# jobs with a single compute instance", and for several "the effect on training time depends on the amount of
# communication between compute instances" (ENCRYPTION_SOURCE). AWS publishes no figure. Assumption: the
# all-reduce across instances takes twice as long when it is on.
ENCRYPTION_SOURCE = "https://docs.aws.amazon.com/sagemaker/latest/dg/train-encrypt.html"
ENCRYPTED_INTERNODE_ALLREDUCE_SLOWDOWN = 2.0

# --- Checkpoints ---------------------------------------------------------------------------------------------
# Young's interval sqrt(2 x C x MTBF) (J. W. Young, "A first order approximation to the optimum checkpoint
# interval", CACM 17(9), 1974; Daly 2006 refines it with higher-order terms that matter only when C is
# comparable to MTBF). C: one BERT-large checkpoint (4.01 GB), 24.2 s measured (bench/RESULTS.md section 6).
# MTBF: spot interruptions; the EC2 Spot Instance Advisor reports the monthly interruption frequency in bands,
# the highest ">20%" (https://aws.amazon.com/ec2/spot/instance-advisor/); SageMaker publishes none for managed
# spot. Assumption: the worst band, 0.2 interruptions per instance-month (730 h), independent per instance.
CHECKPOINT_SECONDS = 24.2
SPOT_INTERRUPTIONS_PER_INSTANCE_MONTH = 0.2
HOURS_PER_MONTH = 730.0


def young_daly_minutes(instance_count: int, checkpoint_seconds: float = CHECKPOINT_SECONDS) -> float:
    """The checkpoint interval that minimises expected lost time: sqrt(2 x C x MTBF of the whole cluster)."""
    mtbf_seconds = HOURS_PER_MONTH * 3600 / SPOT_INTERRUPTIONS_PER_INSTANCE_MONTH / instance_count
    return math.sqrt(2 * checkpoint_seconds * mtbf_seconds) / 60


def measured_mfu(path: Path) -> tuple[str, float] | None:
    """(GPU name, MFU) from bench/gpu_throughput.py's result file, when it exists."""
    if not path.is_file():
        return None
    result = json.loads(path.read_text())
    return str(result["gpu"]), float(result["mfu"])


def hardware_facts(
    name: str, measured: tuple[str, float] | None = None, usd_per_hour: float | None = None
) -> tuple[Hardware, str]:
    """The estimator's `Hardware` (training_code/qa/cost.py) of training instance type `name`, and where its MFU
    comes from: a measured MFU, or the published throughput the estimator turns into one. `usd_per_hour`: the
    price to use (training_usd_per_hour); default: the list price, None where the table has none."""
    facts = instance_type(name)
    gpu = facts.gpu
    if gpu is None or gpu.peak_dense_tflops is None:
        raise KeyError(f"{name} has no GPU with a known peak in config/instance_types.py: cannot estimate")
    # The p4d single-node bus bandwidth scaled by the GPUs' peer bandwidth: NVLink/NVSwitch, else PCIe.
    intra = P4D_BUSBW_GBS[1] * (facts.gpu_peer_gbs or PCIE_GEN4_X16_GBS) / P4D_PEER_GBS if facts.gpus > 1 else 0.0
    across = facts.network_gbps / P4D_NETWORK_GBPS
    hardware = Hardware(
        instance_type=name,
        gpus=facts.gpus,
        peak_tflops=gpu.peak_dense_tflops,
        usd_per_hour=usd_per_hour if usd_per_hour is not None else TRAINING_USD_PER_HOUR.get(name),
        busbw_gbs={
            "1": round(intra, 2),
            **{str(n): round(bw * across, 2) for n, bw in P4D_BUSBW_GBS.items() if n > 1},
        },
        reference_batch=REFERENCE_BATCH.get(ASSUMED_LIKE.get(gpu.name, gpu.name), RECIPE_PER_DEVICE_BATCH),
        fixed_step_seconds=round(fixed_step_seconds(gpu.memory_bandwidth_gbs), 6),
        memory_gb=gpu.memory_gb,
    )
    if measured and gpu.name.split("-")[0] in measured[0]:
        source = f"MFU measured on {measured[0]} (bench/results/gpu_throughput.json)"
        return replace(hardware, mfu=measured[1]), source
    basis = ASSUMED_LIKE.get(gpu.name, gpu.name)
    reference = THROUGHPUT_REFERENCES.get(basis)
    basis_peak_tflops = GPU_MODELS[basis].peak_dense_tflops
    if reference is None or basis_peak_tflops is None:
        raise KeyError(f"no throughput reference for GPU {gpu.name}: add one to config/costs.py")
    # The reference's sequences/s on the basis GPU, scaled to this GPU's peak: the same MFU.
    scaled = reference.sequences_per_second * gpu.peak_dense_tflops / basis_peak_tflops
    source = reference.source if basis == gpu.name else f"MFU assumed equal to {basis}'s ({reference.source})"
    return replace(hardware, reference_sequences_per_second=scaled), source


def training_job_terms(encrypted: bool) -> JobTerms:
    """The start-up and I/O terms of a FineTune job on the GPU training image; `encrypted`: with inter-container
    traffic encryption."""
    return JobTerms(
        provisioning_seconds=PROVISIONING_SECONDS,
        image_mb=GPU_TRAINING_IMAGE_MB,
        image_pull_mb_per_second=IMAGE_PULL_MB_PER_SECOND,
        container_start_seconds=CONTAINER_START_SECONDS,
        script_setup_seconds=TRAINING_SCRIPT_SETUP_SECONDS,
        s3_download_mb_per_second=S3_DOWNLOAD_MB_PER_SECOND,
        archive_mb_per_second=ARCHIVE_MB_PER_SECOND,
        allreduce_overlap=ALLREDUCE_OVERLAP,
        bucket_mb=DDP_BUCKET_CAP_MB,
        internode_allreduce_slowdown=ENCRYPTED_INTERNODE_ALLREDUCE_SLOWDOWN if encrypted else 1.0,
    )


def gradient_bytes(precision: str) -> int:
    """Bytes per gradient on the wire: the loop's NCCL compression hook sends bf16/fp16 (qa/distributed.py)."""
    return 4 if precision == "no" else 2


def cost_model(settings: Settings) -> dict[str, Any]:
    """What the EstimateTrainingCost Lambda passes to qa.cost.run_estimate: the facts of every type the
    TrainingInstanceType parameter accepts (published references only: a local GPU measurement would make the
    definition machine-dependent), the job's start-up terms and the loop's batch settings. JSON-serialisable;
    settings validation guarantees every allowed type has a price and GPU facts."""
    hps = settings.hyperparameters
    return cost_model_document(
        [
            hardware_facts(name, usd_per_hour=training_usd_per_hour(settings, name))[0]
            for name in settings.training_instance_types
        ],
        training_job_terms(settings.training.encrypt_inter_container_traffic),
        hps.per_device_train_batch_size,
        hps.gradient_accumulation_steps,
        gradient_bytes(hps.precision),
        RECIPE_PER_DEVICE_BATCH,
    )


# --- Step model and batch (issue 31) -------------------------------------------------------------------------
# Fixed costs of one optimizer step, independent of the batch: fused AdamW 7.2 ms + gradient clipping 3.1 ms +
# autocast's bf16 weight casts 1.5 ms for BERT-large on an A100 40 GB (bench/RESULTS.md section 6: modelled as
# memory-bound passes over the 334 M parameters at 1.3 TB/s, its assumption A4; not measured). Other GPUs: the
# same bytes at their memory bandwidth (config/instance_types.py), i.e. scaled by 1555 / bandwidth.
FIXED_STEP_SECONDS_A100 = (7.2 + 3.1 + 1.5) / 1000
FIXED_STEP_BANDWIDTH_GBS = 1555.0
# The per-GPU batch each THROUGHPUT_REFERENCES entry was published at (their sources name it): the step model's
# kernel efficiency is calibrated at that batch.
REFERENCE_BATCH = {"V100": 4, "V100-32GB": 16, "A100": 32, "A100-80GB": 32}
# torch.compile, for `hyperparameters.compile` "auto" (qa.cost.compile_pays). Both assumptions: no published
# figure for BERT-large fine-tuning with dynamic shapes was found offline. Speedup: 1.3x, below the ~1.4x
# average training speedup PyTorch's 2.0 announcement reports for its benchmark suites on A100 with AMP
# (https://pytorch.org/get-started/pytorch-2.0/, not re-fetched in this session). Compile time: 90 s for the
# forward and backward graphs of a 24-layer encoder with dynamic=True on one GPU (each rank compiles).
COMPILE_SPEEDUP = 1.3
COMPILE_SECONDS = 90.0


def fixed_step_seconds(memory_bandwidth_gbs: float | None) -> float:
    """The fixed per-step costs on a GPU of this memory bandwidth (the A100's figure when it is unknown)."""
    return FIXED_STEP_SECONDS_A100 * FIXED_STEP_BANDWIDTH_GBS / (memory_bandwidth_gbs or FIXED_STEP_BANDWIDTH_GBS)


def configured_per_device_batch(settings: Settings, name: str) -> int:
    """The per-device batch a job on `name` trains with: the configured number, or "auto" sized by qa/memory.py
    for the configured model (its shape known offline, else the recipe's 32 is assumed) at max_seq_length."""
    hps = settings.hyperparameters
    if hps.per_device_train_batch_size != "auto":
        return hps.per_device_train_batch_size
    facts = INSTANCE_TYPES.get(name)  # an unknown type is refused by the settings validation, not here
    gpu = facts.gpu if facts else None
    shape = KNOWN_SHAPES.get(settings.model.base_model)
    if gpu is None or shape is None:
        return RECIPE_PER_DEVICE_BATCH
    activation_bytes = gradient_bytes(hps.precision)
    model = ModelShape.from_config(shape)
    return per_device_batch(model, gpu.memory_gb, hps.max_seq_length, RECIPE_PER_DEVICE_BATCH, activation_bytes)


def default_learning_rate(settings: Settings) -> float:
    """The LearningRate parameter's default: the configured number, or for "auto" the recipe's (qa/recipe.py) for
    the configured global batch (auto batch x GPUs x instances x accumulation; 1 x p4d: 32 x 8 = 256, 4.6e-5)."""
    hps, training = settings.hyperparameters, settings.training
    if hps.learning_rate != "auto":
        return hps.learning_rate
    facts = INSTANCE_TYPES.get(training.instance_type)
    gpus = max(1, facts.gpus if facts else 1)
    batch = configured_per_device_batch(settings, training.instance_type)
    return recipe_learning_rate(batch * gpus * training.instance_count * hps.gradient_accumulation_steps)


def compile_hyperparameter(settings: Settings) -> str:
    """train.py's --compile: the configured true/false, or for "auto" whether compiling pays for itself on the
    configured instances for the reference workload (its modelled training seconds); "false" when that cannot
    be estimated offline (model shape unknown)."""
    configured = settings.hyperparameters.compile
    if configured != "auto":
        return "true" if configured else "false"
    if settings.model.base_model not in KNOWN_SHAPES:
        return "false"
    seconds = reference_estimate(settings)["training_seconds"]
    return "true" if compile_pays(seconds, COMPILE_SPEEDUP, COMPILE_SECONDS) else "false"


# --- The reference workload: what `make estimate` prices without a DATASET, and what the default cost ceiling
# (limits.default_cost_multiple x this estimate, Settings.default_max_cost_usd) is a multiple of -----------------
# Same shape, different names: the configs of these hub models are known without downloading them.
KNOWN_SHAPES = {
    name: BERT_LARGE
    for name in ("bert-large-uncased-whole-word-masking", "bert-large-uncased", "bert-large-cased-whole-word-masking")
}
# SQuAD v1.1: 87,599 train / 10,570 validation questions (Rajpurkar et al. 2016, the
# published train-v1.1.json / dev-v1.1.json, 30.3 + 4.9 MB); 88,729 / 10,822 features at 384/128 (Hugging Face
# course, chapter 7 "Question answering"): so 1,130 train examples overflow one window, and at least that many
# features are full 384-token windows. Mean feature length with dynamic padding: ~200 tokens (issue 20; the
# bundled tokenizer gives WORDPIECES_PER_WORD on the sample data, see bench/RESULTS.md); the remaining
# features are set to the length that makes the mean 200.
SQUAD_TRAIN_EXAMPLES, SQUAD_VALIDATION_EXAMPLES = 87_599, 10_570
SQUAD_TRAIN_FEATURES, SQUAD_VALIDATION_FEATURES = 88_729, 10_822
SQUAD_MEAN_FEATURE_TOKENS = 200
SQUAD_MB = 30.3 + 4.9
SQUAD_SOURCE = "SQuAD v1.1 (88,729 train / 10,822 validation features at 384/128, mean window ~200 tokens)"


def squad_lengths(features: int, examples: int, max_seq_length: int, padded: bool) -> dict[int, int]:
    """SQuAD v1.1's feature lengths; every feature is `max_seq_length` long when batches are padded to it."""
    if padded:
        return {max_seq_length: features}
    full = features - examples
    rest = round((SQUAD_MEAN_FEATURE_TOKENS * features - max_seq_length * full) / (features - full))
    return {max_seq_length: full, rest: features - full}


def reference_training_usd(settings: Settings) -> float:
    """The cost guard's estimate (qa.cost.run_estimate, as EstimateTrainingCost computes it) of FineTune on the
    configured choice (training.instance_type x instance_count, hyperparameters.epochs) for the reference workload,
    SQuAD v1.1 on the configured base model. KeyError when that model's shape is not known offline."""
    return float(reference_estimate(settings)["training_on_demand_usd"])


def reference_estimate(settings: Settings) -> dict:
    """qa.cost.run_estimate of the reference workload on the configured choice (see reference_training_usd)."""
    if settings.model.base_model not in KNOWN_SHAPES:
        raise KeyError(settings.model.base_model)
    hps, training = settings.hyperparameters, settings.training
    return run_estimate(
        cost_model(settings),
        KNOWN_SHAPES[settings.model.base_model],
        squad_lengths(SQUAD_TRAIN_FEATURES, SQUAD_TRAIN_EXAMPLES, hps.max_seq_length, padded=False),
        squad_lengths(SQUAD_VALIDATION_FEATURES, SQUAD_VALIDATION_EXAMPLES, hps.max_seq_length, padded=False),
        training.instance_type,
        training.instance_count,
        hps.epochs,
    )
