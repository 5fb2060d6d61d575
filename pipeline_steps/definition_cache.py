"""Reuse a built pipeline definition while nothing that shapes it has changed.

Building the definition imports the SageMaker SDK (~2 s) and runs it (~1 s) on every synth. The result is a
pure function of the settings (which fix the deploy-time placeholders), this package's and `config`'s source, and the
versions of the SDK and Python, so each build is stored under a SHA-256 of exactly those inputs and the
next synth with the same inputs reads it back without importing the SDK. Any change to an input is a new key:
a stale definition cannot be returned. Delete the directory to drop every entry.

The definition decides what runs as the job role, so an entry is trusted as little as possible: the folder must be
private to the user (`config.paths.private_dir`), each entry is named by the SHA-256 of its own text as well and is
rebuilt when the two differ (an edited entry, e.g. `EnableNetworkIsolation: false`), and a deploy skips the cache
altogether (`DISABLE_VARIABLE`, set by `make deploy` and `make diff`): a name that matches its content proves only
that the file was not edited by hand, not who wrote it, so what reaches AWS is always built in the same run.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from config import Settings
from config.paths import CACHE, PROJECT_ROOT, TRAINING_CODE, private_dir

SOURCE_DIRS = (PROJECT_ROOT / "pipeline_steps", PROJECT_ROOT / "config")
# The container <-> definition contract the steps import (file names, container paths, metric regexes).
SOURCE_FILES = (TRAINING_CODE / "qa" / "outputs.py",)
DEFAULT_CACHE_DIR = CACHE / "pipeline-definitions"  # app.py's; `make clean` removes it
SDK_DISTRIBUTIONS = ("sagemaker", "sagemaker-core", "boto3", "botocore")
MAX_ENTRIES = 32
# Set to "off" in the environment: every synth builds the definition (make deploy and make diff do).
DISABLE_VARIABLE = "PIPELINE_DEFINITION_CACHE"


def cache_dir_for(environ: Mapping[str, str]) -> Path | None:
    """app.py's cache folder: `DEFAULT_CACHE_DIR`, or None (always build) when `DISABLE_VARIABLE` is "off"."""
    return None if environ.get(DISABLE_VARIABLE, "").lower() == "off" else DEFAULT_CACHE_DIR


def inputs_digest(settings: Settings) -> str:
    """SHA-256 over everything the definition is built from."""
    digest = hashlib.sha256()
    digest.update(f"python {sys.version_info[:2]}\n".encode())
    for name in SDK_DISTRIBUTIONS:
        digest.update(f"{name} {importlib.metadata.version(name)}\n".encode())
    digest.update(settings.model_dump_json().encode())
    sources = [(directory.parent, path) for directory in SOURCE_DIRS for path in sorted(directory.rglob("*.py"))]
    sources += [(path.parents[2], path) for path in SOURCE_FILES]
    for root, path in sources:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def definition_json_cached(settings: Settings, cache_dir: Path | None) -> str:
    """`definition_json(settings)`, read from `cache_dir` when built before from the same inputs.

    With `cache_dir` None the definition is always built. `cache_dir` must be private to the user
    (`config.paths.UnsafeBuildDir` otherwise). An entry whose text does not hash to its name, or is not JSON, is
    removed and rebuilt; the directory keeps the `MAX_ENTRIES` most recently used entries.
    """
    if cache_dir is None:
        return _build(settings)
    directory = private_dir(cache_dir)
    key = inputs_digest(settings)
    for entry in directory.glob(f"{key}.*.json"):
        cached = _read_verified(entry)
        if cached is not None:
            os.utime(entry)  # most recently used: kept by the pruning below
            return cached
        entry.unlink(missing_ok=True)
    text = _build(settings)
    # Write-then-rename: a concurrent synth never reads a half-written entry.
    handle, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, directory / f"{key}.{_text_digest(text)}.json")
    for stale in sorted(directory.glob("*.json"), key=lambda path: path.stat().st_mtime)[:-MAX_ENTRIES]:
        stale.unlink(missing_ok=True)
    return text


def _text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_verified(entry: Path) -> str | None:
    """The entry's text if it is a regular file whose SHA-256 is the one in its name and that parses as JSON."""
    try:
        if entry.is_symlink():
            return None
        text = entry.read_text(encoding="utf-8")
        if _text_digest(text) != entry.name.split(".")[1]:
            return None
        json.loads(text)
    except (OSError, ValueError, IndexError):
        return None
    return text


def _build(settings: Settings) -> str:
    # Importing the SDK (only on a miss) logs its config-file lookups at INFO: kept out of synth's output.
    config_logger = logging.getLogger("sagemaker.config")
    level = config_logger.level
    config_logger.setLevel(logging.WARNING)
    try:
        from pipeline_steps.definition import definition_json
    finally:
        config_logger.setLevel(level)
    return definition_json(settings)
