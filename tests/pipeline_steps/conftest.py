"""The pipeline definition built once per session from the dev settings (and variants where needed)."""

from __future__ import annotations

import pytest

from config import load_settings
from pipeline_steps.definition import build_definition
from pipeline_steps.walk import find_step


@pytest.fixture(scope="session")
def settings(cdk_context):
    return load_settings(cdk_context)


@pytest.fixture(scope="session")
def definition(settings):
    return build_definition(settings)


@pytest.fixture(scope="session")
def prod_definition(cdk_context):
    return build_definition(load_settings({**cdk_context, "env": "prod"}))


@pytest.fixture(scope="session", params=["dev", "prod"])
def fine_tune_definition(cdk_context, request):
    """processing.tokenize_in = "fine_tune" (FineTune tokenizes), in dev and in prod (a benchmark)."""
    return build_definition(load_settings({**cdk_context, "env": request.param, "processing.tokenize_in": "fine_tune"}))


def step(definition, name):
    """A step by name, also inside condition branches."""
    return find_step(definition, name)
