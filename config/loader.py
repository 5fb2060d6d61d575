"""Build `Settings` from CDK context: `cdk.json` environments, then `-c section.key=value` overrides."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from config.settings import Settings

DEFAULT_ENV = "dev"


class ConfigError(ValueError):
    """Invalid settings; the message lists every problem with its dotted key."""


def read_cdk_json_context(path: str | Path = "cdk.json") -> dict[str, Any]:
    """The `context` block of cdk.json (pytest and `python app.py` don't read it by themselves)."""
    return dict(json.loads(Path(path).read_text(encoding="utf-8")).get("context", {}))


def _set_dotted(target: dict[str, Any], dotted_key: str, value: Any) -> None:
    *sections, leaf = dotted_key.split(".")
    node = target
    for section in sections:
        child = node.setdefault(section, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{dotted_key}: '{section}' is a value, not a section")
        node = child
    node[leaf] = _parse_cli_value(value)


def _parse_cli_value(value: Any) -> Any:
    """`-c` values arrive as strings; JSON lists/objects/null are decoded, scalars left to pydantic."""
    if (isinstance(value, str) and value[:1] in ("[", "{")) or value == "null":
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise ConfigError(f"cannot parse {value!r} as JSON: {err}") from err
    return value


def _format_errors(env_name: str, err: ValidationError) -> str:
    lines = [f"invalid settings for environment '{env_name}':"]
    for problem in err.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "(settings)"
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            message = "unknown key (check the spelling against config/settings.py)"
        lines.append(f"  - {where}: {message}")
    return "\n".join(lines)


def _nested_field_names() -> dict[str, str]:
    """Field name -> its section, for the fields of nested sections (to catch `-c instance_count=4`)."""
    names: dict[str, str] = {}
    for section, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names.update({name: section for name in annotation.model_fields})
    return names


def load_settings(context: Mapping[str, Any]) -> Settings:
    """Resolve the environment named by context key `env` (default dev) and apply overrides.

    Context keys containing a dot (`training.instance_count=4`) override that field; keys that name a
    top-level field (`name_prefix=x`) override it too. Other keys belong to the CDK itself.
    """
    env_name = str(context.get("env") or DEFAULT_ENV)
    environments = context.get("environments") or {}
    if env_name not in environments:
        known = ", ".join(sorted(environments)) or "none"
        raise ConfigError(f"unknown environment '{env_name}' (-c env=...); cdk.json defines: {known}")
    values = copy.deepcopy(dict(environments[env_name]))
    values["env_name"] = env_name
    top_level = set(Settings.model_fields) - {"env_name"}
    for key, value in context.items():
        if "." in key and not key.startswith(("@", "aws:", "cdk")):
            _set_dotted(values, key, value)
        elif key in top_level:
            values[key] = _parse_cli_value(value)
        elif key in _nested_field_names():
            raise ConfigError(f"-c {key}=...: did you mean {_nested_field_names()[key]}.{key}?")
    try:
        return Settings.model_validate(values)
    except ValidationError as err:
        raise ConfigError(_format_errors(env_name, err)) from None
