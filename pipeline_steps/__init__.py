"""Typed settings -> SageMaker Pipeline definition JSON. The only SageMaker-SDK code; knows nothing of CDK."""

import logging
import os

# Before the SDK is first imported: no v2 deprecation banner, no INFO lines about config-file lookups.
os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
logging.getLogger("sagemaker.config").setLevel(logging.WARNING)
