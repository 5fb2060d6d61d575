#!/usr/bin/env python3
"""CDK entry point: load the settings of the chosen environment, build its stacks, synthesize."""

import os
import sys
from pathlib import Path

# Before aws_cdk starts its node process: no end-of-life banner for the Node 20 the machines have; before the
# SageMaker SDK is imported (on a definition-cache miss): no v2 deprecation banner.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")

import aws_cdk as cdk

from config import ConfigError, load_settings, read_cdk_json_context
from config.paths import UnsafeBuildDir
from pipeline_steps.definition_cache import cache_dir_for
from stacks.app_builder import build_stacks

HERE = Path(__file__).resolve().parent


def main() -> None:
    # `cdk` passes cdk.json context itself; `python app.py` needs it loaded (CLI values still win).
    app = cdk.App(context=read_cdk_json_context(HERE / "cdk.json"))
    try:
        settings = load_settings(app.node.get_all_context())
    except ConfigError as err:
        sys.exit(f"error: {err}")
    try:
        build_stacks(app, settings, definition_cache=cache_dir_for(os.environ))
    except UnsafeBuildDir as err:
        sys.exit(f"error: {err}")
    app.synth()


if __name__ == "__main__":
    main()
