"""Typed, validated project settings. No CDK and no SageMaker imports live here."""

from config.layout import ArtifactLayout
from config.loader import ConfigError, load_settings, read_cdk_json_context
from config.settings import Settings

__all__ = ["ArtifactLayout", "ConfigError", "Settings", "load_settings", "read_cdk_json_context"]
