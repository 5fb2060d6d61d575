"""`-c key=value` as the CDK CLI passes it: every key is a setting, a project key or the CDK's own."""

from __future__ import annotations

import pytest

from config import ConfigError, load_settings


def load(cdk_context, **context):
    return load_settings({**cdk_context, **context})


@pytest.mark.parametrize("key", ["ENV", "evn", "environment", "Env"])
def test_env_like_keys_stop_synth_with_the_fix(cdk_context, key):
    with pytest.raises(ConfigError, match=rf"-c {key}=prod: unknown context key.*use -c env=prod"):
        load(cdk_context, **{key: "prod"})


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("name_prefx", r"-c name_prefx=\.\.\.: unknown context key; did you mean name_prefix\?"),
        ("trainig", r"did you mean training\?"),
        ("instance_count", r"did you mean training\.instance_count\?"),
        ("zzz", r"-c zzz=\.\.\.: unknown context key \(settings are config/settings\.py fields"),
    ],
)
def test_unknown_top_level_keys_stop_synth_with_did_you_mean(cdk_context, key, message):
    with pytest.raises(ConfigError, match=message):
        load(cdk_context, **{key: "x"})


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("training.instance_cont", r"training\.instance_cont: unknown key; did you mean instance_count\?"),
        ("trainin.instance_count", r"trainin: unknown key; did you mean training\?"),
        ("evaluation.min_f1_treshold", r"did you mean min_f1_threshold\?"),
    ],
)
def test_misspelt_nested_keys_get_did_you_mean(cdk_context, key, message):
    with pytest.raises(ConfigError, match=message):
        load(cdk_context, **{key: "4"})


def test_cdk_own_keys_and_lookups_pass(cdk_context):
    cdk_keys = {
        "@aws-cdk/core:newStyleStackSynthesis": "true",  # a feature flag
        "@aws-cdk-containers/ecs-service-extensions:enableDefaultLogDriver": "true",  # one outside @aws-cdk/
        "aws:cdk:enable-path-metadata": True,  # set by the CLI
        "aws:cdk:bundling-stacks": ["**"],
        "acknowledged-issue-numbers": [34892],
        "availability-zones:account=123456789012:region=us-east-1": ["us-east-1a", "us-east-1b"],
    }
    assert load(cdk_context, **cdk_keys).env_name == "dev"


def test_env_selects_the_environment_and_settings_override(cdk_context):
    settings = load(cdk_context, env="prod", name_prefix="hfqa-prod2", **{"training.instance_count": "4"})
    assert (settings.env_name, settings.name_prefix, settings.training.instance_count) == ("prod", "hfqa-prod2", 4)


def test_a_misspelt_task_stops_synth_with_did_you_mean(cdk_context):
    with pytest.raises(
        ConfigError, match=r"task: unknown task 'text-clasification'; did you mean text-classification\?"
    ):
        load(cdk_context, task="text-clasification")


def test_the_task_is_a_setting_and_question_answering_the_default(cdk_context):
    assert load(cdk_context).task == "question-answering"
    assert load(cdk_context, task="token-classification").task_facts.NAME == "token-classification"


@pytest.mark.parametrize(
    ("task", "label_names", "message"),
    [
        ("text-classification", None, "the text-classification benchmark needs its label names in index order"),
        ("question-answering", '["a", "b"]', "question-answering has no labels; remove them"),
    ],
)
def test_a_benchmark_pin_names_label_names_exactly_when_the_task_has_labels(cdk_context, task, label_names, message):
    labelled = {"evaluation.benchmark.label_names": label_names} if label_names else {}
    with pytest.raises(ConfigError, match="evaluation.benchmark.label_names: " + message):
        load(cdk_context, env="prod", task=task, **labelled)
    if label_names is None:
        pinned = load(cdk_context, env="prod", task=task, **{"evaluation.benchmark.label_names": '["a", "b"]'})
        assert pinned.evaluation.benchmark.label_names == ("a", "b")
