"""The source bundle's build directory and cache: private, atomic, and never trusted without its hash."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

from config.paths import UnsafeBuildDir
from stacks.source_bundle import DEFAULT_BUILD_DIR, build_source_tarball, write_source_tarball
from tests.conftest import ROOT


@pytest.fixture
def source(tmp_path) -> Path:
    folder = tmp_path / "code"
    (folder / "qa").mkdir(parents=True)
    (folder / "train.py").write_text("print('train')\n")
    (folder / "qa" / "__init__.py").write_text("")
    return folder


def test_the_default_build_dir_is_inside_the_checkout_not_a_shared_tmp_path():
    assert DEFAULT_BUILD_DIR == ROOT / ".cache" / "source-bundles"  # git-ignored, removed by `make clean`


def test_the_bundle_is_written_into_a_private_directory(source, tmp_path):
    path = write_source_tarball(source, tmp_path / "build").path
    assert path.read_bytes() == build_source_tarball(source)
    assert (path.parent.stat().st_mode & 0o777) == 0o700
    assert not list(path.parent.glob(".sourcedir-*"))  # no temporary file is left behind


@pytest.mark.parametrize(
    "tamper",
    [
        lambda data: b"#!/bin/sh\necho planted\n",  # a planted file under the expected name
        lambda data: data[: len(data) // 2],  # a truncated write
        lambda data: b"",
    ],
)
def test_a_planted_or_truncated_bundle_is_rebuilt(source, tmp_path, tamper):
    expected = build_source_tarball(source)
    path = write_source_tarball(source, tmp_path / "build").path
    path.write_bytes(tamper(expected))
    assert write_source_tarball(source, tmp_path / "build").path == path
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(expected).digest()


def test_an_intact_bundle_is_reused_as_is(source, tmp_path):
    path = write_source_tarball(source, tmp_path / "build").path
    before = path.stat().st_ino
    assert write_source_tarball(source, tmp_path / "build").path.stat().st_ino == before


def test_a_directory_others_may_write_to_is_refused(source, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(UnsafeBuildDir, match=r"must be owned by you and writable only by you.*chmod go-w"):
        write_source_tarball(source, shared)


def test_a_symlinked_build_dir_is_refused(source, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(UnsafeBuildDir, match=r"is not a directory \(a symlink\?\)"):
        write_source_tarball(source, tmp_path / "link")


def test_bootstrap_installs_a_pinned_pip():
    makefile = (ROOT / "Makefile").read_text()
    assert "--upgrade" not in makefile
    [version] = re.findall(r"^PIP_VERSION := (\S+)$", makefile, flags=re.MULTILINE)
    assert re.fullmatch(r"\d+(\.\d+)+", version)
    assert "$(PIP) pip==$(PIP_VERSION)" in makefile
