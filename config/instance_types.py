"""Facts about SageMaker instance types that AWS enforces but no API shape encodes.

One table, read by the settings validation, the pipeline-definition checks and the local runner. A type that
is not listed here cannot be configured: every rule below must be decidable for every type a job can run on.

Sources (checked 2026-11-30):
- Local NVMe instance storage and its size, EFA: EC2 instance type specs,
  https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html (p4d, p4de, p5, g4dn, g5) and
  https://docs.aws.amazon.com/ec2/latest/instancetypes/pg.html (p3, p3dn: previous generation).
  SageMaker's rules on local storage: "You can't request a VolumeKmsKeyId when using an instance type with
  local storage" (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceConfig.html and
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ProcessingClusterConfig.html); for processing
  also "You can't request a VolumeSizeInGB greater than the total size of the local instance storage"
  (training uses the NVMe capacity as it is and provisions no EBS volume).
- GPUs per instance and their architecture: https://aws.amazon.com/ec2/instance-types/ (P3, P4, P5, G4, G5).
  bfloat16 needs compute capability 8.0 (Ampere) or newer; V100 (Volta) and T4 (Turing) lack it.
- SMDDP: https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-data-parallel-support.html
  (ml.p4d.24xlarge, ml.p4de.24xlarge; ml.p3dn.24xlarge without further optimisation of its collectives).
- Valid for training / processing: botocore's SageMaker model, enums `TrainingInstanceType` and
  `ProcessingInstanceType` (tests compare every row with the installed botocore).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GpuArchitecture = Literal["volta", "turing", "ampere", "hopper"]
BF16_ARCHITECTURES = frozenset({"ampere", "hopper"})


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

    @property
    def has_local_storage(self) -> bool:
        """Local NVMe: SageMaker mounts it instead of EBS, so no volume KMS key and a size cap."""
        return self.local_nvme_gb > 0

    @property
    def bf16(self) -> bool:
        return self.gpu_architecture in BF16_ARCHITECTURES


def _types(*rows: InstanceType) -> dict[str, InstanceType]:
    return {row.name: row for row in rows}


def _cpu(name: str) -> InstanceType:
    return InstanceType(name, 0, False, 0, None, False, training=True, processing=True)


INSTANCE_TYPES: dict[str, InstanceType] = _types(
    # name, local NVMe GB, EFA, GPUs, architecture, SMDDP, training, processing
    InstanceType("ml.p3.2xlarge", 0, False, 1, "volta", False, True, True),
    InstanceType("ml.p3.8xlarge", 0, False, 4, "volta", False, True, True),
    InstanceType("ml.p3.16xlarge", 0, False, 8, "volta", False, True, True),
    InstanceType("ml.p3dn.24xlarge", 1800, True, 8, "volta", True, True, False),
    InstanceType("ml.p4d.24xlarge", 8000, True, 8, "ampere", True, True, False),
    InstanceType("ml.p4de.24xlarge", 8000, True, 8, "ampere", True, True, False),
    InstanceType("ml.p5.48xlarge", 30400, True, 8, "hopper", False, True, False),
    InstanceType("ml.g4dn.xlarge", 125, False, 1, "turing", False, True, True),
    InstanceType("ml.g4dn.2xlarge", 225, False, 1, "turing", False, True, True),
    InstanceType("ml.g4dn.12xlarge", 900, True, 4, "turing", False, True, True),
    InstanceType("ml.g5.xlarge", 250, False, 1, "ampere", False, True, True),
    InstanceType("ml.g5.2xlarge", 450, False, 1, "ampere", False, True, True),
    InstanceType("ml.g5.4xlarge", 600, False, 1, "ampere", False, True, True),
    InstanceType("ml.g5.12xlarge", 3800, True, 4, "ampere", False, True, True),
    InstanceType("ml.g5.48xlarge", 7600, True, 8, "ampere", False, True, True),
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


def names_where(predicate) -> list[str]:
    """Sorted names of the listed types that satisfy `predicate(InstanceType)`."""
    return sorted(name for name, row in INSTANCE_TYPES.items() if predicate(row))
