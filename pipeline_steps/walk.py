"""Reading a pipeline definition: its steps (condition branches included) and its expressions."""

from __future__ import annotations

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
