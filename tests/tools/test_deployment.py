"""tools/deployment.py: which settings a tool acts on when an environment deploys a pipeline per task."""

from __future__ import annotations

import json

import pytest

from tools import deployment
from tools.deployment import ToolError, load_deployment, settings_for

TEXT = "text-classification"


def test_a_task_the_environment_does_not_deploy_is_refused_before_any_aws_call(monkeypatch):
    """dev deploys question answering only: an AWS tool given --task text-classification names the fix and never
    opens a session (no credentials exist here, so reaching one would fail differently)."""
    monkeypatch.setattr(deployment, "aws_session", lambda: pytest.fail("an AWS session was opened"))
    with pytest.raises(
        ToolError,
        match=rf"environment dev has no pipeline of task {TEXT} \(it deploys: "
        r"question-answering\); add it to environments.dev.pipelines in cdk.json",
    ):
        load_deployment("dev", TEXT)


def with_text_classification(monkeypatch, tmp_path) -> None:
    """cdk.json as it stands, with dev deploying a text-classification pipeline (its gate at 61) beside its own."""
    cdk_json = json.loads(deployment.CDK_JSON.read_text())
    cdk_json["context"]["environments"]["dev"]["pipelines"] = {TEXT: {"evaluation": {"f1_threshold": 61}}}
    (tmp_path / "cdk.json").write_text(json.dumps(cdk_json))
    monkeypatch.setattr(deployment, "CDK_JSON", tmp_path / "cdk.json")


def test_the_settings_of_a_task_are_those_its_synth_reads(monkeypatch, tmp_path):
    """settings_for(env, task) reads cdk.json as `make synth TASK=<task>` does: the environment's pipeline of that
    task where it deploys one, else the environment with that task in place of its own (a local run's assembly)."""
    replaced = settings_for("dev", TEXT)
    assert replaced.task == TEXT and replaced.evaluation.f1_threshold == settings_for("dev").evaluation.f1_threshold
    with_text_classification(monkeypatch, tmp_path)
    deployed = settings_for("dev", TEXT)
    assert (deployed.task, deployed.evaluation.f1_threshold) == (TEXT, 61)
    assert deployed == settings_for("dev").pipeline_of(TEXT)


def test_the_make_commands_a_tool_suggests_name_the_pipeline_it_acted_on(monkeypatch, tmp_path, aws):
    """Against the emulator (its STS answers get_caller_identity): the second pipeline's commands carry TASK, the
    environment's own pipeline's do not, named by its task or not at all."""
    with_text_classification(monkeypatch, tmp_path)
    assert load_deployment("dev", TEXT).make_values == f"ENV=dev TASK={TEXT}"
    assert load_deployment("dev", TEXT).settings.pipeline_name == f"hfqa-dev-{TEXT}-fine-tuning"
    assert load_deployment("dev", "question-answering").make_values == load_deployment("dev").make_values == "ENV=dev"
