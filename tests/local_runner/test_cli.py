"""The local runner's command line: the pipeline stack of the latest synth, errors that name their fix."""

from __future__ import annotations

import json
import shutil

import pytest

from local_runner.__main__ import main as run_local
from local_runner.assembly import find_pipeline_stack


def test_a_missing_assembly_names_the_synth_command_of_its_environment(tmp_path, capsys):
    assert run_local(["--assembly", str(tmp_path / "cdk.out" / "staging"), "--work-dir", str(tmp_path)]) == 2
    assert "run `make synth ENV=staging` first" in capsys.readouterr().err


def test_an_assembly_with_two_pipeline_stacks_asks_for_one_by_name(dev, prod, tmp_path, capsys):
    # The session's assembly holds dev and prod from one synth.
    assert run_local(["--assembly", str(dev.assembly), "--work-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "pick one with --stack" in err
    assert dev.stacks.pipeline.stack_name in err and prod.stacks.pipeline.stack_name in err


def test_templates_left_by_an_earlier_synth_into_the_same_folder_are_ignored(dev, prod, tmp_path):
    for template in dev.assembly.glob("*.template.json"):
        shutil.copy(template, tmp_path)
    manifest = json.loads((dev.assembly / "manifest.json").read_text())
    prod_stacks = {stack.stack_name for stack in prod.stacks.all()}
    manifest["artifacts"] = {k: v for k, v in manifest["artifacts"].items() if k not in prod_stacks}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert (tmp_path / f"{prod.stacks.pipeline.stack_name}.template.json").is_file()
    assert find_pipeline_stack(tmp_path) == dev.stacks.pipeline.stack_name


def test_a_param_without_a_value_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_local(["--param", "Epochs"])
    assert exit_info.value.code == 2
    assert "argument --param: expected NAME=VALUE, got 'Epochs'" in capsys.readouterr().err
