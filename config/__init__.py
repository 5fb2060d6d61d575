"""Typed, validated project settings. No CDK and no SageMaker imports live here."""

from config.layout import ArtifactLayout, DatasetLayout
from config.loader import ConfigError, load_settings, read_cdk_json_context
from config.settings import Settings

__all__ = ["ArtifactLayout", "ConfigError", "DatasetLayout", "Settings", "load_settings", "read_cdk_json_context"]
