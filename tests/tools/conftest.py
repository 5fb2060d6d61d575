"""An AWS API emulator for the client tools: one moto server and one deployment per test session (per worker).

The session deploys, through moto's CloudFormation, the CDK's own bootstrap template (what `cdk bootstrap`
creates) and the synthesized dev stacks (what `make deploy` creates), then runs the tools as users run them:
subprocesses with boto3 pointed at the emulator, dummy credentials, and no AWS config or credentials file.

A client-side test bed, not proof that AWS accepts the templates. moto 5.2.5 ignores, silently: template
Rules (a bootstrap version of 3 passes CheckBootstrapVersion), bucket `VersioningConfiguration` (turned on
here through the S3 API), `AWS::SageMaker::Pipeline` resources, `CreatedAfter` of `list_pipeline_executions`
(all seen here); bucket, queue and topic policies, security-group egress, `ModelPackageGroup` resources and
IAM enforcement (per the project's notes and moto's documentation); it has no EventBridge -> SageMaker
target and no SageMaker quotas, and `create_pipeline` accepts any definition. It cannot create, so
`moto_template` removes `Tags` on `AWS::KMS::Key` (rejected with a misleading GetAtt error) and the custom
resources (moto runs their Lambda handlers in Docker), and gives every Lambda function (the pipeline's
Lambda steps, the custom-resource handlers) stand-in inline code: their code is an asset `cdk deploy`
publishes, never published to moto, and no test invokes them. The pipeline is then created through the
SageMaker API with the template's own definition, resolved the way CloudFormation would. The templates
themselves are checked by tests/stacks (assertions, cdk-nag, cfn-lint).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from qa.model_folder import MODEL_CONFIG

from local_runner.assembly import LocalAccount, extract_event_value, resolve_intrinsics
from local_runner.trigger import s3_object_created_event
from stacks.assembly import pipeline_properties, synthesized_definition
from tests.conftest import ENTRY_POINT_PYTHONPATH, REGION, ROOT, aws_environment, pointed_at
from tests.tools.moto_pipeline import moto_pipeline  # noqa: F401  (a pipeline straight in moto)
from tests.training_code.conftest import pretrained_dir  # noqa: F401  (shared model fixture)
from tools.deployment import split_s3_uri

EMPTY_REGION = "eu-west-1"  # nothing is deployed there
ACCOUNT = "123456789012"  # moto's default account
BOOTSTRAP_TEMPLATE = ROOT / "node_modules" / "aws-cdk" / "lib" / "api" / "bootstrap" / "bootstrap-template.yaml"
BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"  # the CDK's default qualifier
PSEUDO_PARAMETERS = LocalAccount(account=ACCOUNT, region=REGION).pseudo()


# What a Lambda function created in moto runs instead of its asset (never invoked by these tests).
STAND_IN_LAMBDA_CODE = {"ZipFile": "def handler(event, context):\n    return {}\n"}


def moto_template(template: dict[str, Any]) -> dict[str, Any]:
    """The template without what moto cannot create (see the module docstring)."""
    resources = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"].startswith("Custom::"):
            continue
        if resource["Type"] == "AWS::KMS::Key":
            resource = {**resource, "Properties": {k: v for k, v in resource["Properties"].items() if k != "Tags"}}
        if resource["Type"] == "AWS::Lambda::Function":  # its code asset was never published to moto
            resource = {**resource, "Properties": {**resource["Properties"], "Code": STAND_IN_LAMBDA_CODE}}
        resources[logical_id] = resource
    return {**template, "Resources": resources}


def enable_bucket_versioning(template: dict[str, Any]) -> None:
    """Turn on the versioning the template asks for, which moto's CloudFormation ignores."""
    s3 = boto3.client("s3")
    for resource in template["Resources"].values():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::S3::Bucket" and "VersioningConfiguration" in properties:
            s3.put_bucket_versioning(
                Bucket=resolve_intrinsics(properties["BucketName"], PSEUDO_PARAMETERS),
                VersioningConfiguration=properties["VersioningConfiguration"],
            )


def deployed_definition(template: dict[str, Any], stack_name: str) -> tuple[str, str, str]:
    """(name, role ARN, definition) of the stack's pipeline, its `Fn::Sub` resolved from the deployed stacks."""
    cfn, iam, functions = boto3.client("cloudformation"), boto3.client("iam"), boto3.client("lambda")
    exports = {export["Name"]: export["Value"] for export in cfn.list_exports()["Exports"]}
    physical = {
        resource["LogicalResourceId"]: resource["PhysicalResourceId"]
        for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack_name)
        for resource in page["StackResourceSummaries"]
        if "LogicalResourceId" in resource  # moto lists the resources it skipped without ids
    }
    pseudo = PSEUDO_PARAMETERS

    def resolve(value: Any) -> str:
        if isinstance(value, dict) and "Ref" in value:
            return physical[value["Ref"]]
        if isinstance(value, dict) and "Fn::ImportValue" in value:
            return exports[value["Fn::ImportValue"]]
        if isinstance(value, dict) and "Fn::GetAtt" in value:  # the ARNs of roles and Lambda functions
            logical_id = value["Fn::GetAtt"][0]
            if template["Resources"][logical_id]["Type"] == "AWS::Lambda::Function":
                return functions.get_function(FunctionName=physical[logical_id])["Configuration"]["FunctionArn"]
            return iam.get_role(RoleName=physical[logical_id])["Role"]["Arn"]
        if isinstance(value, dict) and "Fn::FindInMap" in value:  # the images' registry account in the region
            name, top_key, second_key = value["Fn::FindInMap"]
            return template["Mappings"][name][resolve_intrinsics(top_key, pseudo)][second_key]
        return resolve_intrinsics(value, pseudo)

    pipeline = pipeline_properties(template)
    text, variables = synthesized_definition(template)
    definition = resolve_intrinsics({"Fn::Sub": [text, {k: resolve(v) for k, v in variables.items()}]}, pseudo)
    assert not re.search(r"\$\{[^}]+\}", definition), "unresolved deploy-time variable"
    return pipeline["PipelineName"], resolve(pipeline["RoleArn"]), definition


@dataclass(frozen=True)
class Deployed:
    """The session's deployment of the dev environment in the emulator, by name."""

    env_name: str
    stack_names: list[str]
    datasets_bucket: str
    artifacts_bucket: str
    pipeline_name: str
    pipeline_role_arn: str
    pipeline_definition: str
    trigger_parameters: dict[str, str]  # pipeline parameter -> JSON path into the S3 event (the rule's target)

    @property
    def base_model_uri(self) -> str:
        defaults = {p["Name"]: p.get("DefaultValue") for p in json.loads(self.pipeline_definition)["Parameters"]}
        return defaults["BaseModelUri"]

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION)

    def replace_pipeline(self, definition: str | None) -> None:
        """Delete the pipeline (when there is one), and create it again with `definition` unless None."""
        sagemaker = self.client("sagemaker")
        if sagemaker.list_pipelines(PipelineNamePrefix=self.pipeline_name)["PipelineSummaries"]:
            sagemaker.delete_pipeline(PipelineName=self.pipeline_name)
        if definition is not None:
            sagemaker.create_pipeline(
                PipelineName=self.pipeline_name, PipelineDefinition=definition, RoleArn=self.pipeline_role_arn
            )

    def start_as_trigger(
        self, key: str, fields: dict[str, str] | None = None, paths: dict[str, str] | None = None
    ) -> None:
        """Start an execution as the trigger rule would for an Object Created event of `key` in the datasets
        bucket (moto has no SageMaker targets): the rule's parameter paths (or `paths`) applied to the event,
        its object fields from the object's HEAD, or `fields` where given."""
        fields = fields or {}
        head = self.client("s3").head_object(Bucket=self.datasets_bucket, Key=key) if "etag" not in fields else {}
        size, etag, version = head.get("ContentLength", 0), head.get("ETag", "").strip('"'), head.get("VersionId")
        event = s3_object_created_event(self.datasets_bucket, key, size, etag, version or "null", ACCOUNT, REGION)
        event["detail"]["object"].update(fields)
        self.client("sagemaker").start_pipeline_execution(
            PipelineName=self.pipeline_name,
            PipelineParameters=[
                {"Name": name, "Value": str(extract_event_value(event, path))}
                for name, path in (paths or self.trigger_parameters).items()
            ],
        )

    def empty_buckets(self) -> None:
        """Remove every object version and delete marker the tests left in the two buckets."""
        s3 = self.client("s3")
        for bucket in (self.datasets_bucket, self.artifacts_bucket):
            for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
                doomed = [
                    {"Key": v["Key"], "VersionId": v["VersionId"]}
                    for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
                ]
                if doomed:
                    s3.delete_objects(Bucket=bucket, Delete={"Objects": doomed})


def deploy(moto_url: str, dev: Any) -> Deployed:
    """`cdk bootstrap` (the CDK's bootstrap template) and the synthesized dev stacks, deployed on moto server: the
    session's `deployed_session` fixture (tests/conftest.py, so that tests/security can use it too)."""
    if not BOOTSTRAP_TEMPLATE.is_file():
        pytest.fail(f"{BOOTSTRAP_TEMPLATE} is missing: install the CDK CLI first (make venv)")
    with pointed_at(aws_environment(moto_url)):
        cfn = boto3.client("cloudformation")
        cfn.create_stack(
            StackName="CDKToolkit", TemplateBody=BOOTSTRAP_TEMPLATE.read_text(), Capabilities=["CAPABILITY_NAMED_IAM"]
        )
        stack_names = [stack.stack_name for stack in dev.stacks.all()]
        for which, stack_name in zip(("data", "network", "pipeline"), stack_names, strict=True):
            cfn.create_stack(
                StackName=stack_name,
                TemplateBody=json.dumps(moto_template(dev.templates[which])),
                Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
            )
            status = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]["StackStatus"]
            assert status == "CREATE_COMPLETE", (stack_name, status)
        enable_bucket_versioning(dev.templates["data"])
        pipeline_name, role_arn, definition = deployed_definition(dev.templates["pipeline"], stack_names[2])
        boto3.client("sagemaker").create_pipeline(
            PipelineName=pipeline_name, PipelineDefinition=definition, RoleArn=role_arn
        )
    settings = dev.settings
    [rule] = [
        r["Properties"]
        for r in dev.templates["pipeline"]["Resources"].values()
        if r["Type"] == "AWS::Events::Rule" and "SageMakerPipelineParameters" in json.dumps(r)
    ]
    [target] = rule["Targets"]
    return Deployed(
        env_name=settings.env_name,
        stack_names=stack_names,
        datasets_bucket=settings.bucket_name("datasets", ACCOUNT, REGION),
        artifacts_bucket=settings.bucket_name("artifacts", ACCOUNT, REGION),
        pipeline_name=pipeline_name,
        pipeline_role_arn=role_arn,
        pipeline_definition=definition,
        trigger_parameters={
            p["Name"]: p["Value"] for p in target["SageMakerPipelineParameters"]["PipelineParameterList"]
        },
    )


@pytest.fixture
def aws(moto_url) -> Iterator[dict[str, str]]:
    """boto3 pointed at the emulator's empty region (in this process; pass the dict to `run_cli`)."""
    environment = aws_environment(moto_url, EMPTY_REGION)
    with pointed_at(environment):
        yield environment


def small_model(folder: Path, config: dict) -> Path:
    """A model folder with the files staging needs (config, tokenizer, a few bytes of weights)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MODEL_CONFIG).write_text(json.dumps(config))
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n")
    (folder / "tokenizer_config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    return folder


BERT_LARGE_CONFIG = {"model_type": "bert", "hidden_size": 1024, "num_hidden_layers": 24, "architectures": ["BertModel"]}


def stage_base_model(deployed: Deployed, tmp_path: Path) -> None:
    """Put a (tiny stand-in) base model where the pipeline's BaseModelUri points."""
    bucket, prefix = split_s3_uri(deployed.base_model_uri)
    s3 = deployed.client("s3")
    for path in small_model(tmp_path / "base-model", BERT_LARGE_CONFIG).iterdir():
        s3.upload_file(str(path), bucket, f"{prefix}{path.name}")


@dataclass(frozen=True)
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def run_cli(module: str, *args: str, env: dict[str, str], timeout: float = 120) -> CliResult:
    """Run `python -m <module> args` as a user would, with exactly `env` (plus PATH) as its environment."""
    completed = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": ENTRY_POINT_PYTHONPATH, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return CliResult(completed.returncode, completed.stdout, completed.stderr)


def assert_one_line_error(result: CliResult, *fragments: str) -> str:
    """The run failed with exit code 1 and one `error:` line holding every fragment; no traceback."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]
