"""Execute a pipeline definition on this machine: parameters, step graph, conditions, registration."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.paths import LOCAL_EXECUTION_PREFIX
from local_runner.errors import ExecutionStopped, StepFailed, UnsupportedDefinition
from local_runner.expressions import EXPRESSION_KEYS, ExpressionResolver
from local_runner.functions import LocalFunctions
from local_runner.jobs import Printer, run_processing, run_training
from local_runner.registry import LocalModelRegistry, ModelPackage
from local_runner.spot import SpotInterruption
from local_runner.store import LocalObjectStore
from pipeline_steps.walk import all_steps, execution_order, expressions
from reporting.local_runs import RUNNER_PID_FILE, local_execution_arn

STEP_FIELDS = {
    "Name",
    "Type",
    "Arguments",
    "CacheConfig",
    "RetryPolicies",
    "Description",
    "DisplayName",
    "DependsOn",
    "FunctionArn",
    "OutputParameters",
}
STEP_TYPES = {"Processing", "Training", "Condition", "RegisterModel", "Fail", "Lambda"}
COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "GreaterThanOrEqualTo": lambda a, b: float(a) >= float(b),
    "GreaterThan": lambda a, b: float(a) > float(b),
    "LessThan": lambda a, b: float(a) < float(b),
    "LessThanOrEqualTo": lambda a, b: float(a) <= float(b),
    "Equals": lambda a, b: _equal(a, b),
}
LAMBDA_OUTPUT_TYPES: dict[str, Callable[[Any], Any]] = {
    "String": str,
    "Integer": int,
    "Float": float,
    "Boolean": lambda v: str(v).lower() == "true",
}
STOPPED = "Stopped"  # PipelineExecutionStatus and StepStatus of a stopped execution and its running step
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribePipelineExecution.html


def _operand(value: Any) -> str:
    """A condition operand as the log shows it: strings quoted and cut short (messages are reported once)."""
    if isinstance(value, str):
        return repr(value if len(value) <= 20 else value[:17] + "...")
    return str(value)


def _equal(left: Any, right: Any) -> bool:
    """Equals compares strings as strings and numbers as numbers."""
    if isinstance(left, str) or isinstance(right, str):
        return str(left) == str(right)
    return float(left) == float(right)


PARAMETER_TYPES: dict[str, Callable[[Any], Any]] = {
    "String": str,
    "Integer": int,
    "Float": float,
    "Boolean": lambda v: str(v).lower() == "true",
}


@dataclass
class StepResult:
    name: str
    type: str
    status: str
    seconds: float
    detail: str = ""
    started_at: float = 0.0  # time.time() when the step started
    attempts: int = 1


@dataclass(frozen=True)
class JobResources:
    """The instances a job step asked for (ResourceConfig / ClusterConfig), as billing would count them."""

    kind: str  # "training" | "processing"
    instance_type: str
    instance_count: int
    spot: bool = False


@dataclass
class ExecutionResult:
    execution_id: str
    status: str  # Executing | Succeeded | Failed | Stopped
    steps: list[StepResult] = field(default_factory=list)
    failure: str | None = None
    model_package: ModelPackage | None = None
    inference_container: dict[str, Any] | None = None  # the package's container: Image, Environment, ModelDataUrl
    metrics: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)  # processing output name -> S3 URI; Lambda output -> value
    parameters: dict[str, Any] = field(default_factory=dict)  # the execution's resolved pipeline parameters
    resources: dict[str, JobResources] = field(default_factory=dict)  # job step name -> what it ran on
    model_data: str | None = None  # the training job's model.tar.gz (S3ModelArtifacts)
    warnings: list[str] = field(default_factory=list)  # what was asked for and never happened


def validate_definition(definition: dict[str, Any]) -> None:
    """Reject, before anything runs, every step type, field or expression this runner does not implement."""
    problems = []
    for step in all_steps(definition.get("Steps", [])):
        if step.get("Type") not in STEP_TYPES:
            problems.append(f"step {step.get('Name')!r}: type {step.get('Type')!r} is not supported")
        unknown = sorted(set(step) - STEP_FIELDS)
        if unknown:
            problems.append(f"step {step.get('Name')!r}: fields {unknown} are not supported")
    for operator in sorted({next(iter(expression)) for expression in expressions(definition.get("Steps", []))}):
        if operator not in EXPRESSION_KEYS:
            problems.append(f"expression {operator!r} is not supported")
    if problems:
        raise UnsupportedDefinition("the local runner cannot run this definition:\n  - " + "\n  - ".join(problems))


@contextlib.contextmanager
def stopped_by_sigterm() -> Iterator[None]:
    """While an execution runs in the main thread, SIGTERM raises ExecutionStopped there: the running job's
    processes are stopped and the execution is recorded as Stopped (not left Executing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the job's own stop takes its grace period
        raise ExecutionStopped("stopped by SIGTERM (make stop)")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class LocalPipelineRunner:
    """Runs one execution of a definition against a local object store and model registry."""

    def __init__(
        self,
        definition: dict[str, Any],
        pipeline_name: str,
        store: LocalObjectStore,
        registry: LocalModelRegistry,
        work_dir: Path,
        out: Printer = print,
        interruption: SpotInterruption | None = None,
        hyperparameter_overrides: dict[str, str] | None = None,
        functions: LocalFunctions | None = None,
        on_progress: Callable[[ExecutionResult], object] | None = None,
    ) -> None:
        validate_definition(definition)
        self.functions = functions or LocalFunctions(store.root, work_dir / "executions.json")
        self.definition = definition
        self.failure_messages = {
            step["Arguments"]["ErrorMessage"]["Get"]
            for step in all_steps(definition.get("Steps", []))
            if step["Type"] == "Fail" and "Get" in (step["Arguments"].get("ErrorMessage") or {})
        }
        self.pipeline_name = pipeline_name
        self.store, self.registry, self.work_dir, self.out = store, registry, work_dir, out
        self.interruption = interruption
        self.hyperparameter_overrides = hyperparameter_overrides or {}
        self.on_progress = on_progress or (lambda result: None)

    def parameters(self, overrides: dict[str, Any]) -> dict[str, Any]:
        declared = {p["Name"]: p for p in self.definition.get("Parameters", [])}
        unknown = sorted(set(overrides) - set(declared))
        if unknown:
            raise ValueError(f"unknown pipeline parameters {unknown}; declared: {sorted(declared)}")
        values = {}
        for name, spec in declared.items():
            raw = overrides.get(name, spec.get("DefaultValue"))
            if raw is None:
                raise ValueError(f"parameter {name!r} has no default and no value")
            try:
                value = PARAMETER_TYPES[spec["Type"]](raw)
            except ValueError:
                raise ValueError(f"parameter {name}={raw!r} is not of type {spec['Type']}") from None
            if spec.get("EnumValues") and value not in spec["EnumValues"]:
                raise ValueError(f"parameter {name!r}={value!r} is not one of {spec['EnumValues']}")
            values[name] = value
        return values

    def run(self, overrides: dict[str, Any] | None = None) -> ExecutionResult:
        """One execution with `overrides` for the pipeline parameters; its state lives in a LocalExecution."""
        return LocalExecution(
            self, f"{LOCAL_EXECUTION_PREFIX}{uuid.uuid4().hex[:12]}", self.parameters(overrides or {})
        ).run()


class LocalExecution:
    """The state of one execution (step properties, property files, attempts, the result) and its steps."""

    def __init__(self, runner: LocalPipelineRunner, execution_id: str, parameters: dict[str, Any]) -> None:
        self.runner, self.out = runner, runner.out
        self.step_properties: dict[str, dict[str, Any]] = {}
        self.attempts: dict[str, int] = {}
        self.resolver = ExpressionResolver(
            parameters,
            {
                "PipelineExecutionId": execution_id,
                "PipelineName": runner.pipeline_name,
                "PipelineExecutionArn": local_execution_arn(runner.pipeline_name, execution_id),
            },
            self.step_properties,
        )
        self.result = ExecutionResult(execution_id=execution_id, status="Executing", parameters=parameters)

    def run(self) -> ExecutionResult:
        runner = self.runner
        execution_arn = self.resolver.execution["PipelineExecutionArn"]
        runner.functions.record_status(execution_arn, "Executing")
        self.out(f"execution {self.result.execution_id} of {runner.pipeline_name}")
        for name, value in self.result.parameters.items():
            self.out(f"  {name} = {value}")
        folder = runner.work_dir / self.result.execution_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / RUNNER_PID_FILE).write_text(str(os.getpid()))
        try:
            with stopped_by_sigterm():
                runner.on_progress(self.result)
                for step in execution_order(runner.definition["Steps"]):
                    self._run_step(step)
                self.result.status = "Succeeded"
        except StepFailed as failure:
            self.result.status = "Failed"
            self.result.failure = str(failure)
        except (ExecutionStopped, KeyboardInterrupt) as stop:
            self.result.status = STOPPED
            self.result.failure = str(stop) or "stopped by SIGINT (Ctrl-C)"
            self.out(f"\nexecution {self.result.execution_id} stopped: {stop}")
        finally:
            runner.functions.record_status(execution_arn, self.result.status)
            runner.on_progress(self.result)  # the status recorded before the runner's process id goes
            (folder / RUNNER_PID_FILE).unlink(missing_ok=True)
        return self.result

    def _run_step(self, step: dict[str, Any]) -> None:
        name, kind = step["Name"], step["Type"]
        self.out(f"\n> {name} ({kind}) started")
        started_at, started = time.time(), time.monotonic()
        try:
            detail = getattr(self, f"_run_{kind.lower()}")(step) or ""
        except StepFailed as failure:
            # Reported once, by the step that failed: a condition whose branch failed has itself succeeded
            # (SageMaker lists it Succeeded), and a Fail step's message is the execution's failure reason.
            if kind != "Condition":
                elapsed = time.monotonic() - started
                detail = "" if kind == "Fail" else str(failure)
                self.result.steps.append(StepResult(name, kind, "Failed", elapsed, detail, started_at))
                self.out(f"x {name} failed after {elapsed:.1f}s{': ' + detail if detail else ''}")
            raise
        except (ExecutionStopped, KeyboardInterrupt):
            if kind != "Condition":
                self.result.steps.append(StepResult(name, kind, STOPPED, time.monotonic() - started, "", started_at))
            raise
        elapsed = time.monotonic() - started
        if kind != "Condition":
            attempts = self.attempts.pop(name, 1)
            self.result.steps.append(StepResult(name, kind, "Succeeded", elapsed, detail, started_at, attempts))
            self.out(f"ok {name} succeeded in {elapsed:.1f}s{': ' + detail if detail else ''}")
            self.runner.on_progress(self.result)

    def _job_dir(self, name: str) -> Path:
        path = self.runner.work_dir / self.result.execution_id / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def _run_processing(self, step: dict[str, Any]) -> str:
        args = self.resolver.resolve(step["Arguments"])
        cluster = args["ProcessingResources"]["ClusterConfig"]
        self.result.resources[step["Name"]] = JobResources(
            "processing", cluster["InstanceType"], int(cluster["InstanceCount"])
        )
        properties = run_processing(step["Name"], args, self.runner.store, self._job_dir(step["Name"]), self.out)
        self.step_properties[step["Name"]] = properties
        for output in args.get("ProcessingOutputConfig", {}).get("Outputs", []):
            self.result.outputs[output["OutputName"]] = output["S3Output"]["S3Uri"]
        return ", ".join(o["OutputName"] for o in args.get("ProcessingOutputConfig", {}).get("Outputs", []))

    def _run_training(self, step: dict[str, Any]) -> str:
        args = self.resolver.resolve(step["Arguments"])
        spot = bool(args.get("EnableManagedSpotTraining"))
        resources = args["ResourceConfig"]
        self.result.resources[step["Name"]] = JobResources(
            "training", resources["InstanceType"], int(resources["InstanceCount"]), spot
        )
        attempts = max([p.get("MaxAttempts", 1) for p in step.get("RetryPolicies", [])] + [1]) + 1
        interruption = self.runner.interruption
        for attempt in range(1, attempts + 1):
            job_name = f"{self.result.execution_id}-{step['Name']}"
            job_dir = self._job_dir(step["Name"])
            outcome = run_training(
                step["Name"],
                args,
                self.runner.store,
                job_dir,
                job_name,
                self.out,
                interruption,
                self.runner.hyperparameter_overrides,
            )
            if outcome.interrupted_after is None:
                if interruption is not None:
                    self.result.warnings.append(
                        f"the requested spot interruption ({interruption.describe()}) never happened: the job "
                        "ended first; nothing was interrupted or resumed"
                    )
                self.step_properties[step["Name"]] = outcome.properties
                self.attempts[step["Name"]] = attempt
                self.result.model_data = outcome.properties["ModelArtifacts"]["S3ModelArtifacts"]
                self.result.metrics.update(
                    {
                        m["MetricName"]: m["Value"]
                        for m in outcome.properties["FinalMetricDataList"]
                        if m["MetricName"].startswith(("eval:", "benchmark:"))  # the uploader's split, the gate
                    }
                )
                suffix = f" (resumed after a spot interruption, attempt {attempt})" if attempt > 1 else ""
                return f"model {outcome.properties['ModelArtifacts']['S3ModelArtifacts']}{suffix}"
            if not spot:
                raise StepFailed(f"{step['Name']}: killed by a spot reclaim (no spot retry)")
            self.out(
                f"    spot reclaim: the job was killed without writing a checkpoint on the way out; the sync had "
                f"uploaded what it had to {args['CheckpointConfig']['S3Uri']}; retrying on a fresh instance "
                f"(attempt {attempt + 1})"
            )
            interruption = None
        raise StepFailed(f"{step['Name']}: still interrupted after {attempts} attempts")

    def _run_lambda(self, step: dict[str, Any]) -> str:
        """Invoke the step's function (the handler the local ARN names) with the resolved inputs; its outputs
        become the step's OutputParameters, typed as declared."""
        event = self.resolver.resolve(step.get("Arguments", {}))
        returned = self.runner.functions.invoke(step["FunctionArn"], event, step["Name"])
        outputs = {}
        for declared in step.get("OutputParameters", []):
            name = declared["OutputName"]
            if name not in returned:
                raise StepFailed(f"{step['Name']}: the function returned no output {name!r}")
            outputs[name] = LAMBDA_OUTPUT_TYPES[declared.get("OutputType", "String")](returned[name])
        self.step_properties[step["Name"]] = {"OutputParameters": outputs}
        self.result.outputs.update({name: str(value) for name, value in outputs.items()})
        # Outputs that a Fail step reports as the execution's failure are printed there, once.
        reported = {ref for ref in self.runner.failure_messages if ref.startswith(f"Steps.{step['Name']}.")}
        shown = {
            k: v
            for k, v in outputs.items()
            if v not in ("", None) and f"Steps.{step['Name']}.OutputParameters['{k}']" not in reported
        }
        return ", ".join(f"{k}={v}" for k, v in shown.items())

    def _run_condition(self, step: dict[str, Any]) -> str:
        args = step["Arguments"]
        outcomes = []
        for condition in args["Conditions"]:
            if condition["Type"] not in COMPARISONS:
                raise UnsupportedDefinition(f"condition type {condition['Type']!r} is not supported locally")
            left, right = self.resolver.resolve(condition["LeftValue"]), self.resolver.resolve(condition["RightValue"])
            passed = COMPARISONS[condition["Type"]](left, right)
            self.out(f"    {_operand(left)} {condition['Type']} {_operand(right)}: {passed}")
            outcomes.append(passed)
        branch = "IfSteps" if all(outcomes) else "ElseSteps"
        self.result.steps.append(StepResult(step["Name"], "Condition", "Succeeded", 0.0, f"-> {branch}", time.time()))
        self.out(f"ok {step['Name']}: {'true' if branch == 'IfSteps' else 'false'} -> {branch}")
        for inner in execution_order(args.get(branch, [])):
            self._run_step(inner)
        return ""

    def _run_registermodel(self, step: dict[str, Any]) -> str:
        args = self.resolver.resolve(step["Arguments"])
        [container] = args["InferenceSpecification"]["Containers"]
        statistics = args.get("ModelMetrics", {}).get("ModelQuality", {}).get("Statistics", {})
        metrics = json.loads(self.runner.store.path(statistics["S3Uri"]).read_text()) if statistics else {}
        # CustomerMetadataProperties: shown, as the registry keeps them.
        for key, value in sorted(args.get("CustomerMetadataProperties", {}).items()):
            self.out(f"    metadata {key} = {value}")
        package = self.runner.registry.register(
            group=args["ModelPackageGroupName"],
            approval_status=args.get("ModelApprovalStatus", "PendingManualApproval"),
            model_data=container["ModelDataUrl"],
            metrics=metrics,
            execution_id=self.result.execution_id,
        )
        self.result.model_package = package
        self.result.inference_container = container
        return f"{package.arn} ({package.approval_status})"

    def _run_fail(self, step: dict[str, Any]) -> str:
        message = self.resolver.resolve(step["Arguments"].get("ErrorMessage", "Fail step reached"))
        raise StepFailed(str(message))
