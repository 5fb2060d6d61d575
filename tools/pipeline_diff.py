"""Step-by-step diff of the pipeline definition: deployed (DescribePipeline) vs synthesized (cdk.out/<env>).

`make diff` runs it after CDK's own diff, which shows the whole definition as one changed string. Here each
parameter and step is compared on its own, down to the changed leaf (`FineTune: HyperParameters.epochs`).
The synthesized definition still holds deploy-time `${...}` placeholders (role ARNs, bucket and key ids,
filled by CloudFormation's Fn::Sub): a placeholder matches whatever the deployed value holds in its place.
One read-only call with your credentials: sagemaker:DescribePipeline.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from config.loader import DEFAULT_ENV
from config.paths import assembly_dir
from pipeline_steps.walk import all_steps
from stacks.assembly import pipeline_properties, synth_command, synthesized_definition
from stacks.assembly import synthesized_templates as templates_of

PLACEHOLDER = re.compile(r"\$\{[^}]+\}")
BRANCHES = ("IfSteps", "ElseSteps")


def _matches(synthesized: Any, deployed: Any) -> bool:
    """Equal, where a `${...}` placeholder in a synthesized string stands for any deployed text."""
    if isinstance(synthesized, list) and isinstance(deployed, list):
        return len(synthesized) == len(deployed) and all(map(_matches, synthesized, deployed))
    if isinstance(synthesized, str) and isinstance(deployed, str) and PLACEHOLDER.search(synthesized):
        pattern = ".+?".join(re.escape(part) for part in PLACEHOLDER.split(synthesized))
        return re.fullmatch(pattern, deployed, flags=re.DOTALL) is not None
    return bool(synthesized == deployed)


def _leaves(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict) and node:
        for key in sorted(node):
            yield from _leaves(node[key], f"{path}.{key}" if path else key)
    elif isinstance(node, list) and node and any(isinstance(item, dict | list) for item in node):
        for index, item in enumerate(node):
            yield from _leaves(item, f"{path}[{index}]")
    else:
        yield path, node


def changed_leaves(deployed: Any, synthesized: Any) -> list[str]:
    """`path: deployed -> synthesized` for every leaf that differs."""
    old, new = dict(_leaves(deployed)), dict(_leaves(synthesized))
    lines = []
    for path in sorted(set(old) | set(new)):
        if path not in new:
            lines.append(f"{path}: {json.dumps(old[path])} -> (removed)")
        elif path not in old:
            lines.append(f"{path}: (added) -> {json.dumps(new[path])}")
        elif not _matches(new[path], old[path]):
            lines.append(f"{path}: {json.dumps(old[path])} -> {json.dumps(new[path])}")
    return lines


def _flat_steps(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Name -> step, condition branches replaced by the names of the steps they hold."""
    steps = {}
    for step in all_steps(definition.get("Steps", [])):
        arguments = step.get("Arguments", {})
        if any(branch in arguments for branch in BRANCHES):
            arguments = {k: [s["Name"] for s in v] if k in BRANCHES else v for k, v in arguments.items()}
        steps[step["Name"]] = {**step, "Arguments": arguments}
    return steps


def diff_definitions(deployed: dict[str, Any], synthesized: dict[str, Any]) -> list[str]:
    """The differences, parameter by parameter and step by step; empty when the definitions match."""
    lines: list[str] = []
    old_params = {p["Name"]: p for p in deployed.get("Parameters", [])}
    new_params = {p["Name"]: p for p in synthesized.get("Parameters", [])}
    for name in sorted(set(old_params) | set(new_params)):
        if name not in new_params:
            lines.append(f"- parameter {name}")
        elif name not in old_params:
            lines.append(
                f"+ parameter {name} ({new_params[name].get('Type')}, default {new_params[name].get('DefaultValue')!r})"
            )
        elif changes := changed_leaves(old_params[name], new_params[name]):
            lines += [f"~ parameter {name}", *(f"    {change}" for change in changes)]
    old_steps, new_steps = _flat_steps(deployed), _flat_steps(synthesized)
    for name in [*new_steps, *(n for n in old_steps if n not in new_steps)]:
        if name not in new_steps:
            lines.append(f"- step {name} ({old_steps[name].get('Type')})")
        elif name not in old_steps:
            lines.append(f"+ step {name} ({new_steps[name].get('Type')})")
        elif changes := changed_leaves(old_steps[name], new_steps[name]):
            lines += [f"~ step {name} ({new_steps[name].get('Type')})", *(f"    {change}" for change in changes)]
    others = sorted((set(deployed) | set(synthesized)) - {"Parameters", "Steps"})
    for key in others:
        if changes := changed_leaves(deployed.get(key), synthesized.get(key)):
            lines += [f"~ {key}", *(f"    {change}" for change in changes)]
    return lines


def synthesized_pipeline(assembly: Path, stack_name: str) -> tuple[str, dict[str, Any]]:
    """(pipeline name, definition with its placeholders) of the stack `stack_name` in the assembly."""
    templates = templates_of(assembly)
    if stack_name not in templates:
        raise FileNotFoundError(f"no stack {stack_name} in {assembly}/: run `{synth_command(assembly)}` first")
    template = templates[stack_name]
    text, _ = synthesized_definition(template)
    return str(pipeline_properties(template)["PipelineName"]), json.loads(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default=DEFAULT_ENV)
    parser.add_argument("--task", help="the environment's pipeline of this task (TASK; default: its own task)")
    parser.add_argument("--assembly", type=Path, help="the synthesized cloud assembly (default: cdk.out/<env>)")
    args = parser.parse_args(argv)
    from botocore.exceptions import ClientError

    from tools.deployment import fail, is_sagemaker_not_found, load_deployment

    assembly = args.assembly or assembly_dir(args.env)
    deployment = load_deployment(args.env, args.task)
    stack_name = deployment.settings.stack_name("pipeline")
    try:
        name, synthesized = synthesized_pipeline(assembly, stack_name)
    except FileNotFoundError as err:  # AssemblyNotFound included; both messages name the fix
        fail(str(err))
    sagemaker = deployment.client("sagemaker")
    try:
        deployed_text = sagemaker.describe_pipeline(PipelineName=name)["PipelineDefinition"]
    except ClientError as err:
        if not is_sagemaker_not_found(err):
            raise
        print(f"pipeline {name} is not deployed: every step is new (make deploy ENV={args.env})")
        return 0
    lines = diff_definitions(json.loads(deployed_text), synthesized)
    print(f"pipeline definition {name}, step by step: deployed -> synthesized ({assembly})")
    print("\n".join(f"  {line}" for line in lines) if lines else "  no differences")
    return 0


if __name__ == "__main__":
    from tools.deployment import run_tool

    sys.exit(run_tool(main))
