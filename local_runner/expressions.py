"""Resolve pipeline expressions: Get (parameters, execution variables, step properties) and Std:Join, the two
the definition uses (its steps read each other's properties, no property file). Anything else, Std:JsonGet
included, is rejected by name."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from local_runner.errors import StepFailed, UnsupportedDefinition
from pipeline_steps.walk import is_expression

EXPRESSION_KEYS = ("Get", "Std:Join")
INDEX = re.compile(r"^(\w+)\[(?:'([^']+)'|(\d+))\]$")


class ExpressionResolver:
    """Evaluates expressions against parameters, execution variables and finished steps' properties."""

    def __init__(
        self,
        parameters: Mapping[str, Any],
        execution: Mapping[str, Any],
        step_properties: Mapping[str, dict[str, Any]],
    ) -> None:
        self.parameters = parameters
        self.execution = execution
        self.step_properties = step_properties

    def resolve(self, value: Any) -> Any:
        """`value` with every expression inside it evaluated."""
        if is_expression(value):
            ((operator, operand),) = value.items()
            if operator not in EXPRESSION_KEYS:
                raise UnsupportedDefinition(f"expression {operator!r} is not supported by the local runner")
            return getattr(self, "_" + operator.replace("Std:", "std_").lower())(operand)
        if isinstance(value, dict):
            return {key: self.resolve(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        return value

    def _get(self, reference: str) -> Any:
        kind, _, rest = reference.partition(".")
        if kind == "Parameters":
            if rest not in self.parameters:
                raise UnsupportedDefinition(f"reference to undeclared parameter {reference!r}")
            return self.parameters[rest]
        if kind == "Execution":
            if rest not in self.execution:
                raise UnsupportedDefinition(f"execution variable {reference!r} is not supported locally")
            return self.execution[rest]
        if kind == "Steps":
            step, _, path = rest.partition(".")
            if step not in self.step_properties:
                raise UnsupportedDefinition(f"{reference!r} refers to a step that has not run")
            return self._walk(self.step_properties[step], path, reference)
        raise UnsupportedDefinition(f"reference {reference!r} is not supported by the local runner")

    @staticmethod
    def _walk(node: Any, path: str, reference: str) -> Any:
        for part in path.split("."):
            match = INDEX.match(part)
            try:
                if match:
                    name, key, index = match.groups()
                    node = node[name]
                    if key is None:
                        node = node[int(index)]
                    elif isinstance(node, dict):  # OutputParameters['name'] of a Lambda step
                        node = node[key]
                    else:  # ProcessingOutputConfig.Outputs['name'], FinalMetricDataList['metric']
                        node = next(o for o in node if key in (o.get("OutputName"), o.get("MetricName")))
                else:
                    node = node[part]
            except StopIteration:
                if path.startswith("FinalMetricDataList"):
                    # SageMaker lists only metrics whose regex matched a log line; a step reading another fails.
                    raise StepFailed(f"{reference}: the training job never logged that metric") from None
                raise UnsupportedDefinition(f"step property {reference!r} does not exist locally") from None
            except (KeyError, IndexError, TypeError):
                raise UnsupportedDefinition(f"step property {reference!r} does not exist locally") from None
        return node

    def _std_join(self, operand: dict[str, Any]) -> str:
        return str(operand["On"]).join(_as_text(self.resolve(v)) for v in operand["Values"])


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)
