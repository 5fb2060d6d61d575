"""Reading a pipeline definition: its steps (condition branches included) and its expressions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def all_steps(steps: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every step of `definition["Steps"]`, depth first, including the steps of condition branches."""
    for step in steps:
        yield step
        for branch in ("IfSteps", "ElseSteps"):
            yield from all_steps(step.get("Arguments", {}).get(branch, []))


def find_step(definition: dict[str, Any], name: str) -> dict[str, Any]:
    """The step called `name`, also inside condition branches."""
    for step in all_steps(definition["Steps"]):
        if step["Name"] == name:
            return step
    raise KeyError(name)


def is_expression(value: Any) -> bool:
    """A pipeline expression (`{"Get": ...}`, `{"Std:Join": ...}`, ...) rather than a literal."""
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Get", "Std:"))


def expressions(node: Any) -> Iterator[dict[str, Any]]:
    """Every expression in `node`, outer ones before the expressions inside them."""
    if isinstance(node, dict):
        if is_expression(node):
            yield node
        for value in node.values():
            yield from expressions(value)
    elif isinstance(node, list):
        for value in node:
            yield from expressions(value)


def _step_dependencies(step: dict[str, Any], names: set[str]) -> set[str]:
    text = json.dumps(step)
    referenced = {name for name in names if f'"Steps.{name}.' in text or f'"Get": "Steps.{name}.' in text}
    return (referenced | set(step.get("DependsOn", []))) - {step["Name"]}


def execution_order(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Steps of one level (the top level or a condition branch) in dependency order (data references and
    DependsOn); references to steps outside `steps` are already satisfied."""
    names = {s["Name"] for s in steps}
    pending = {s["Name"]: s for s in steps}
    ordered: list[dict[str, Any]] = []
    done: set[str] = set()
    while pending:
        ready = [s for n, s in pending.items() if _step_dependencies(s, names) <= done]
        if not ready:
            raise ValueError(f"cyclic step dependencies among {sorted(pending)}")
        for step in ready:
            ordered.append(step)
            done.add(step["Name"])
            del pending[step["Name"]]
    return ordered
