"""EventBridge event-pattern matching for the operators this project uses (and a clear error for others).

Supported: nested objects, lists of exact values (OR), and the `wildcard`, `prefix`, `suffix` and
`exists` operators.
"""

from __future__ import annotations

import fnmatch
from typing import Any


class UnsupportedPattern(ValueError):
    """The pattern uses an EventBridge operator this matcher does not implement."""


def _value_matches(condition: Any, value: Any, present: bool) -> bool:
    if isinstance(condition, dict):
        if len(condition) != 1:
            raise UnsupportedPattern(f"one operator per condition expected, got {sorted(condition)}")
        ((operator, operand),) = condition.items()
        if operator == "exists":
            return present is bool(operand)
        if not present or not isinstance(value, str):
            return False
        if operator == "wildcard":
            # EventBridge '*' matches any run of characters, '/' included; no other metacharacters.
            return fnmatch.fnmatchcase(value, operand.replace("[", "[[]").replace("?", "[?]"))
        if operator == "prefix":
            return value.startswith(operand)
        if operator == "suffix":
            return value.endswith(operand)
        raise UnsupportedPattern(f"operator {operator!r} is not supported by the local matcher")
    return present and value == condition


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """True when `event` matches `pattern` (every field; any value of each field's list)."""
    for field, condition in pattern.items():
        present = isinstance(event, dict) and field in event
        value = event.get(field) if present else None
        if isinstance(condition, dict):
            if not (present and isinstance(value, dict) and matches(condition, value)):
                return False
        elif isinstance(condition, list):
            values = value if isinstance(value, list) else [value]
            if not any(_value_matches(c, v, present) for c in condition for v in values):
                return False
        else:
            raise UnsupportedPattern(f"field {field!r}: a pattern value must be a list or an object")
    return True
