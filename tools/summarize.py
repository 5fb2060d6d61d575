"""Print a readable summary of a synthesized cloud assembly: stacks, key resources, pipeline steps.

python -m tools.summarize cdk.out/dev
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from config.loader import DEFAULT_ENV
from config.paths import assembly_dir
from pipeline_steps.walk import execution_order
from stacks.assembly import AssemblyNotFound, synthesized_definition, synthesized_templates
from tools.idle_cost import idle_cost

KEY_TYPES = {
    "AWS::KMS::Key": "KMS key",
    "AWS::S3::Bucket": "S3 bucket",
    "AWS::EC2::VPC": "VPC",
    "AWS::EC2::VPCEndpoint": "VPC endpoint",
    "AWS::EC2::SecurityGroup": "security group",
    "AWS::EC2::FlowLog": "flow log",
    "AWS::IAM::Role": "IAM role",
    "AWS::SageMaker::ModelPackageGroup": "model package group",
    "AWS::SageMaker::Pipeline": "SageMaker pipeline",
    "AWS::Events::Rule": "EventBridge rule",
    "AWS::SQS::Queue": "SQS queue",
    "AWS::SNS::Topic": "SNS topic",
    "AWS::SageMaker::MlflowTrackingServer": "MLflow tracking server",
}


def render(value: Any) -> str:
    """A CloudFormation value as text: Fn::Join flattened, Ref/GetAtt shown as <placeholders>."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(render(part) for part in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return f"<{'.'.join(value['Fn::GetAtt'])}>"
    return json.dumps(value)


# CDK names the outputs it adds for cross-stack references ExportsOutput...: not for people.
GENERATED_OUTPUT_PREFIX = "ExportsOutput"


def step_tree(steps: list[dict[str, Any]], indent: str = "") -> list[str]:
    """Every step, in execution order, with each condition's branches indented under it."""
    lines = []
    for step in execution_order(steps):
        lines.append(f"{indent}{step['Name']} ({step['Type']})")
        if step["Type"] == "Condition":
            for branch, label in (("IfSteps", "if true"), ("ElseSteps", "else")):
                inner = step["Arguments"].get(branch, [])
                lines.append(f"{indent}  {label}:" + ("" if inner else " stop, succeeded"))
                lines += step_tree(inner, indent + "    ")
    return lines


def _describe(logical_id: str, resource: dict[str, Any], template: dict[str, Any]) -> str:
    props = resource.get("Properties", {})
    kind = KEY_TYPES[resource["Type"]]
    if resource["Type"] == "AWS::S3::Bucket":
        name = render(props.get("BucketName", logical_id))
        sse = props.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [{}])[0]
        algorithm = sse.get("ServerSideEncryptionByDefault", {}).get("SSEAlgorithm", "?")
        versioned = props.get("VersioningConfiguration", {}).get("Status") == "Enabled"
        eventbridge = props.get("NotificationConfiguration", {}).get("EventBridgeConfiguration")
        extras = [algorithm, "versioned" if versioned else "", "EventBridge" if eventbridge else ""]
        return f"{kind:22} {name}  ({', '.join(e for e in extras if e)})"
    if resource["Type"] == "AWS::EC2::VPCEndpoint":
        return f"{kind:22} {render(props.get('ServiceName'))}"
    if resource["Type"] == "AWS::SageMaker::Pipeline":
        definition = json.loads(synthesized_definition(template)[0])
        steps = "\n".join(f"        {line}" for line in step_tree(definition.get("Steps", [])))
        params = ", ".join(p["Name"] for p in definition.get("Parameters", []))
        return f"{kind:22} {props.get('PipelineName', logical_id)}\n      steps:\n{steps}\n      parameters: {params}"
    if resource["Type"] == "AWS::Events::Rule":
        pattern = props.get("EventPattern", {})
        keys = pattern.get("detail", {}).get("object", {}).get("key", [])
        on = ", ".join(pattern.get("detail-type", []))
        on += f" of {keys[0]['wildcard']}" if keys and isinstance(keys[0], dict) and "wildcard" in keys[0] else ""
        return f"{kind:22} {logical_id}  ({on})"
    return f"{kind:22} {logical_id}"


def summarize(assembly: Path) -> str:
    """Human-readable summary of every stack in the assembly."""
    lines = [f"Synthesized {assembly}/ (offline, no AWS account used)"]
    templates = synthesized_templates(assembly)
    for stack_name, template in templates.items():
        resources = template.get("Resources", {})
        counts = Counter(r["Type"] for r in resources.values())
        lines.append(f"\n== {stack_name}: {len(resources)} resources ({len(counts)} types)")
        for logical_id, resource in resources.items():
            if resource["Type"] in KEY_TYPES:
                lines.append(f"   - {_describe(logical_id, resource, template)}")
        outputs = {k: v for k, v in template.get("Outputs", {}).items() if not k.startswith(GENERATED_OUTPUT_PREFIX)}
        for name, output in sorted(outputs.items()):
            description = output.get("Description")
            lines.append(
                f"   output {name}: {render(output.get('Value'))}" + (f" ({description})" if description else "")
            )
    lines.append("\n" + idle_cost(list(templates.values())).describe())
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "assembly", nargs="?", type=Path, default=assembly_dir(DEFAULT_ENV), help="cdk.out/<env> (default: cdk.out/dev)"
    )
    assembly = parser.parse_args(argv).assembly
    try:
        print(summarize(assembly))
    except AssemblyNotFound as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
