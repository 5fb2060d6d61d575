"""Facts about SageMaker instance types that AWS enforces but no API shape encodes.

One table, read by the settings validation, the pipeline-definition checks and the local runner. A type that
is not listed here cannot be configured: every rule below must be decidable for every type a job can run on.

Sources (checked 2026-11-30). The g5, g6 and g6e rows were added 2026-12-02 in a session without internet, from
these pages as their author knew them; the g6e network figures agree with a stored copy of the EC2 table, the
other figures were not re-fetched: check them before relying on one.
- Local NVMe instance storage and its size, EFA, network bandwidth: EC2 instance type specs,
  https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html (p4d, p4de, p5, g4dn, g5, g6, g6e) and
  https://docs.aws.amazon.com/ec2/latest/instancetypes/pg.html (p3, p3dn: previous generation). Every g5, g6
  and g6e size has local NVMe (250 GB on xlarge up to 7,600 GB on 48xlarge), so none takes a volume key;
  EFA on their 8xlarge, 12xlarge, 16xlarge, 24xlarge and 48xlarge sizes only.
  SageMaker's rules on local storage: "You can't request a VolumeKmsKeyId when using an instance type with
  local storage" (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceConfig.html and
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ProcessingClusterConfig.html); for processing
  also "You can't request a VolumeSizeInGB greater than the total size of the local instance storage"
  (training uses the NVMe capacity as it is and provisions no EBS volume).
- GPUs per instance and their architecture: https://aws.amazon.com/ec2/instance-types/ (P3, P4, P5, G4, G5),
  https://aws.amazon.com/ec2/instance-types/g6/ (L4), https://aws.amazon.com/ec2/instance-types/g6e/ (L40S).
  A10G: Ampere (sm_86); L4 and L40S: Ada Lovelace (sm_89); H100: Hopper (sm_90). bfloat16 needs compute
  capability 8.0 (Ampere) or newer; V100 (Volta) and T4 (Turing) lack it. The image rule (config/images.py)
  only concerns Volta: both training images' PyTorch builds carry sm_86 and sm_90 kernels (TORCH_CUDA_ARCH_LIST
  7.5;8.0;8.6;9.0;10.0;12.0 for CUDA 13.0, 5.0-9.0 with 8.6 and 9.0 for CUDA 12.4,
  https://github.com/pytorch/pytorch/blob/main/.ci/manywheel/build_cuda.sh), and a cubin built for 8.6 runs on
  8.9 ("a cubin generated for compute capability X.y will only execute on devices of compute capability X.z
  where z >= y", https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#binary-compatibility).
- SMDDP: https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-data-parallel-support.html
  (ml.p4d.24xlarge, ml.p4de.24xlarge; ml.p3dn.24xlarge without further optimisation of its collectives). No g5,
  g6, g6e or p5 type is listed: smddp is refused there.
- GPU model, memory and peak dense (no sparsity) fp16/bf16 tensor TFLOP/s per GPU (`GPU_MODELS`): NVIDIA data
  sheets: V100 SXM2 125 (https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf),
  T4 65 (https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf),
  A100 312 (https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf),
  H100 SXM 989 (https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet),
  L4 121 (the data sheet's 242 "with sparsity" halved; https://www.nvidia.com/en-us/data-center/l4/),
  L40S 362.05 (https://www.nvidia.com/en-us/data-center/l40s/). Memory bandwidth (GB/s, the same data sheets):
  V100 SXM2 900, T4 320, A100 40GB SXM 1555, A100 80GB SXM 2039, H100 SXM 3350, L4 300, L40S 864.
  A10G (G5) is an AWS-specific part: neither NVIDIA nor AWS (https://aws.amazon.com/ec2/instance-types/g5/)
  publishes its tensor peak or bandwidth. ASSUMPTION: 70 TFLOP/s dense fp16/bf16 and 600 GB/s, the figures
  third-party comparisons give (https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/: the
  same 24 GB and 600 GB/s as the A10, less tensor compute; the number itself was not checked against an
  NVIDIA document in this session). The A10's own data sheet gives 125 (its upper bound); 70 is the
  conservative choice: the estimate then errs towards longer runs on G5.
  GPU memory per GPU and GPU model per instance: https://aws.amazon.com/ec2/instance-types/p3/,
  https://aws.amazon.com/ec2/instance-types/p4/, https://aws.amazon.com/ec2/instance-types/p5/,
  https://aws.amazon.com/ec2/instance-types/g4/, https://aws.amazon.com/ec2/instance-types/g5/,
  https://aws.amazon.com/ec2/instance-types/g6/, https://aws.amazon.com/ec2/instance-types/g6e/.
- Network bandwidth (Gbit/s) and GPU peer-to-peer bandwidth (NVLink/NVSwitch, GB/s) per instance: the same
  AWS pages (p3.16xlarge 25 Gbit/s and NVLink 300 GB/s, p3dn 100 Gbit/s, p4d/p4de 400 Gbit/s EFA and
  NVSwitch 600 GB/s, p5 3200 Gbit/s EFA and NVSwitch 900 GB/s; "up to" figures of the small g sizes taken as
  the figure). The multi-GPU g sizes have no NVLink: their GPUs talk over PCIe (config/costs.py). Used by the
  cost estimate's data-parallel model.
- Valid for training / processing: botocore's SageMaker model, enums `TrainingInstanceType` and
  `ProcessingInstanceType` (tests compare every row with the installed botocore).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

GpuArchitecture = Literal["volta", "turing", "ampere", "ada", "hopper"]
BF16_ARCHITECTURES = frozenset({"ampere", "ada", "hopper"})


@dataclass(frozen=True)
class GpuModel:
    """One GPU model: its memory, its peak dense fp16/bf16 tensor throughput and memory bandwidth (None: not
    published)."""

    name: str
    memory_gb: int
    peak_dense_tflops: float | None
    memory_bandwidth_gbs: float | None = None


GPU_MODELS: dict[str, GpuModel] = {
    gpu.name: gpu
    for gpu in (
        GpuModel("V100", 16, 125.0, 900.0),
        GpuModel("V100-32GB", 32, 125.0, 900.0),
        GpuModel("T4", 16, 65.0, 320.0),
        GpuModel("A10G", 24, 70.0, 600.0),  # assumption: see the module docstring
        GpuModel("L4", 24, 121.0, 300.0),
        GpuModel("L40S", 48, 362.05, 864.0),
        GpuModel("A100", 40, 312.0, 1555.0),
        GpuModel("A100-80GB", 80, 312.0, 2039.0),
        GpuModel("H100", 80, 989.0, 3350.0),
    )
}


@dataclass(frozen=True)
class InstanceType:
    """What one SageMaker instance type offers and which jobs may use it."""

    name: str
    local_nvme_gb: int  # total local instance storage; 0: EBS only
    efa: bool
    gpus: int
    gpu_architecture: GpuArchitecture | None
    smddp: bool
    training: bool  # in botocore's TrainingInstanceType enum
    processing: bool  # in botocore's ProcessingInstanceType enum
    gpu_model: str | None = None  # key of GPU_MODELS
    network_gbps: float = 0.0  # instance network bandwidth, Gbit/s
    gpu_peer_gbs: float = 0.0  # GPU-to-GPU bandwidth inside the instance (NVLink/NVSwitch), GB/s; 0: PCIe only

    @property
    def has_local_storage(self) -> bool:
        """Local NVMe: SageMaker mounts it instead of EBS, so no volume KMS key and a size cap."""
        return self.local_nvme_gb > 0

    @property
    def bf16(self) -> bool:
        return self.gpu_architecture in BF16_ARCHITECTURES

    @property
    def gpu(self) -> GpuModel | None:
        return GPU_MODELS[self.gpu_model] if self.gpu_model else None


def _types(*rows: InstanceType) -> dict[str, InstanceType]:
    return {row.name: row for row in rows}


def _gpu(
    name: str,
    nvme_gb: int,
    efa: bool,
    gpus: int,
    architecture: GpuArchitecture,
    smddp: bool,
    processing: bool,
    model: str,
    network_gbps: float,
    peer_gbs: float = 0.0,
) -> InstanceType:
    """A GPU type (every one listed is valid for training)."""
    return InstanceType(name, nvme_gb, efa, gpus, architecture, smddp, True, processing, model, network_gbps, peer_gbs)


def _cpu(name: str) -> InstanceType:
    return InstanceType(name, 0, False, 0, None, False, training=True, processing=True)


INSTANCE_TYPES: dict[str, InstanceType] = _types(
    # name, local NVMe GB, EFA, GPUs, architecture, SMDDP, processing, GPU model, network Gbit/s, GPU peer GB/s
    _gpu("ml.p3.2xlarge", 0, False, 1, "volta", False, True, "V100", 10),
    _gpu("ml.p3.8xlarge", 0, False, 4, "volta", False, True, "V100", 10, 300),
    _gpu("ml.p3.16xlarge", 0, False, 8, "volta", False, True, "V100", 25, 300),
    _gpu("ml.p3dn.24xlarge", 1800, True, 8, "volta", True, False, "V100-32GB", 100, 300),
    _gpu("ml.p4d.24xlarge", 8000, True, 8, "ampere", True, False, "A100", 400, 600),
    _gpu("ml.p4de.24xlarge", 8000, True, 8, "ampere", True, False, "A100-80GB", 400, 600),
    _gpu("ml.p5.48xlarge", 30400, True, 8, "hopper", False, False, "H100", 3200, 900),
    _gpu("ml.g4dn.xlarge", 125, False, 1, "turing", False, True, "T4", 25),
    _gpu("ml.g4dn.2xlarge", 225, False, 1, "turing", False, True, "T4", 25),
    _gpu("ml.g4dn.12xlarge", 900, True, 4, "turing", False, True, "T4", 50),
    _gpu("ml.g5.xlarge", 250, False, 1, "ampere", False, True, "A10G", 10),
    _gpu("ml.g5.2xlarge", 450, False, 1, "ampere", False, True, "A10G", 10),
    _gpu("ml.g5.4xlarge", 600, False, 1, "ampere", False, True, "A10G", 25),
    _gpu("ml.g5.8xlarge", 900, True, 1, "ampere", False, True, "A10G", 25),
    _gpu("ml.g5.16xlarge", 1900, True, 1, "ampere", False, True, "A10G", 25),
    _gpu("ml.g5.12xlarge", 3800, True, 4, "ampere", False, True, "A10G", 40),
    _gpu("ml.g5.24xlarge", 3800, True, 4, "ampere", False, True, "A10G", 50),
    _gpu("ml.g5.48xlarge", 7600, True, 8, "ampere", False, True, "A10G", 100),
    _gpu("ml.g6.xlarge", 250, False, 1, "ada", False, True, "L4", 10),
    _gpu("ml.g6.2xlarge", 450, False, 1, "ada", False, True, "L4", 10),
    _gpu("ml.g6.4xlarge", 600, False, 1, "ada", False, True, "L4", 25),
    _gpu("ml.g6.8xlarge", 900, True, 1, "ada", False, True, "L4", 25),
    _gpu("ml.g6.16xlarge", 1880, True, 1, "ada", False, True, "L4", 25),
    _gpu("ml.g6.12xlarge", 3760, True, 4, "ada", False, True, "L4", 40),
    _gpu("ml.g6.24xlarge", 3760, True, 4, "ada", False, True, "L4", 50),
    _gpu("ml.g6.48xlarge", 7520, True, 8, "ada", False, True, "L4", 100),
    _gpu("ml.g6e.xlarge", 250, False, 1, "ada", False, True, "L40S", 20),
    _gpu("ml.g6e.2xlarge", 450, False, 1, "ada", False, True, "L40S", 20),
    _gpu("ml.g6e.4xlarge", 600, False, 1, "ada", False, True, "L40S", 20),
    _gpu("ml.g6e.8xlarge", 900, True, 1, "ada", False, True, "L40S", 25),
    _gpu("ml.g6e.16xlarge", 1900, True, 1, "ada", False, True, "L40S", 35),
    _gpu("ml.g6e.12xlarge", 3800, True, 4, "ada", False, True, "L40S", 100),
    _gpu("ml.g6e.24xlarge", 3800, True, 4, "ada", False, True, "L40S", 200),
    _gpu("ml.g6e.48xlarge", 7600, True, 8, "ada", False, True, "L40S", 400),
    _cpu("ml.m5.large"),
    _cpu("ml.m5.xlarge"),
    _cpu("ml.m5.2xlarge"),
    _cpu("ml.m5.4xlarge"),
    _cpu("ml.m5.12xlarge"),
    _cpu("ml.m5.24xlarge"),
    _cpu("ml.c5.4xlarge"),
    _cpu("ml.c5.9xlarge"),
)

# What FineTune may run on when `training.allowed_instance_types` is not set: the multi-node EFA types of the
# reference workload, narrowed to those on which the configured settings pass every rule.
DEFAULT_TRAINING_CANDIDATES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p3dn.24xlarge")


def instance_type(name: str) -> InstanceType:
    """The facts of `name`; KeyError names the table to extend."""
    try:
        return INSTANCE_TYPES[name]
    except KeyError:
        raise KeyError(
            f"{name} is not in config/instance_types.py: add a row with its local storage, EFA, GPUs and "
            "validity for training/processing (AWS rules depend on them)"
        ) from None


def accepts_volume_kms_key(names: Iterable[str]) -> bool:
    """Whether a job that may run on any of `names` may name a volume KMS key: not when one of them has local NVMe
    storage ("You can't request a VolumeKmsKeyId when using an instance type with local storage",
    API_ResourceConfig, API_ProcessingClusterConfig). The definition's jobs and the pipeline role's conditions on
    them (sagemaker:VolumeKmsKey) both follow it."""
    return not any(instance_type(name).has_local_storage for name in names)


def names_where(predicate) -> list[str]:
    """Sorted names of the listed types that satisfy `predicate(InstanceType)`."""
    return sorted(name for name, row in INSTANCE_TYPES.items() if predicate(row))
