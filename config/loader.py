"""Build `Settings` from CDK context: `cdk.json` environments, then `-c section.key=value` overrides."""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from config.settings import Settings

DEFAULT_ENV = "dev"
# Context keys this project reads besides the settings: `env` picks the environment, `environments` is
# cdk.json's block of them.
PROJECT_KEYS = ("env", "environments")
# Context keys that belong to the CDK itself: feature flags (`@aws-cdk/...`), keys the CLI and the App set
# (`aws:cdk:enable-path-metadata`, `aws:cdk:bundling-stacks`, ...), the CLI's `acknowledged-issue-numbers`, and
# cached lookups in cdk.context.json (`availability-zones:account=...:region=...`).
# https://docs.aws.amazon.com/cdk/v2/guide/context.html, https://docs.aws.amazon.com/cdk/v2/guide/featureflags.html
CDK_OWN_KEY = re.compile(r"^(@|aws:cdk:|cdk[-:])|:account=|^acknowledged-issue-numbers$")


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


def _section_models() -> dict[str, type[BaseModel]]:
    """Settings section name -> its model (the sections `-c section.key=value` may address)."""
    sections: dict[str, type[BaseModel]] = {}
    for section, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            sections[section] = annotation
    return sections


def _fields_at(loc: tuple[object, ...]) -> list[str]:
    """The field names of the settings model that holds the key at `loc` (for "did you mean")."""
    model: type[BaseModel] = Settings
    for part in loc[:-1]:
        annotation = model.model_fields[str(part)].annotation if str(part) in model.model_fields else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word.lower(), [choice.lower() for choice in choices], n=1, cutoff=0.6)
    by_lower = {choice.lower(): choice for choice in choices}
    return f"; did you mean {by_lower[close[0]]}?" if close else ""


def _format_errors(env_name: str, err: ValidationError) -> str:
    lines = [f"invalid settings for environment '{env_name}':"]
    for problem in err.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "(settings)"
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            hint = _did_you_mean(str(problem["loc"][-1]), _fields_at(problem["loc"]))
            message = f"unknown key{hint or ' (check the spelling against config/settings.py)'}"
        lines.append(f"  - {where}: {message}")
    return "\n".join(lines)


def _unknown_key_error(key: str, value: Any, environments: Mapping[str, Any]) -> ConfigError:
    """Why `-c key=value` is not a key of this project or of the CDK, and what was probably meant."""
    if str(value) in environments or key.lower() in ("env", "evn", "environment", "stage"):
        return ConfigError(
            f"-c {key}={value}: unknown context key, so nothing would select that environment; "
            f"use -c env={value} (cdk.json defines: {', '.join(sorted(environments))})"
        )
    for section, model in _section_models().items():
        if key in model.model_fields:
            return ConfigError(f"-c {key}=...: unknown context key; did you mean {section}.{key}?")
    top_level = [name for name in Settings.model_fields if name != "env_name"]
    hint = _did_you_mean(key, [*PROJECT_KEYS, *top_level, *_section_models()])
    return ConfigError(
        f"-c {key}=...: unknown context key{hint or ''} (settings are config/settings.py fields, nested ones as "
        "section.key; CDK's own keys start with @aws-cdk/ or aws:cdk:)"
    )


def load_settings(context: Mapping[str, Any]) -> Settings:
    """Resolve the environment named by context key `env` (default dev) and apply overrides.

    Context keys containing a dot (`training.instance_count=4`) override that field; keys that name a
    top-level field (`name_prefix=x`) override it too; CDK's own keys are left to the CDK. Any other key stops
    here with the fix: a misspelt key never falls back silently to a default (or to dev).
    """
    environments = context.get("environments") or {}
    top_level = set(Settings.model_fields) - {"env_name"}
    overrides: dict[str, Any] = {}
    for key, value in context.items():
        if key in PROJECT_KEYS or CDK_OWN_KEY.search(key):
            continue
        if key not in top_level and "." not in key:
            raise _unknown_key_error(key, value, environments)
        overrides[key] = value
    env_name = str(context.get("env") or DEFAULT_ENV)
    if env_name not in environments:
        known = ", ".join(sorted(environments)) or "none"
        raise ConfigError(f"unknown environment '{env_name}' (-c env=...); cdk.json defines: {known}")
    values = copy.deepcopy(dict(environments[env_name]))
    values["env_name"] = env_name
    for key, value in overrides.items():
        if "." in key:
            _set_dotted(values, key, value)
        else:
            values[key] = _parse_cli_value(value)
    # -c task=<a task of the environment's `pipelines`>: that pipeline alone, as it deploys (`make synth TASK=...`
    # writes its assembly for a local run); another task replaces the environment's own.
    selected = str(values["task"]) if "task" in overrides and values["task"] in values.get("pipelines", {}) else None
    if selected is not None:
        values.pop("task")
        values.update({"task": environments[env_name]["task"]} if "task" in environments[env_name] else {})
    try:
        settings = Settings.model_validate(values)
    except ValidationError as err:
        raise ConfigError(_format_errors(env_name, err)) from None
    return settings if selected is None else settings.pipeline_of(selected)
