"""The local runner's command line: the pipeline stack of the latest synth, errors that name their fix."""

from __future__ import annotations

import json
import shutil

import pytest

from local_runner.__main__ import main as run_local
from local_runner.assembly import LocalAccount, find_pipeline_stack, load_synthesized_pipeline
from local_runner.errors import UnsupportedDefinition
from stacks.outputs import TASK_OUTPUT


def test_a_missing_assembly_names_the_synth_command_of_its_environment(tmp_path, capsys):
    assert run_local(["--assembly", str(tmp_path / "cdk.out" / "staging"), "--work-dir", str(tmp_path)]) == 2
    assert "run `make synth ENV=staging` first" in capsys.readouterr().err


def test_an_assembly_with_two_pipeline_stacks_asks_for_one_by_name(dev, prod, tmp_path, capsys):
    # The session's assembly holds dev and prod from one synth.
    assert run_local(["--assembly", str(dev.assembly), "--work-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "pick one with --stack" in err
    assert dev.stacks.pipeline.stack_name in err and prod.stacks.pipeline.stack_name in err


def test_an_environment_with_a_pipeline_per_task_runs_the_one_of_the_task(dev, tmp_path):
    """An assembly of an environment that deploys two pipelines (settings `pipelines`): --task picks the stack
    whose Task output names it; without one, both are named. Here a copy of dev's pipeline stack stands for the
    second (tests/stacks/test_several_pipelines.py synthesizes a real one)."""
    for template in dev.assembly.glob("*.template.json"):
        shutil.copy(template, tmp_path)
    manifest = json.loads((dev.assembly / "manifest.json").read_text())
    qa = dev.stacks.pipeline.stack_name
    second = json.loads((tmp_path / f"{qa}.template.json").read_text())
    second["Outputs"][TASK_OUTPUT]["Value"] = "text-classification"
    (tmp_path / "second.template.json").write_text(json.dumps(second))
    manifest["artifacts"] = {
        name: artifact
        for name, artifact in manifest["artifacts"].items()
        if name in {stack.stack_name for stack in dev.stacks.all()}
    }
    manifest["artifacts"]["second"] = {
        **manifest["artifacts"][qa],
        "properties": {"templateFile": "second.template.json"},
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert find_pipeline_stack(tmp_path, "text-classification") == "second"
    assert find_pipeline_stack(tmp_path, "question-answering") == qa
    with pytest.raises(UnsupportedDefinition, match=rf"2 pipeline stacks: {qa} \(question-answering\), second"):
        find_pipeline_stack(tmp_path)


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


def test_a_model_whose_tokenizer_does_not_fit_is_refused_before_anything_runs(dev, tmp_path, capsys):
    model = tmp_path / "mixed-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": 2}))
    (model / "vocab.txt").write_text("[PAD]\na\nb\n")
    (model / "model.safetensors").write_bytes(b"\0")
    argv = ["--assembly", str(dev.assembly), "--stack", dev.stacks.pipeline.stack_name, "--work-dir", str(tmp_path)]
    assert run_local([*argv, "--model", str(model)]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and f"error: the tokenizer in {model} is not this model's" in err
    assert "staged" not in out and "uploaded" not in out


def test_a_base_model_uri_with_nothing_staged_names_the_model_option(dev, tmp_path, capsys):
    stack = dev.stacks.pipeline.stack_name
    bucket = load_synthesized_pipeline(dev.assembly, stack, LocalAccount()).artifacts_bucket
    uri = f"s3://{bucket}/{dev.settings.layout.base_models}/mine/"
    argv = ["--assembly", str(dev.assembly), "--stack", stack, "--work-dir", str(tmp_path)]
    assert run_local([*argv, "--params", f"Epochs=1 BaseModelUri={uri}"]) == 2
    out, err = capsys.readouterr()
    assert f"error: BaseModelUri={uri}: no model is staged there" in err and "--model (make train MODEL=" in err
    assert "staged base model" not in out
