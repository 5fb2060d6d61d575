"""Read what `cdk synth` wrote: the pipeline definition, the trigger rule and the code asset."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks import DEFAULT_TASK

from local_runner.errors import UnsupportedDefinition
from pipeline_steps.placeholders import FUNCTION_HANDLERS, PLACEHOLDER, DeployTimeValues, variable_name
from pipeline_steps.walk import all_steps
from reporting.record import TASK_HYPERPARAMETER, hyperparameter_task
from stacks.assembly import (
    PIPELINE_TYPE,
    AssemblyNotFound,
    pipeline_properties,
    synth_command,
    synthesized_definition,
    synthesized_templates,
)
from stacks.outputs import ARTIFACTS_BUCKET_OUTPUT, DATASETS_BUCKET_OUTPUT, TASK_OUTPUT


@dataclass(frozen=True)
class LocalAccount:
    """Stand-ins for what CloudFormation would resolve at deploy time."""

    account: str = "000000000000"
    region: str = "local"
    partition: str = "aws"
    url_suffix: str = "amazonaws.com"

    def deploy_time_values(self, code_bucket: str, code_key: str, code_sha256: str) -> DeployTimeValues:
        """Stand-ins for what the stacks create; subnets for any network the stacks may have. The code bundle's
        SHA-256 is the stack's own (a literal of the template), so the jobs' entry commands check it here too."""
        return DeployTimeValues(
            job_role_name="local-job-role",
            kms_key_arn=f"arn:{self.partition}:kms:{self.region}:{self.account}:key/local",
            dlc_registry_account=self.account,  # no image is pulled locally
            code_bucket=code_bucket,
            code_key=code_key,
            code_sha256=code_sha256,
            security_group_id="sg-local",
            **{
                field: f"arn:{self.partition}:lambda:{self.region}:{self.account}:function:{handler}"
                for field, handler in FUNCTION_HANDLERS.items()
            },
            subnet_ids=tuple(f"subnet-local{index}" for index in range(8)),
        )

    def pseudo(self) -> dict[str, str]:
        return {
            "AWS::AccountId": self.account,
            "AWS::Region": self.region,
            "AWS::Partition": self.partition,
            "AWS::URLSuffix": self.url_suffix,
        }


def resolve_intrinsics(value: Any, refs: dict[str, str]) -> Any:
    """Fn::Join, Fn::Sub and Ref (to pseudo parameters or `refs`), enough for this project's templates."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, operand),) = value.items()
        if key == "Ref":
            if operand not in refs:
                raise UnsupportedDefinition(f"cannot resolve Ref {operand!r} locally")
            return refs[operand]
        if key == "Fn::Join":
            separator, parts = operand
            return separator.join(str(resolve_intrinsics(p, refs)) for p in parts)
        if key == "Fn::Sub":
            text, variables = (operand, {}) if isinstance(operand, str) else operand
            scope = {**refs, **{k: str(resolve_intrinsics(v, refs)) for k, v in variables.items()}}

            def substitute(match: re.Match) -> str:
                if match.group(1) not in scope:
                    raise UnsupportedDefinition(f"no local value for ${{{match.group(1)}}}")
                return scope[match.group(1)]

            return PLACEHOLDER.sub(substitute, text)
    if isinstance(value, dict):
        return {k: resolve_intrinsics(v, refs) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_intrinsics(v, refs) for v in value]
    return value


@dataclass(frozen=True)
class SynthesizedPipeline:
    """The pipeline of one synthesized stack, resolved with local values."""

    definition: dict[str, Any]
    pipeline_name: str
    trigger_pattern: dict[str, Any]
    trigger_parameters: dict[str, str]  # pipeline parameter -> JSON path into the event
    code_archive: Path
    code_uri: str
    datasets_bucket: str
    artifacts_bucket: str
    task: str  # the task its jobs train (definition_task)


def stack_outputs(assembly: Path, stack_name: str, account: LocalAccount) -> dict[str, Any]:
    """Output id -> value of the stacks `stack_name` depends on (the data stack's bucket names), resolved with
    local values: a Ref to a bucket is its BucketName."""
    templates = synthesized_templates(assembly)
    artifacts = json.loads((assembly / "manifest.json").read_text())["artifacts"]
    outputs: dict[str, Any] = {}
    for dependency in artifacts[stack_name].get("dependencies", []):
        template = templates.get(dependency, {})
        refs = account.pseudo()
        for logical_id, resource in template.get("Resources", {}).items():
            if resource["Type"] == "AWS::S3::Bucket" and "BucketName" in resource.get("Properties", {}):
                refs[logical_id] = resolve_intrinsics(resource["Properties"]["BucketName"], account.pseudo())
        for output_id, output in template.get("Outputs", {}).items():
            with contextlib.suppress(UnsupportedDefinition):  # outputs of other resources: not needed here
                outputs[output_id] = resolve_intrinsics(output["Value"], refs)
    return outputs


def load_synthesized_pipeline(assembly: Path, stack_name: str, account: LocalAccount) -> SynthesizedPipeline:
    """Resolve the stack's AWS::SageMaker::Pipeline definition and trigger rule with local values."""
    templates = synthesized_templates(assembly)
    if stack_name not in templates:
        raise UnsupportedDefinition(f"no stack {stack_name!r} in {assembly}/ (it holds {sorted(templates)})")
    template = templates[stack_name]
    text, variables = synthesized_definition(template)
    code_bucket, code_key = _code_asset_location(assembly, stack_name)
    code_sha256 = variables.get(variable_name("code_sha256"))
    if not isinstance(code_sha256, str):
        raise UnsupportedDefinition(f"{stack_name}: the code bundle's SHA-256 is not a literal: {code_sha256!r}")
    values = account.deploy_time_values(code_bucket, code_key, code_sha256).substitutions()
    missing = {name for name in variables if name not in values}
    if missing:
        raise UnsupportedDefinition(f"no local value for deploy-time variables {sorted(missing)}")
    refs = account.pseudo()
    definition = json.loads(resolve_intrinsics({"Fn::Sub": [text, values]}, refs))
    [rule] = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Events::Rule" and "SageMakerPipelineParameters" in json.dumps(r)
    ]
    [target] = rule["Targets"]
    outputs = stack_outputs(assembly, stack_name, account)
    missing = {DATASETS_BUCKET_OUTPUT, ARTIFACTS_BUCKET_OUTPUT} - set(outputs)
    if missing:
        raise UnsupportedDefinition(f"no stack that {stack_name} depends on has the outputs {sorted(missing)}")
    parameters = {p["Name"]: p["Value"] for p in target["SageMakerPipelineParameters"]["PipelineParameterList"]}
    return SynthesizedPipeline(
        definition=definition,
        pipeline_name=pipeline_properties(template)["PipelineName"],
        trigger_pattern=resolve_intrinsics(rule["EventPattern"], refs),
        trigger_parameters=parameters,
        code_archive=_code_archive_path(assembly, stack_name),
        code_uri=f"s3://{code_bucket}/{code_key}",
        datasets_bucket=outputs[DATASETS_BUCKET_OUTPUT],
        artifacts_bucket=outputs[ARTIFACTS_BUCKET_OUTPUT],
        task=definition_task(definition),
    )


def find_pipeline_stack(assembly: Path, task: str | None = None) -> str:
    """The name of the stack in the assembly that holds an AWS::SageMaker::Pipeline: the one there is, or the one
    of `task` (its Task output) where an environment deploys a pipeline per task."""
    found = {
        name: template.get("Outputs", {}).get(TASK_OUTPUT, {}).get("Value")
        for name, template in synthesized_templates(assembly).items()
        if any(r["Type"] == PIPELINE_TYPE for r in template.get("Resources", {}).values())
    }
    if not found:
        raise AssemblyNotFound(f"no pipeline stack in {assembly}/: run `{synth_command(assembly)}` first")
    of_task = [name for name, stack_task in found.items() if task is not None and stack_task == task]
    if len(found) == 1 or len(of_task) == 1:
        return next(iter(of_task or found))
    pipelines = ", ".join(f"{name} ({stack_task})" for name, stack_task in found.items())
    raise UnsupportedDefinition(
        f"{assembly}/ holds {len(found)} pipeline stacks: {pipelines}; pick one with --stack, or with --task where "
        "their tasks differ"
    )


def _file_assets(assembly: Path, stack_name: str) -> dict[str, Any]:
    return json.loads((assembly / f"{stack_name}.assets.json").read_text())["files"]


CODE_ASSET = "TrainingCode/SourceDir"


def _code_asset(assembly: Path, stack_name: str) -> dict[str, Any]:
    assets = [a for a in _file_assets(assembly, stack_name).values() if a.get("displayName") == CODE_ASSET]
    if len(assets) != 1:
        raise UnsupportedDefinition(f"expected one {CODE_ASSET} asset in {stack_name}, found {len(assets)}")
    return assets[0]


def _code_asset_location(assembly: Path, stack_name: str) -> tuple[str, str]:
    destination = next(iter(_code_asset(assembly, stack_name)["destinations"].values()))
    return "local-cdk-assets", destination["objectKey"]


def _code_archive_path(assembly: Path, stack_name: str) -> Path:
    return assembly / _code_asset(assembly, stack_name)["source"]["path"]


def extract_event_value(event: dict[str, Any], path: str) -> Any:
    """A `$.a.b` JSON path into an event (what EventBridge does for SageMakerPipelineParameters)."""
    if not path.startswith("$."):
        raise UnsupportedDefinition(f"only whole-value JSON paths are supported, got {path!r}")
    node: Any = event
    for part in path[2:].split("."):
        node = node[part]
    return node


def definition_task(definition: dict[str, Any]) -> str:
    """The task the synthesized pipeline trains: the `--task` its jobs are given (the training step's `task`
    hyperparameter, a processing step's `--task` container argument), which must agree; a definition that passes
    none predates tasks and trains tasks.DEFAULT_TASK, as the jobs' own default does."""
    found: set[str] = set()
    for step in all_steps(definition["Steps"]):
        arguments = step.get("Arguments", {})
        if TASK_HYPERPARAMETER in arguments.get("HyperParameters", {}):
            found.add(hyperparameter_task(arguments["HyperParameters"]))
        container = arguments.get("AppSpecification", {}).get("ContainerArguments", [])
        found.update(value for flag, value in itertools.pairwise(container) if flag == f"--{TASK_HYPERPARAMETER}")
    if len(found) > 1:
        raise UnsupportedDefinition(f"the pipeline's jobs are given different tasks {sorted(found)}")
    return found.pop() if found else DEFAULT_TASK
