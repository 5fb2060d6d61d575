"""The training code as a reproducible tar.gz: SageMaker's `sagemaker_submit_directory` format.

Same input files -> same bytes (sorted entries, fixed mtimes, owners and modes, no gzip timestamp), so the
CDK asset hash only changes when the code does. The bundle is deployed and runs in every job: it is written
only into a directory that the current user owns and nobody else may write to, atomically, and a file found
there is reused only when its bytes are exactly the bundle's (a planted or truncated file is rewritten).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from config.paths import CACHE, private_dir

# Inside the checkout (ignored by git, removed by `make clean`): private to whoever owns the checkout, never a
# shared, predictable path such as /tmp/hfqa-build.
DEFAULT_BUILD_DIR = CACHE / "source-bundles"

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


@dataclass(frozen=True)
class SourceBundle:
    path: Path
    sha256: str  # of the bytes built from the source, not of whatever the file holds later


def write_source_tarball(source_dir: Path, out_dir: Path = DEFAULT_BUILD_DIR) -> SourceBundle:
    """Write the bundle as `<out_dir>/sourcedir-<sha256 prefix>.tar.gz`; its path and full SHA-256.

    An existing file of that name is kept only if its content hashes to the bundle's full SHA-256; otherwise it
    is replaced. Writes go to a temporary file in the same directory, fsynced, then renamed over the target.
    """
    data = build_source_tarball(source_dir)
    digest = hashlib.sha256(data).hexdigest()
    directory = private_dir(out_dir)
    path = directory / f"sourcedir-{digest[:16]}.tar.gz"
    if path.is_file() and not path.is_symlink() and hashlib.sha256(path.read_bytes()).hexdigest() == digest:
        return SourceBundle(path, digest)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".sourcedir-", suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as partial:
            partial.write(data)
            partial.flush()
            os.fsync(partial.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return SourceBundle(path, digest)
