"""`make deploy` / `make diff` CONTEXT="key=value ...": each override validated, then passed to the CDK as `-c`.
CDK is a stand-in that prints the command line it would get (no CDK process, no AWS)."""

from __future__ import annotations

import pytest

from tests.tools.test_makefile import make
from tools import cdk_context
from tools.deployment import ToolError

STAND_IN = "CDK=echo cdk"
ZONES = '["us-east-1a", "us-east-1b"]'  # a value with a space: quoted, it stays one word
CONTEXT = f"CONTEXT=hyperparameters.epochs=3 'network.availability_zones={ZONES}'"


@pytest.mark.parametrize("target", ["deploy", "diff"])
def test_context_overrides_reach_the_cdk_as_c_arguments(target):
    result = make(target, "ENV=dev", STAND_IN, CONTEXT)
    assert result.returncode in (0, 2), result.stderr  # diff's second command needs AWS: its failure is not ours
    cdk_line = next(line for line in result.stdout.splitlines() if line.startswith("cdk "))
    assert cdk_line.endswith(
        f"-c env=dev --output cdk.out/dev -c hyperparameters.epochs=3 -c network.availability_zones={ZONES}"
    )


def test_an_unknown_key_stops_before_the_cdk_with_did_you_mean():
    result = make("deploy", "ENV=dev", STAND_IN, "CONTEXT=training.instance_cont=2")
    assert result.returncode != 0
    assert "training.instance_cont: unknown key; did you mean instance_count?" in result.stderr
    assert not any(line.startswith("cdk ") for line in result.stdout.splitlines())


def test_a_value_with_shell_syntax_is_text(tmp_path):
    planted = tmp_path / "pwned"
    value = f"'name_prefix=x$(touch {planted})`touch {planted}`' *"
    result = make("deploy", "ENV=dev", STAND_IN, f"CONTEXT={value}")
    assert not planted.exists(), result.stdout + result.stderr
    assert result.returncode != 0
    assert "'*' is not key=value" in result.stderr, "never globbed into the folder's file names"


@pytest.mark.parametrize(
    ("text", "message"),
    [("instance_count", "is not key=value"), ("env=prod", "use ENV=prod"), ("a='b", "quotation")],
)
def test_words_that_are_not_overrides_are_refused(text, message):
    with pytest.raises(ToolError, match=message):
        cdk_context.overrides(text)


def test_no_context_adds_nothing():
    assert cdk_context.context_arguments("dev", "") == []


@pytest.mark.parametrize("target", ["deploy", "diff"])
def test_task_names_its_pipeline_s_stack_instead_of_all(target):
    """One pipeline of several (here a second one added by CONTEXT): its stack by name, `--all` dropped; the CDK
    deploys the data and network stacks it depends on with it."""
    second = """CONTEXT='pipelines={"text-classification":{}}'"""
    result = make(target, "ENV=dev", "TASK=text-classification", STAND_IN, second)
    assert result.returncode in (0, 2), result.stderr
    cdk_line = next(line for line in result.stdout.splitlines() if line.startswith("cdk "))
    assert cdk_line.startswith(f"cdk {target} -c env=dev ") and "--all" not in cdk_line
    assert cdk_line.endswith(" hfqa-dev-text-classification-pipeline")
    own = make(target, "ENV=dev", STAND_IN, second)
    own_line = next(line for line in own.stdout.splitlines() if line.startswith("cdk "))
    assert ("--all" in own_line) is (target == "deploy") and not own_line.endswith("-pipeline")


def test_a_task_the_environment_does_not_deploy_stops_before_the_cdk():
    result = make("deploy", "ENV=dev", "TASK=token-classification", STAND_IN)
    assert result.returncode != 0
    assert "environment dev has no pipeline of task token-classification (it deploys: question-answering)" in (
        result.stderr
    )
    assert not any(line.startswith("cdk ") for line in result.stdout.splitlines())


def test_the_pipeline_stack_depends_on_the_data_and_network_stacks(dev):
    """What `cdk deploy <pipeline stack>` relies on to deploy them with it (the CDK adds a stack's dependencies)."""
    data, network, pipeline = dev.stacks.all()[:3]
    assert pipeline.stack_name == dev.settings.stack_name("pipeline")
    assert {stack.stack_name for stack in pipeline.dependencies} == {data.stack_name, network.stack_name}
