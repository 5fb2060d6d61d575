"""Each content once in the local runs' folder: <work dir>/blobs/<sha256>, every file holding it a hard link to it.

A run copies the same bytes many times, as SageMaker would (the base model into the job's channel, the job's
model.tar.gz to S3, its kept version, the registry's copy and that copy's version, the endpoint's unpacked model):
after each run the local runner adopts the files it wrote, so that each content takes its space once. A blob
whose only link is its own (link count 1) is referenced by nothing: `make clean-runs` removes it.

Links share their bytes, so nothing may write into a stored file in place: the local object store replaces
files (a new file renamed over the old one), and only files of at least MIN_BLOB_BYTES are adopted (the small
files that tools update in place, such as the status file and the MLflow store's, never are).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

BLOBS_DIR = "blobs"  # under the work dir (.local-runs): on the same file system as every file it links
MIN_BLOB_BYTES = 1 << 20  # model weights, archives, optimizer states; not configs, logs or reports


def file_digest(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


class BlobStore:
    """The work dir's content-addressed blobs."""

    def __init__(self, work_dir: Path) -> None:
        self.root = work_dir / BLOBS_DIR

    def adopt(self, path: Path) -> int:
        """Make `path` a link to the blob of its content (the file becomes that blob when it is new); the bytes
        this saved (its size when the content was already stored, else 0)."""
        blob = self.root / file_digest(path)
        if not blob.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            os.link(path, blob)
            return 0
        if os.path.samefile(path, blob):
            return 0
        temporary = path.with_name(f".{path.name}.link")
        os.link(blob, temporary)
        temporary.replace(path)
        return blob.stat().st_size

    def adopt_trees(self, folders: Iterable[Path]) -> int:
        """Adopt every file of at least MIN_BLOB_BYTES under the folders that is no blob's link yet; the bytes saved."""
        stored = {(b.stat().st_dev, b.stat().st_ino) for b in self.blobs()}
        saved = 0
        for folder in folders:
            for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
                info = path.lstat()
                large = stat.S_ISREG(info.st_mode) and info.st_size >= MIN_BLOB_BYTES
                if large and (info.st_dev, info.st_ino) not in stored:
                    saved += self.adopt(path)
        return saved

    def blobs(self) -> list[Path]:
        return sorted(self.root.iterdir()) if self.root.is_dir() else []

    def unreferenced(self) -> list[Path]:
        """Blobs that no file links to any more."""
        return [blob for blob in self.blobs() if blob.stat().st_nlink == 1]
