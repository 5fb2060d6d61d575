"""The pipeline's Lambda functions, called in this process as the Lambda runtime would call them.

The definition names each function by ARN; locally the ARN's function name is the handler
(`pipeline_functions.claim_handler`, as the stacks configure it). S3 is the local object store's folder
(LOCAL_S3_ROOT) and SageMaker's DescribePipelineExecution / ListPipelineExecutions a JSON file of execution
statuses and starts that the runner keeps (QA_LOCAL_EXECUTIONS).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qa.outputs import LOCAL_EXECUTIONS_ENV, LOCAL_S3_ROOT_ENV

from config.paths import TRAINING_CODE
from local_runner.errors import StepFailed, UnsupportedDefinition


def handler_of(function_arn: str) -> tuple[str, str]:
    """(module, function) named by a local function ARN `arn:...:function:<module>.<function>`."""
    name = function_arn.rsplit(":", 1)[-1]
    module, _, function = name.rpartition(".")
    if not module or not function:
        raise UnsupportedDefinition(f"function {function_arn!r} names no handler (<module>.<function>)")
    return module, function


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class LocalFunctions:
    """Invokes handlers of training_code/ with the local object store and execution statuses."""

    def __init__(self, store_root: Path, executions_file: Path) -> None:
        self.store_root, self.executions_file = store_root, executions_file

    def record_status(self, execution_arn: str, status: str) -> None:
        """Record the execution's status, and its start when first seen (qa.outputs.LOCAL_EXECUTIONS_ENV's form)."""
        statuses = json.loads(self.executions_file.read_text()) if self.executions_file.is_file() else {}
        previous = statuses.get(execution_arn)
        start = previous["start"] if isinstance(previous, dict) else time.time()
        statuses[execution_arn] = {"status": status, "start": start}
        self.executions_file.parent.mkdir(parents=True, exist_ok=True)
        self.executions_file.write_text(json.dumps(statuses, indent=1))

    def invoke(self, function_arn: str, event: dict[str, Any], step_name: str) -> dict[str, Any]:
        module_name, function_name = handler_of(function_arn)
        if str(TRAINING_CODE) not in sys.path:
            sys.path.insert(0, str(TRAINING_CODE))
        handler = getattr(importlib.import_module(module_name), function_name, None)
        if handler is None:
            raise UnsupportedDefinition(f"{module_name} has no handler {function_name!r}")
        environment = {LOCAL_S3_ROOT_ENV: str(self.store_root), LOCAL_EXECUTIONS_ENV: str(self.executions_file)}
        with _environment(environment):
            try:
                result = handler(event, None)
            except Exception as err:  # the Lambda step fails with the function's error, as SageMaker reports it
                raise StepFailed(f"{step_name}: {type(err).__name__}: {err}") from err
        if not isinstance(result, dict):
            raise StepFailed(f"{step_name}: the function returned {type(result).__name__}, not an object")
        return result
