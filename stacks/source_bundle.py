"""The training code as a reproducible tar.gz: SageMaker's `sagemaker_submit_directory` format.

Same input files -> same bytes (sorted entries, fixed mtimes, owners and modes, no gzip timestamp), so the
CDK asset hash only changes when the code does.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

EXCLUDED_PARTS = {"__pycache__", ".pytest_cache", ".ruff_cache"}
EXCLUDED_SUFFIXES = {".pyc", ".pyo"}


def source_files(source_dir: Path) -> list[Path]:
    """Files that ship, in a stable order."""
    return sorted(
        path
        for path in source_dir.rglob("*")
        if path.is_file()
        and not EXCLUDED_PARTS.intersection(path.relative_to(source_dir).parts)
        and path.suffix not in EXCLUDED_SUFFIXES
    )


def build_source_tarball(source_dir: Path) -> bytes:
    """The tar.gz bytes of `source_dir` (paths relative to it)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in source_files(source_dir):
            info = tarfile.TarInfo(str(path.relative_to(source_dir)))
            data = path.read_bytes()
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    compressed = io.BytesIO()
    with gzip.GzipFile(fileobj=compressed, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    return compressed.getvalue()


def write_source_tarball(source_dir: Path, out_dir: Path) -> Path:
    """Write the bundle as `<out_dir>/sourcedir-<sha256 prefix>.tar.gz` and return its path."""
    data = build_source_tarball(source_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"sourcedir-{hashlib.sha256(data).hexdigest()[:16]}.tar.gz"
    if not path.exists():
        path.write_bytes(data)
    return path
