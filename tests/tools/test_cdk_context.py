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
