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
def env_definition(cdk_context, request):
    """The default graph (processing.tokenize_in "fine_tune": FineTune tokenizes), in dev and in prod (a benchmark)."""
    return build_definition(load_settings({**cdk_context, "env": request.param}))


@pytest.fixture(scope="session")
def cpu_job_settings(cdk_context):
    """processing.tokenize_in = "cpu_job": ValidateAndTokenize validates and tokenizes before FineTune."""
    return load_settings({**cdk_context, "processing.tokenize_in": "cpu_job"})


@pytest.fixture(scope="session")
def cpu_job_definition(cpu_job_settings):
    return build_definition(cpu_job_settings)


def step(definition, name):
    """A step by name, also inside condition branches."""
    return find_step(definition, name)
