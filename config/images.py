"""The image catalogue: the Deep Learning Containers the jobs and the endpoint run, per distribution backend,
with the CUDA facts behind the Volta rule. Settings pick from it; no CDK and no SageMaker imports here."""

from __future__ import annotations

from dataclasses import dataclass

# The account whose ECR registry serves the Deep Learning Containers, per region: the "Region Availability" table
# (https://aws.github.io/deep-learning-containers/reference/region_availability/, source
# aws/deep-learning-containers docs/reference/region_availability.md; read 2026-12-01). Most commercial regions
# share 763104351884; the opt-in regions and China have their own. An older copy of the available-images page
# (docs/reference/available_images.md) gave 763104351884 for ap-east-2: the dedicated table, newer, is used.
# The table lists registries, not which repositories each holds: a region listed here may still lack an image.
DLC_REGISTRY_SOURCE = "https://aws.github.io/deep-learning-containers/reference/region_availability/"
DLC_REGISTRY_ACCOUNTS: dict[str, str] = {
    "us-east-2": "763104351884",
    "us-east-1": "763104351884",
    "us-west-1": "763104351884",
    "us-west-2": "763104351884",
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-south-2": "772153158452",
    "ap-southeast-3": "907027046896",
    "ap-southeast-5": "550225433462",
    "ap-southeast-4": "457447274322",
    "ap-south-1": "763104351884",
    "ap-southeast-6": "633930458069",
    "ap-northeast-3": "364406365360",
    "ap-northeast-2": "763104351884",
    "ap-southeast-1": "763104351884",
    "ap-southeast-2": "763104351884",
    "ap-east-2": "975050140332",
    "ap-southeast-7": "590183813437",
    "ap-northeast-1": "763104351884",
    "ca-west-1": "204538143572",
    "ca-central-1": "763104351884",
    "eu-central-1": "763104351884",
    "eu-west-1": "763104351884",
    "eu-west-2": "763104351884",
    "eu-south-1": "692866216735",
    "eu-west-3": "763104351884",
    "eu-south-2": "503227376785",
    "eu-north-1": "763104351884",
    "eu-central-2": "380420809688",
    "il-central-1": "780543022126",
    "mx-central-1": "637423239942",
    "me-south-1": "217643126080",
    "me-west-1": "124382933778",
    "me-central-1": "914824155844",
    "sa-east-1": "763104351884",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
}
DLC_REPOSITORIES = "huggingface-pytorch-*"  # the training and inference repositories below


def no_registry_problem(region: str) -> str | None:
    """One line saying why `region` cannot run the jobs' images, or None where a registry serves them."""
    if region in DLC_REGISTRY_ACCOUNTS:
        return None
    return (
        f"no AWS Deep Learning Containers registry serves {region} ({DLC_REGISTRY_SOURCE}, copied in "
        "config/images.py): the jobs could not pull their images there; deploy to a listed region"
    )


def dlc_registry_account(region: str) -> str:
    """The account of the registry that serves the Deep Learning Containers in `region`."""
    problem = no_registry_problem(region)
    if problem is not None:
        raise ValueError(problem)
    return DLC_REGISTRY_ACCOUNTS[region]


# The CPU image of ValidateAndTokenize (no GPU image for a CPU job): the Hugging Face PyTorch inference CPU
# image, which has Python 3.12, torch 2.6.0 (CPU), transformers 5.5.3 with fast tokenizers, accelerate 1.12.0
# and boto3 (aws/deep-learning-containers huggingface/pytorch/inference/docker/2.6/py3/Dockerfile.cpu; listed
# under "HuggingFace Containers > Inference" in docs/reference/available_images.md). No Hugging Face
# *training* image has a CPU variant (huggingface/pytorch/training/docker holds GPU Dockerfiles only), and the
# PyTorch training CPU image has no transformers (pytorch/training/docker/2.8/py3/Dockerfile.cpu). Size: the
# DLC buildspecs record no image_size_baseline for it; its Dockerfile has no CUDA, cuDNN, NCCL or EFA layers,
# the bulk of the ~25,000 MB GPU training image (huggingface/pytorch/training/buildspec.yml).
# It installs neither `datasets` nor pyarrow: preprocess.py and what it imports use neither (training_code/README.md).
DEFAULT_PROCESSING_IMAGE = "huggingface-pytorch-inference:2.6.0-transformers5.5.3-cpu-py312-ubuntu22.04"


@dataclass(frozen=True)
class TrainingImage:
    """A Hugging Face training image, what the SageMaker SDK wants beside its URI, and the image that serves
    what it saves."""

    repository: str  # repository:tag in the deep-learning-containers registry
    transformers_version: str
    pytorch_version: str
    py_version: str
    cuda: tuple[int, int]  # the CUDA build of its PyTorch
    inference_repository: str
    # The image's ACCELERATE_VERSION (aws/deep-learning-containers
    # huggingface/pytorch/training/docker/<torch>/py3/<cuda>/Dockerfile.gpu): `make test-images` tests with it.
    accelerate_version: str

    @property
    def framework_versions(self) -> tuple[str, str, str]:
        """(transformers, PyTorch, Python), as the SageMaker SDK's HuggingFace estimator takes them."""
        return (self.transformers_version, self.pytorch_version, self.py_version)

    @property
    def has_volta_kernels(self) -> bool:
        """CUDA 13.0 removed Maxwell, Pascal and Volta (sm_50-sm_72) from the toolkit ("Deprecated
        Architectures", https://docs.nvidia.com/cuda/archive/13.0.0/cuda-toolkit-release-notes/index.html), and
        PyTorch's CUDA 12.8 builds already ship no sm_70 kernels (TORCH_CUDA_ARCH_LIST of the cu128 wheels starts
        at 7.5, https://github.com/pytorch/pytorch/blob/main/.ci/manywheel/build_cuda.sh): a V100 then finds no
        kernel for its architecture. Turing (sm_75) keeps its kernels in both."""
        return self.cuda < (12, 8)


# Serving: the inference transformers must be at least the version that saved the model (a 4.49 image cannot
# read configs written by 5.x). No inference image carries exactly 5.3.0; 2.6.0-transformers5.5.3 is the newest
# GPU one and sits beside the 5.3.0 training image in the Hugging Face DLC list (huggingface/hub-docs
# docs/sagemaker/source/dlcs/available.md, "PyTorch Inference"; source of truth:
# https://aws.github.io/deep-learning-containers/reference/available_images/). Models trained with 4.49.0 are
# served by the 4.49.0 image (aws/deep-learning-containers docs/reference/available_images.md, "HuggingFace
# Containers > Inference").
_CU130_IMAGE = TrainingImage(
    "huggingface-pytorch-training:2.9.0-transformers5.3.0-gpu-py312-cu130-ubuntu22.04",
    "5.3.0",
    "2.9.0",
    "py312",
    (13, 0),
    "huggingface-pytorch-inference:2.6.0-transformers5.5.3-gpu-py312-cu124-ubuntu22.04",
    "1.12.0",
)
# SMDDP ships only up to PyTorch 2.5.1; its CUDA 12.4 build still has Volta kernels, and torchrun
# (torch_distributed) runs on it as well.
_CU124_IMAGE = TrainingImage(
    "huggingface-pytorch-training:2.5.1-transformers4.49.0-gpu-py311-cu124-ubuntu22.04",
    "4.49.0",
    "2.5.1",
    "py311",
    (12, 4),
    "huggingface-pytorch-inference:2.6.0-transformers4.49.0-gpu-py312-cu124-ubuntu22.04",
    "1.4.0",
)
# Per distribution backend: the newest image that runs it.
DEFAULT_TRAINING_IMAGES = {"torchrun": _CU130_IMAGE, "smddp": _CU124_IMAGE}
# When a Volta type (ml.p3dn.24xlarge) is among the allowed training types: the newest image with Volta kernels.
VOLTA_TRAINING_IMAGE = _CU124_IMAGE
