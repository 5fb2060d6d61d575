"""Settings.pipelines: an environment that deploys a pipeline per task, each with its own names, gate and dataset
root, sharing the environment's storage and network."""

from __future__ import annotations

import json

import pytest
from tasks import task

from config import ConfigError, load_settings

TEXT = "text-classification"
TOKENS = "token-classification"


def with_pipelines(cdk_context, pipelines, **more):
    return load_settings({**cdk_context, "pipelines": json.dumps(pipelines), **more})


def test_each_pipeline_has_its_own_names_gate_and_dataset_root(cdk_context):
    settings = with_pipelines(cdk_context, {TEXT: {"evaluation": {"f1_threshold": 70}}, TOKENS: {}})
    qa, text, tokens = settings.deployed_pipelines
    assert (qa, text.task, tokens.task) == (settings, TEXT, TOKENS)
    # Question answering's names are those it had before tasks existed; the others carry their RESOURCE_INFIX.
    assert qa.stack_name("pipeline") == "hfqa-dev-pipeline" and qa.notification_topic_name == "hfqa-dev-notifications"
    assert text.stack_name("pipeline") == "hfqa-dev-text-classification-pipeline"
    for name in ("stack_name", "pipeline_name", "model_package_group_name", "notification_topic_name"):
        values = [
            getattr(p, name)("pipeline") if name == "stack_name" else getattr(p, name) for p in (qa, text, tokens)
        ]
        assert len(set(values)) == 3, (name, values)
    assert len({p.record_model_role_name("us-east-1") for p in (qa, text, tokens)}) == 3
    assert len({p.function_log_group("ClaimManifest") for p in (qa, text, tokens)}) == 3
    assert len({p.trigger_dead_letter_queue_name for p in (qa, text, tokens)}) == 3
    assert all(p.function_log_group("ClaimManifest").startswith(settings.log_group_root) for p in (text, tokens))
    # One dataset root per task, none a prefix of another's manifest pattern.
    assert [p.datasets.root for p in (qa, text, tokens)] == ["datasets", f"datasets-{TEXT}", f"datasets-{TOKENS}"]
    # The gate starts from its defaults; everything else from the environment (dev: 85, a g5, spot).
    assert (qa.evaluation.f1_threshold, text.evaluation.f1_threshold) == (85.0, 70.0)
    assert tokens.evaluation == type(qa.evaluation)()
    assert text.training == qa.training and text.name_prefix == qa.name_prefix
    assert text.hyperparameters.logging_steps == qa.hyperparameters.logging_steps == 10
    assert settings.pipeline_of(TEXT) == text


def test_an_override_deep_merges_into_the_environments_section(cdk_context):
    text = with_pipelines(cdk_context, {TEXT: {"training": {"use_spot": False}}}).pipeline_of(TEXT)
    assert text.training.use_spot is False
    assert text.training.instance_type == "ml.g5.2xlarge"  # dev's, kept


@pytest.mark.parametrize(
    "pipelines, message",
    [
        ({"question-answering": {}}, "pipelines.question-answering: the environment's own task"),
        ({TEXT: {"network": {"mode": "none"}}}, f"pipelines.{TEXT}: network is shared by the environment's pipelines"),
        ({TEXT: {"task": TOKENS}}, f"pipelines.{TEXT}: task is shared"),
        ({TEXT: {"evaluation": {"f1_thresold": 1}}}, rf"pipelines.{TEXT}.evaluation.f1_thresold: unknown key"),
        ({TEXT: {"hyperparameters": {"epochs": -1}}}, rf"pipelines.{TEXT}.hyperparameters.epochs: Input should be"),
        ({TEXT: {"training": {"checkpoint_prefix": "other"}}}, rf"pipelines.{TEXT}.training.checkpoint_prefix"),
        ({"text-clasification": {}}, "pipelines.text-clasification"),
    ],
)
def test_a_bad_pipeline_fails_at_synth_naming_its_key(cdk_context, pipelines, message):
    with pytest.raises(ConfigError, match=message):
        with_pipelines(cdk_context, pipelines)


def test_every_rule_of_an_environment_holds_for_each_of_its_pipelines(cdk_context):
    """prod's rules apply to its other pipelines too: a benchmark and an F1 floor of their own (not QA's)."""
    with pytest.raises(ConfigError) as err:
        with_pipelines(cdk_context, {TOKENS: {}}, env="prod")
    assert f"pipelines.{TOKENS}: production needs evaluation.benchmark" in str(err.value)
    assert f"pipelines.{TOKENS}: production needs evaluation.min_f1_threshold > 0" in str(err.value)


def test_no_pipeline_of_a_task_names_those_the_environment_deploys(cdk_context):
    settings = with_pipelines(cdk_context, {TEXT: {}})
    with pytest.raises(ValueError, match=f"no pipeline of task {TOKENS} .*deploys: question-answering, {TEXT}"):
        settings.pipeline_of(TOKENS)
    assert task(TEXT).RESOURCE_INFIX in settings.pipeline_of(TEXT).pipeline_prefix


def test_a_task_override_selects_that_pipeline_as_it_deploys(cdk_context):
    """`make synth TASK=<task>` (-c task=...): a task of `pipelines` is that pipeline, its own gate included, alone
    in the assembly; another task replaces the environment's own, as without `pipelines`."""
    pipelines = {TEXT: {"evaluation": {"f1_threshold": 70}}}
    selected = with_pipelines(cdk_context, pipelines, task=TEXT)
    assert selected == with_pipelines(cdk_context, pipelines).pipeline_of(TEXT)
    assert selected.evaluation.f1_threshold == 70 and selected.deployed_pipelines == (selected,)
    replaced = with_pipelines(cdk_context, pipelines, task=TOKENS)
    assert [p.task for p in replaced.deployed_pipelines] == [TOKENS, TEXT]
