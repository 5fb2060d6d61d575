"""The pipeline definition built once per session from the dev settings (and variants where needed)."""

from __future__ import annotations

import pytest

from config import load_settings
from pipeline_steps.definition import build_definition


@pytest.fixture(scope="session")
def settings(cdk_context):
    return load_settings(cdk_context)


@pytest.fixture(scope="session")
def definition(settings):
    return build_definition(settings)


def step(definition, name):
    """A step by name, also inside condition branches."""
    for candidate in definition["Steps"]:
        if candidate["Name"] == name:
            return candidate
        for branch in ("IfSteps", "ElseSteps"):
            for inner in candidate.get("Arguments", {}).get(branch, []):
                if inner["Name"] == name:
                    return inner
    raise KeyError(name)
