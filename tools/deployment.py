"""What the command-line tools share: the deployed environment's names, AWS look-ups, one-line errors.

Every tool runs its `main` through `run_tool`, which turns the failures a user can fix (no credentials, no
region, unknown environment, a missing bucket or pipeline, ...) into one line naming the fix, never a
traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from qa.model_folder import ModelFolderError, missing_model_parts
from qa.outputs import DATASET_NAME_CHARACTER, DATASET_NAME_FIRST, DATASET_NAME_MAX_LENGTH
from qa.parameter_rules import short

from config import ConfigError, Settings, load_settings, read_cdk_json_context
from config.loader import DEFAULT_ENV
from config.paths import CDK_JSON
from config.settings import STACK_PURPOSES, BucketPurpose

CREDENTIALS_FIX = (
    "run `aws configure` or `aws sso login`, or set AWS_PROFILE (or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
)
# Error codes of expired or rejected credentials, per service (STS, S3, most JSON services).
BAD_CREDENTIAL_CODES = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
    }
)


# NAME/VERSION of a dataset (and other names that become S3 key segments): the rule of qa/outputs.py (S3's "safe
# characters", https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html), checked one part at a time.
NAME_MAX_LENGTH = DATASET_NAME_MAX_LENGTH
NAME_FIRST = re.compile(DATASET_NAME_FIRST)
NAME_REST = re.compile(f"{DATASET_NAME_CHARACTER}*")
# What SageMaker answers for a pipeline or execution that does not exist: AWS, ResourceNotFound (the Errors of
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribePipelineExecution.html and
# API_DescribePipeline.html; API_DescribeModelPackage.html names no error of its own, and verify-model has always
# taken its ValidationException for not found); moto, ValidationException ("Could not find pipeline ...").
SAGEMAKER_NOT_FOUND_CODES = frozenset({"ResourceNotFound", "ValidationException"})
# An error body that is a web page, not an AWS error response (a proxy's, or an emulator's for an API it lacks).
HTML_TITLE = re.compile(r"<title>(.*?)</title>", re.IGNORECASE | re.DOTALL)
HTML_TAG = re.compile(r"<[^>]+>")


class ToolError(Exception):
    """A failure the user can fix; the message is one line naming the bad thing and the fix."""


def fail(message: str) -> NoReturn:
    raise ToolError(message)


class ToolParser(argparse.ArgumentParser):
    """An argument parser whose usage errors end, like every other failure, in one `error:` line."""

    def __init__(self, doc: str | None = None, **kwargs: Any) -> None:  # sub-command parsers get prog=...
        super().__init__(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see --help)")


def not_found_in_region(what: str, region: str, fix: str) -> NoReturn:
    """Fail: `what` does not exist in `region`, the one the tools use (`load_deployment`)."""
    fail(f"{what} not found in {region}: check AWS_REGION, or {fix}")


def check_name(option: str, value: str) -> str:
    """`value` when it is a valid NAME/VERSION; fails naming the rule it breaks (and a short prefix of it)."""
    if not value:
        fail(f"{option} is empty: use 1 to {NAME_MAX_LENGTH} letters, digits, '.', '_' or '-'")
    if len(value) > NAME_MAX_LENGTH:
        fail(f"{option} {short(value)} has {len(value)} characters: at most {NAME_MAX_LENGTH} are allowed")
    if not NAME_FIRST.fullmatch(value[0]):
        fail(f"{option} {short(value)} must start with a letter or a digit")
    if not NAME_REST.fullmatch(value):
        bad = next(c for c in value if not NAME_REST.fullmatch(c))
        fail(f"{option} {short(value)} contains {bad!r}: use only letters, digits, '.', '_' or '-'")
    return value


def region_name() -> str | None:
    """The region the environment names: AWS_REGION, else AWS_DEFAULT_REGION (None: neither is set).

    AWS_REGION is the `region` setting's environment variable in the SDKs and Tools reference
    (https://docs.aws.amazon.com/sdkref/latest/guide/feature-region.html), and the AWS CLI v2 lets it override
    AWS_DEFAULT_REGION and the profile's `region`
    (https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-envvars.html). boto3 reads only
    AWS_DEFAULT_REGION and the config file, so every tool's session takes its region from here (`aws_session`).
    """
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None


def aws_session() -> Any:
    """The tools' one boto3 session: in the region of `region_name()` (None: the profile's `region`, if any)."""
    import boto3

    return boto3.Session(region_name=region_name())


def settings_for(env_name: str, task: str | None = None) -> Settings:
    """The settings of `env_name` from cdk.json (no AWS call) as `make synth TASK=<task>` reads them: its pipeline of
    `task` where it deploys one (Settings.pipelines), else its settings with `task` in place of its own (a local run's
    assembly); None: the environment's own pipeline."""
    context = {**read_cdk_json_context(CDK_JSON), "env": env_name, **({"task": task} if task else {})}
    try:
        return load_settings(context)
    except ConfigError as err:
        fail(f"{err}".replace("(-c env=...)", "(--env / ENV=...)"))


def add_pipeline_arguments(parser: argparse.ArgumentParser) -> None:
    """--env and --task: which environment, and which of its pipelines (TASK; default: the environment's task)."""
    parser.add_argument("--env", default=DEFAULT_ENV)
    parser.add_argument("--task", help="the environment's pipeline of this task (default: the environment's task)")


@dataclass(frozen=True)
class Deployment:
    """One environment as deployed in the caller's account and region."""

    settings: Settings
    account: str
    region: str
    session: Any  # boto3.Session
    other_task: str | None = None  # the task of a pipeline of `pipelines` (None: the environment's own)

    @property
    def make_values(self) -> str:
        """`ENV=<env>` (and `TASK=<task>` for a pipeline other than the environment's own): what the make commands a
        tool suggests name."""
        return f"ENV={self.settings.env_name}" + (f" TASK={self.other_task}" if self.other_task else "")

    def bucket(self, purpose: BucketPurpose) -> str:
        return self.settings.bucket_name(purpose, self.account, self.region)

    def client(self, service: str) -> Any:
        return self.session.client(service, region_name=self.region)

    @property
    def stack_names(self) -> list[str]:
        return [self.settings.stack_name(purpose) for purpose in STACK_PURPOSES]

    @property
    def default_base_model_uri(self) -> str:
        return self.settings.base_model_uri(self.bucket("artifacts"))


def load_deployment(env_name: str, task: str | None = None) -> Deployment:
    """Settings of `env_name` (of its deployed pipeline of `task`; None: its own) plus the account and region of the
    caller's AWS session (`aws_session`). The region: the environment's `region` in cdk.json, else AWS_REGION, else
    AWS_DEFAULT_REGION, else the profile's."""
    own = settings_for(env_name)
    try:
        settings = own if task is None else own.pipeline_of(task)
    except ValueError as err:
        fail(str(err))
    session = aws_session()
    region = settings.region or session.region_name
    if not region:
        fail(f"no AWS region: set AWS_REGION (or `region` in cdk.json's '{env_name}' environment)")
    account = session.client("sts", region_name=region).get_caller_identity()["Account"]
    other_task = settings.task if settings.task != own.task else None
    return Deployment(
        settings=settings, account=settings.account or account, region=region, session=session, other_task=other_task
    )


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def bucket_exists(s3: Any, bucket: str) -> bool:
    """Whether `bucket` exists; a bucket the caller may not read is a failure of its own."""
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as err:
        code = err.response["Error"]["Code"]
        if code in ("404", "NoSuchBucket", "NotFound"):
            return False
        if code in ("403", "AccessDenied"):
            fail(f"access denied to s3://{bucket}: use credentials of the account that deployed the stacks")
        raise
    return True


def staged_model_problems(s3: Any, uri: str) -> list[str]:
    """What the model folder at `uri` lacks (empty when config, tokenizer and weights are there)."""
    bucket, prefix = split_s3_uri(uri)
    if not bucket_exists(s3, bucket):
        fail(f"the bucket of the base model {uri} does not exist: deploy the stacks first (make deploy)")
    names = [
        item["Key"][len(prefix) :]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for item in page.get("Contents", [])
    ]
    return missing_model_parts(names)


def is_sagemaker_not_found(err: Exception) -> bool:
    """Whether `err` is SageMaker's answer for a resource that does not exist (SAGEMAKER_NOT_FOUND_CODES)."""
    from botocore.exceptions import ClientError

    return isinstance(err, ClientError) and err.response.get("Error", {}).get("Code") in SAGEMAKER_NOT_FOUND_CODES


def pipeline_definition(sagemaker: Any, pipeline_name: str) -> dict[str, Any] | None:
    """The deployed pipeline's definition; None when the pipeline does not exist."""
    from botocore.exceptions import ClientError

    try:
        definition = sagemaker.describe_pipeline(PipelineName=pipeline_name)["PipelineDefinition"]
    except ClientError as err:
        if is_sagemaker_not_found(err):
            return None
        raise
    return dict(json.loads(definition))


def pipeline_parameters(sagemaker: Any, pipeline_name: str) -> list[dict[str, Any]] | None:
    """The deployed pipeline's parameter declarations (Name, Type, DefaultValue, EnumValues); None when the
    pipeline does not exist."""
    definition = pipeline_definition(sagemaker, pipeline_name)
    return None if definition is None else list(definition.get("Parameters", []))


def pipeline_parameter_defaults(sagemaker: Any, pipeline_name: str) -> dict[str, Any] | None:
    """Name -> default value of the deployed pipeline's parameters; None when the pipeline does not exist."""
    parameters = pipeline_parameters(sagemaker, pipeline_name)
    return None if parameters is None else {p["Name"]: p.get("DefaultValue") for p in parameters}


def one_line_message(error: dict[str, Any]) -> str:
    """The Message of an AWS error response (botocore's `response["Error"]`) on one line; an HTML page in its
    place, its title, saying so (moto answers an API it does not implement with a "500 Internal Server Error"
    page)."""
    text = str(error.get("Message", "")).strip()
    if text.startswith("<"):
        title = HTML_TITLE.search(text)
        page = (title.group(1) if title else HTML_TAG.sub(" ", text)).strip()
        page = page.removeprefix(str(error.get("Code", ""))).strip()  # the HTTP status is named already
        text = f"{page} (the endpoint answered with a web page, not an AWS error: it may not implement this API)"
    return " ".join(text.split())


def describe_aws_failure(err: Exception) -> str | None:
    """One line with the fix for the AWS SDK errors a user meets; None for anything else."""
    from botocore import exceptions as bex

    if isinstance(err, bex.NoCredentialsError | bex.PartialCredentialsError):
        return f"no AWS credentials found: {CREDENTIALS_FIX}"
    if isinstance(err, bex.TokenRetrievalError | bex.SSOError | bex.UnauthorizedSSOTokenError):
        return f"AWS SSO session expired or missing: run `aws sso login` ({err})"
    if isinstance(err, bex.ProfileNotFound):
        return f"{err}: check AWS_PROFILE against ~/.aws/config"
    if isinstance(err, bex.NoRegionError):
        return "no AWS region: set AWS_REGION (or `region` in cdk.json's environment)"
    if isinstance(err, bex.EndpointConnectionError | bex.ConnectTimeoutError):
        return f"cannot reach {getattr(err, 'kwargs', {}).get('endpoint_url', 'AWS')}: check the network and AWS_REGION"
    if isinstance(err, bex.ClientError):
        error = err.response.get("Error", {})
        code, message, operation = str(error.get("Code", "")), one_line_message(error), err.operation_name
        if code in BAD_CREDENTIAL_CODES:
            return f"AWS rejected the credentials ({code}): {CREDENTIALS_FIX}"
        if code in ("AccessDenied", "AccessDeniedException", "403"):
            return f"access denied to {operation}: use credentials allowed to deploy and run this project ({message})"
        status = f"HTTP {code}" if code.isdigit() else code  # no error code in the body: botocore gives the status
        return f"AWS {operation} failed: {status} {message}".rstrip()
    return None


def run_tool(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
    """Run a tool's `main`; user-fixable failures end in one `error: ...` line on stderr and exit code 1."""
    try:
        return main(argv)
    except (ToolError, ModelFolderError) as err:
        message = str(err)
    except KeyboardInterrupt:
        message = "interrupted"
    except Exception as err:  # AWS SDK failures only; anything else is a bug and keeps its traceback
        described = describe_aws_failure(err)
        if described is None:
            raise
        message = described
    print(f"error: {message}", file=sys.stderr)
    return 1
