"""Reading back what the stacks synthesize (a cloud assembly, cdk.out/<env>): its stack templates and the
pipeline definition a template embeds. Plain JSON, no CDK: for the tools that read cdk.out (summarize,
pipeline_diff) and the local runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PIPELINE_TYPE = "AWS::SageMaker::Pipeline"


class AssemblyNotFound(FileNotFoundError):
    """No synthesized assembly (or no pipeline stack in it) where one is looked for; the message names the fix."""


def pipeline_properties(template: dict[str, Any]) -> dict[str, Any]:
    """The properties of the template's one AWS::SageMaker::Pipeline."""
    [pipeline] = [r["Properties"] for r in template["Resources"].values() if r["Type"] == PIPELINE_TYPE]
    return pipeline


def synthesized_definition(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The pipeline definition a synthesized template embeds: its JSON text, still holding the deploy-time
    `${...}` placeholders, and the `Fn::Sub` variables the stack gives them."""
    text, variables = pipeline_properties(template)["PipelineDefinition"]["PipelineDefinitionBody"]["Fn::Sub"]
    return text, variables


def synthesized_templates(assembly: Path) -> dict[str, dict[str, Any]]:
    """Stack name -> template for the stacks of the latest synth into `assembly`, in manifest order.

    The manifest lists only what the latest synth wrote: templates left behind by an earlier synth into the
    same folder are not included.
    """
    manifest = assembly / "manifest.json"
    if not manifest.is_file():
        raise AssemblyNotFound(f"no cloud assembly in {assembly}/: run `{synth_command(assembly)}` first")
    templates = {}
    for name, artifact in json.loads(manifest.read_text())["artifacts"].items():
        if artifact.get("type") == "aws:cloudformation:stack":
            templates[name] = json.loads((assembly / artifact["properties"]["templateFile"]).read_text())
    return templates


def synth_command(assembly: Path) -> str:
    """The command that writes this assembly folder: `make synth ENV=<env>` for the Makefile's cdk.out/<env>."""
    if assembly.parent.name == "cdk.out":
        return f"make synth ENV={assembly.name}"
    return f"npx cdk synth --output {assembly}"
