"""Small helpers shared by the entry points: SageMaker-style flags and paths."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def str2bool(value: str | bool) -> bool:
    """Explicit booleans: SageMaker passes hyperparameters as `--flag true|false`, never bare flags."""
    if isinstance(value, bool):
        return value
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def env_path(name: str, default: str) -> str:
    """A path from a SageMaker variable (SM_MODEL_DIR, SM_CHANNEL_TRAIN, ...) or the container default."""
    return os.environ.get(name, default)


def setup_logging(is_main_process: bool = True) -> logging.Logger:
    logging.basicConfig(
        level=logging.INFO if is_main_process else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stdout,
    )
    for noisy in ("datasets", "transformers", "accelerate", "torch.distributed"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from transformers.utils import logging as transformers_logging

    # transformers' reports go to its own stderr handler only; it also propagates them to the root logger
    # (stdout here) when CI=true is set, which would print each report twice.
    transformers_logging.disable_propagation()
    if not is_main_process:  # one copy of library reports (e.g. transformers' load report), not one per rank
        transformers_logging.set_verbosity_error()
    return logging.getLogger("qa")


# The ManifestVersionId pipeline parameter's default (pipeline_steps/parameters.py): a run started by hand
# without the manifest's S3 version id.
UNSET_VERSION = "unset"


def require_manifest_version(version: str | None) -> str | None:
    """`version`, or None after printing how to start a run by hand when it is the unset default."""
    if version == UNSET_VERSION:
        print(
            "error: pipeline parameter ManifestVersionId is not set. Start runs by uploading the manifest, or pass "
            "the manifest's S3 version id (aws s3api head-object --query VersionId): cached features and the "
            "once-per-upload claim are keyed by it",
            file=sys.stderr,
        )
        return None
    return version
