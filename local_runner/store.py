"""A local stand-in for S3: s3://bucket/key <-> <root>/<bucket>/<key>.

Versioned enough to pin data: put_file/put_bytes keep each version under <root>/.versions/<bucket>/<key>/ and
return its version id, as the pipeline's Lambda functions read them (training_code/pipeline_functions.py).
Every write replaces the file (a new file renamed over it), never writes into it: stored files may be hard links
to one content (local_runner/blobs.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from qa.outputs import LOCAL_VERSIONS_DIR, content_version

STORE_DIR = "s3"  # the store's root under the local runs' folder (.local-runs/s3)


class LocalObjectStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def path(self, uri: str) -> Path:
        if not uri.startswith("s3://"):
            raise ValueError(f"not an s3:// URI: {uri!r}")
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        if not bucket or ".." in Path(key).parts:
            raise ValueError(f"invalid S3 URI: {uri!r}")
        return self.root / bucket / key

    def keys_under(self, uri: str) -> list[Path]:
        """Objects whose key starts with the URI's key (S3 prefix semantics)."""
        base = self.path(uri)
        if base.is_file():
            return [base]
        if base.is_dir():
            return sorted(p for p in base.rglob("*") if p.is_file())
        parent = base.parent
        return sorted(p for p in parent.glob(base.name + "*") if p.is_file()) if parent.is_dir() else []

    def download_prefix(self, uri: str, destination: Path) -> int:
        """Copy every object under the prefix, keeping paths relative to the prefix's folder."""
        base = self.path(uri)
        return _copy_files(self.keys_under(uri), base if base.is_dir() else base.parent, destination)

    def upload_dir(self, source: Path, uri: str) -> int:
        """Copy a local folder's files under the URI (overwriting, like S3 uploads)."""
        files = sorted(p for p in source.rglob("*") if p.is_file())
        return _copy_files(files, source, self.path(uri.rstrip("/")))

    def mirror_dir(self, source: Path, uri: str) -> None:
        """upload_dir, then delete the objects under the URI whose files the folder no longer has: what
        SageMaker's checkpoint sync does with files deleted in the container."""
        self.upload_dir(source, uri)
        base = self.path(uri.rstrip("/"))
        for stale in [p for p in base.rglob("*") if p.is_file() and not (source / p.relative_to(base)).exists()]:
            stale.unlink()

    def put_file(self, source: Path, uri: str) -> str:
        """Upload a file; its version id."""
        return self.put_bytes(source.read_bytes(), uri)

    def put_bytes(self, data: bytes, uri: str) -> str:
        """Write an object; its version id (the current version and a kept copy)."""
        target = self.path(uri)
        version = content_version(data)
        kept = self.root / LOCAL_VERSIONS_DIR / target.relative_to(self.root) / version
        for path in (target, kept):
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = _temporary(path)
            temporary.write_bytes(data)
            temporary.replace(path)
        return version


def _copy_files(files: list[Path], source_root: Path, target_root: Path) -> int:
    """Copy each file to the same relative path under `target_root`; the number copied."""
    for source in files:
        target = target_root / source.relative_to(source_root)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = _temporary(target)
        shutil.copy2(source, temporary)
        temporary.replace(target)
    return len(files)


def _temporary(path: Path) -> Path:
    """Where a file for `path` is written before it is renamed over it."""
    return path.with_name(f".{path.name}.writing")
