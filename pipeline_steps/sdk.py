"""An offline, deterministic SageMaker SDK (v2) session: no credentials, no network, no telemetry."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import warnings
from collections.abc import Iterator

import boto3
import sagemaker.utils
from sagemaker.config import validate_sagemaker_config
from sagemaker.workflow.pipeline_context import PipelineSession

# SDK defaults given inline: telemetry off, so no DNS/HTTP at definition time and no config-file reads.
SDK_CONFIG = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}
BUILD_REGION = "us-east-1"  # any valid region name: region-specific values are placeholders
CHATTY_LOGGERS = (
    "sagemaker.config",
    "sagemaker.workflow.utilities",
    "sagemaker.telemetry.telemetry_logging",
    "sagemaker",
)


@functools.cache
def _validate_config_once(config_json: str) -> None:
    validate_sagemaker_config(json.loads(config_json))


def _validate_each_config_once(sagemaker_config: dict | None = None) -> None:
    _validate_config_once(json.dumps(sagemaker_config, sort_keys=True))


def _offline_boto3_session() -> boto3.Session:
    return boto3.Session(region_name=BUILD_REGION, aws_access_key_id="offline", aws_secret_access_key="offline")


@contextlib.contextmanager
def offline_sdk() -> Iterator[None]:
    """While a definition is built: the SDK's INFO lines and warnings kept out of the output, and its constant
    config validated once (the SDK re-validates it against a JSON schema on every lookup, ~0.3 s each, 60
    lookups per build). boto3's default session is an offline one too: every Estimator creates a
    TensorBoardApp whose `boto3.client("sagemaker")` would otherwise walk the credential chain (environment,
    profiles, instance metadata) and log "Found credentials ..." during an offline synth. Everything is
    restored on exit."""
    loggers = [logging.getLogger(name) for name in CHATTY_LOGGERS]
    levels = [logger.level for logger in loggers]
    validate = sagemaker.utils.validate_sagemaker_config
    default_session = boto3.DEFAULT_SESSION
    try:
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        boto3.DEFAULT_SESSION = _offline_boto3_session()
        sagemaker.utils.validate_sagemaker_config = _validate_each_config_once
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module="sagemaker")
            yield
    finally:
        boto3.DEFAULT_SESSION = default_session
        sagemaker.utils.validate_sagemaker_config = validate
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def offline_session(default_bucket: str) -> PipelineSession:
    """A PipelineSession that never calls AWS (dummy static credentials, explicit region and bucket)."""
    return PipelineSession(
        boto_session=_offline_boto3_session(), default_bucket=default_bucket, sagemaker_config=SDK_CONFIG
    )
