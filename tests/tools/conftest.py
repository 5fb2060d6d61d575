"""An AWS API emulator for the client tools: one moto server per test session, a fresh account per test.

What this is: a client-side test bed. The tools run as users run them (subprocesses with boto3 pointed at
the emulator), against the names a deployment creates. What it is not: proof that AWS accepts the stacks.
moto 5.2.5 ignores or skips what matters for that (bucket policies, security-group egress, queue/topic
policies, KMS key tags, `AWS::SageMaker::Pipeline` and `ModelPackageGroup` resources, the auto-delete custom
resources, IAM enforcement, EventBridge -> SageMaker targets; `create_pipeline` accepts any definition and
`list_pipeline_executions` ignores `CreatedAfter`). So the stand-in stacks below carry only what the tools
read: the CDK bootstrap stack and its version parameter, stacks named like ours, the two buckets (created
through CloudFormation), and the pipeline (created through the SageMaker API, with the real parameters and
their defaults from pipeline_steps). The template content itself is checked by tests/stacks (cdk-nag,
cfn-lint, assertions).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest

from tests.conftest import ROOT
from tests.training_code.conftest import pretrained_dir  # noqa: F401  (shared model fixture)
from tools.deployment import MODEL_CONFIG, load_deployment

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account
BOOTSTRAP_QUALIFIER = "hnb659fds"  # CDK's default qualifier


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def moto_url(tmp_path_factory) -> Iterator[str]:
    """Start `moto_server` on a free local port for the session; stopped by its process id."""
    port = _free_port()
    log = (tmp_path_factory.mktemp("moto") / "moto_server.log").open("w")
    server = Path(sys.executable).with_name("moto_server")
    process = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):  # up to ~30 s on a busy machine
            if process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {process.returncode}; see {log.name}")
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"moto_server did not answer on {url}; see {log.name}")
        yield url
    finally:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        log.close()


def aws_environment(moto_url: str) -> dict[str, str]:
    """Dummy credentials and a region for the emulator; no profile, config or credentials file is read."""
    return {
        "AWS_ENDPOINT_URL": moto_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",  # no instance-metadata probe when credentials are missing
    }


@pytest.fixture
def aws(moto_url, monkeypatch) -> dict[str, str]:
    """A fresh emulator account with boto3 pointed at it (in this process, and for `run_cli`)."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST")).close()
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    environment = aws_environment(moto_url)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    return environment


def _stack(resources: dict) -> str:
    return json.dumps({"AWSTemplateFormatVersion": "2010-09-09", "Resources": resources})


@dataclass(frozen=True)
class StandIn:
    """What the stand-in deployment created, by name."""

    env_name: str
    datasets_bucket: str
    artifacts_bucket: str
    pipeline_name: str
    base_model_uri: str

    def client(self, service: str):
        return boto3.client(service, region_name=REGION)


def deploy_stand_in(env_name: str = "dev", *, bootstrap_version: int = 30, pipeline: bool = True) -> StandIn:
    """Create, in the emulator, what `cdk bootstrap` and `make deploy` leave behind that the tools read."""
    deployment = load_deployment(env_name)
    settings = deployment.settings
    cfn = boto3.client("cloudformation", region_name=REGION)
    parameter = {
        "Type": "AWS::SSM::Parameter",
        "Properties": {
            "Name": f"/cdk-bootstrap/{BOOTSTRAP_QUALIFIER}/version",
            "Type": "String",
            "Value": str(bootstrap_version),
        },
    }
    cfn.create_stack(StackName="CDKToolkit", TemplateBody=_stack({"CdkBootstrapVersion": parameter}))
    buckets = {
        f"{purpose.title()}Bucket": {
            "Type": "AWS::S3::Bucket",
            "Properties": {"BucketName": deployment.bucket(purpose)},
        }
        for purpose in ("datasets", "artifacts")
    }
    vpc = {"Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}}
    topic = {"Topic": {"Type": "AWS::SNS::Topic"}}
    for stack_name, resources in zip(deployment.stack_names, (buckets, vpc, topic), strict=True):
        cfn.create_stack(StackName=stack_name, TemplateBody=_stack(resources))
    if pipeline:
        create_pipeline(deployment)
    return StandIn(
        env_name=env_name,
        datasets_bucket=deployment.bucket("datasets"),
        artifacts_bucket=deployment.bucket("artifacts"),
        pipeline_name=settings.pipeline_name,
        base_model_uri=deployment.default_base_model_uri,
    )


def create_pipeline(deployment, extra_parameters: tuple[dict, ...] = ()) -> None:
    """The pipeline with the real parameters and defaults (moto skips AWS::SageMaker::Pipeline resources)."""
    from pipeline_steps.parameters import build_parameters

    parameters = build_parameters(
        deployment.settings,
        datasets_bucket=deployment.bucket("datasets"),
        artifacts_bucket=deployment.bucket("artifacts"),
    )
    definition = {
        "Version": "2020-12-01",
        "Parameters": [*(p.to_request() for p in parameters.all()), *extra_parameters],
        "Steps": [],
    }
    deployment.client("sagemaker").create_pipeline(
        PipelineName=deployment.settings.pipeline_name,
        PipelineDefinition=json.dumps(definition),
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline",
    )


@pytest.fixture
def deployed(aws) -> StandIn:
    """A bootstrapped account with the dev stacks deployed, the base model not yet staged."""
    return deploy_stand_in()


def small_model(folder: Path, config: dict) -> Path:
    """A model folder with the files staging needs (config, tokenizer, a few bytes of weights)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MODEL_CONFIG).write_text(json.dumps(config))
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n")
    (folder / "tokenizer_config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    return folder


BERT_LARGE_CONFIG = {"model_type": "bert", "hidden_size": 1024, "num_hidden_layers": 24, "architectures": ["BertModel"]}


def stage_base_model(stand_in: StandIn, tmp_path: Path) -> None:
    """Put a (tiny stand-in) base model where the pipeline's BaseModelUri points."""
    from tools.deployment import split_s3_uri

    bucket, prefix = split_s3_uri(stand_in.base_model_uri)
    s3 = stand_in.client("s3")
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
        env={"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1", **env},
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
