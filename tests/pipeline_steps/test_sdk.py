"""The offline SDK session: building a definition walks no credential chain."""

from __future__ import annotations

import logging

import boto3
from sagemaker.interactive_apps.tensorboard import TensorBoardApp

from pipeline_steps.sdk import offline_sdk


def test_no_credential_lookup_while_a_definition_is_built(monkeypatch, caplog):
    """Every Estimator creates a TensorBoardApp, whose `boto3.client("sagemaker")` used boto3's default session:
    with credentials in the environment, botocore logged "Found credentials in environment variables."."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-the-environment")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "from-the-environment")
    before = boto3.DEFAULT_SESSION
    with caplog.at_level(logging.DEBUG, logger="botocore.credentials"), offline_sdk():
        TensorBoardApp(region="us-east-1")
        assert boto3.DEFAULT_SESSION.get_credentials().access_key == "offline"
    assert not [r for r in caplog.records if r.name == "botocore.credentials"], caplog.text
    assert boto3.DEFAULT_SESSION is before  # restored
