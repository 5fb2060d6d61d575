"""An offline, deterministic SageMaker SDK (v2) session: no credentials, no network, no telemetry."""

from __future__ import annotations

import functools
import json
import logging
import warnings

import boto3
import sagemaker.utils
from sagemaker.config import validate_sagemaker_config
from sagemaker.workflow.pipeline_context import PipelineSession

# SDK defaults given inline: telemetry off, so no DNS/HTTP at definition time and no config-file reads.
SDK_CONFIG = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}
BUILD_REGION = "us-east-1"  # any valid region name: region-specific values are placeholders


@functools.cache
def _validate_config_once(config_json: str) -> None:
    validate_sagemaker_config(json.loads(config_json))


# The SDK re-validates its defaults config against a JSON schema on every lookup (~0.3 s, 60 lookups per
# build). The config is a constant here: validate each distinct one once.
sagemaker.utils.validate_sagemaker_config = lambda config=None: _validate_config_once(
    json.dumps(config, sort_keys=True)
)


def offline_session(default_bucket: str) -> PipelineSession:
    """A PipelineSession that never calls AWS (dummy static credentials, explicit region and bucket)."""
    for name in ("sagemaker.workflow.utilities", "sagemaker.telemetry.telemetry_logging", "sagemaker"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="sagemaker")
    boto_session = boto3.Session(region_name=BUILD_REGION, aws_access_key_id="offline", aws_secret_access_key="offline")
    return PipelineSession(boto_session=boto_session, default_bucket=default_bucket, sagemaker_config=SDK_CONFIG)
