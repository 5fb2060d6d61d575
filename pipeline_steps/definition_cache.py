"""Reuse a built pipeline definition while nothing that shapes it has changed.

Building the definition imports the SageMaker SDK (~2 s) and runs it (~1 s) on every synth. The result is a
pure function of the settings (which fix the deploy-time placeholders), this package's and `config`'s source, and the
versions of the SDK and Python, so each build is stored under a SHA-256 of exactly those inputs and the
next synth with the same inputs reads it back without importing the SDK. Any change to an input is a new key:
a stale definition cannot be returned. Delete the directory to drop every entry.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

from config import Settings
from config.paths import CACHE, PROJECT_ROOT, TRAINING_CODE

SOURCE_DIRS = (PROJECT_ROOT / "pipeline_steps", PROJECT_ROOT / "config")
# The container <-> definition contract the steps import (file names, container paths, metric regexes).
SOURCE_FILES = (TRAINING_CODE / "qa" / "outputs.py",)
DEFAULT_CACHE_DIR = CACHE / "pipeline-definitions"  # app.py's; `make clean` removes it
SDK_DISTRIBUTIONS = ("sagemaker", "sagemaker-core", "boto3", "botocore")
MAX_ENTRIES = 32


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

    With `cache_dir` None the definition is always built. An entry that is not valid JSON (edited or damaged
    by hand) is rebuilt; the directory keeps the `MAX_ENTRIES` most recently used entries.
    """
    if cache_dir is None:
        return _build(settings)
    entry = cache_dir / f"{inputs_digest(settings)}.json"
    cached = _read_valid(entry)
    if cached is not None:
        os.utime(entry)  # most recently used: kept by the pruning below
        return cached
    text = _build(settings)
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Write-then-rename: a concurrent synth never reads a half-written entry.
    handle, temporary = tempfile.mkstemp(dir=cache_dir, suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, entry)
    for stale in sorted(cache_dir.glob("*.json"), key=lambda path: path.stat().st_mtime)[:-MAX_ENTRIES]:
        stale.unlink(missing_ok=True)
    return text


def _read_valid(entry: Path) -> str | None:
    try:
        text = entry.read_text(encoding="utf-8")
        json.loads(text)
    except (OSError, ValueError):
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
