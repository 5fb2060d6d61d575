"""Errors of the local runner."""

from typing import NoReturn


class UnsupportedDefinition(ValueError):
    """The definition uses a step type, field or expression the local runner does not implement."""


class StepFailed(RuntimeError):
    """A step ended unsuccessfully; the message says why."""


class InvocationFailed(RuntimeError):
    """The registered model could not answer a request; the message says why."""


class ExecutionStopped(Exception):
    """SIGTERM reached the runner (`make stop`, or a kill): the execution stops, as StopPipelineExecution stops one."""


def fail(message: str) -> NoReturn:
    """End a local lifecycle command (make clean-runs, register, evaluate) with one `error:` line, exit code 1."""
    raise SystemExit(f"error: {message}")
