"""Issue 30, finding 6: a value given on make's command line is text, never a make function. Before the fix,
`make help NAME='$(shell ...)'` ran the command while make exported NAME to the recipe's environment."""

from __future__ import annotations

import pytest

from tests.tools.test_makefile import make


@pytest.mark.parametrize(
    ("target", "variable"),
    [("help", "NAME"), ("verify-model", "PACKAGE"), ("start", "PARAMS"), ("report", "EXECUTION"), ("help", "ENV")],
)
def test_a_make_function_on_the_command_line_is_never_run(tmp_path, target, variable):
    planted = tmp_path / "pwned"
    value = f"x$(shell touch {planted})y"
    values = {"NAME": "sample-squad", "VERSION": "v1", "PACKAGE": "arn", variable: value}
    # PY is the interpreter every tool target runs: `echo` prints the command line the tool would get.
    result = make(target, "PY=echo", *(f"{k}={v}" for k, v in values.items()))
    assert not planted.exists(), result.stdout + result.stderr
    if target != "help":
        assert value in result.stdout, "the value reaches the tool unchanged, as text"


def test_values_from_the_command_line_still_reach_make_itself():
    """ENV is read by make too: the demo lowers F1Threshold outside prod only."""
    for env_name, lowered in (("dev", True), ("prod", False)):
        result = make("-n", "demo", f"ENV={env_name}", "PY=echo", "CDK=echo")
        assert result.returncode == 0, result.stderr
        assert ("--param F1Threshold=40" in result.stdout) is lowered, result.stdout
