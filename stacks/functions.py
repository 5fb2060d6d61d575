"""The pipeline's Lambda functions (its Lambda steps), each with a role of its own that may do exactly its job.

Code: the stdlib-only part of training_code/ that training_code/pipeline_functions.py imports, as a folder asset
(staged here, no Docker). Runtime: Python 3.12, the Python of the training images whose qa modules it shares.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct
from qa.outputs import STATS_OUTPUT

from config import ArtifactLayout
from config.layout import DatasetLayout
from config.paths import TRAINING_CODE
from pipeline_steps import names
from pipeline_steps.placeholders import FUNCTION_HANDLERS
from stacks.data import ProjectKey, SecureBucket
from stacks.log_groups import LogGroupSettings, encrypted_log_group
from stacks.nag import acknowledge, add_reviewed_statement

# What pipeline_functions.py and notification_function.py import (stdlib, boto3 from the runtime, and these
# stdlib-only modules).
FUNCTION_FILES = (
    "pipeline_functions.py",
    "notification_function.py",
    "qa/__init__.py",
    "qa/cost.py",
    "qa/notifications.py",
    "qa/outputs.py",
    "qa/parameter_rules.py",
)
# A Lambda step waits for its function at most 10 minutes (SageMaker Pipelines step types, Lambda step:
# https://docs.aws.amazon.com/sagemaker/latest/dg/build-and-manage-steps-types.html#step-type-lambda; a step
# whose function ran 7 minutes timed out "exactly at 10 minutes which is the maximum run time for the
# LambdaStep", aws/sagemaker-python-sdk#3236); each function's own timeout stays below it (Lambda allows 900 s).
TIMEOUTS = {"claim_function_arn": 300, "estimate_function_arn": 60, "record_function_arn": 300}
LAMBDA = iam.ServicePrincipal("lambda.amazonaws.com")
# Not the newest Lambda Python (cdk-nag AwsSolutions-L1, acknowledged on each function): the training images' Python.
RUNTIME = lambda_.Runtime.PYTHON_3_12


def stage_function_code(build_dir: Path) -> Path:
    """The function's files in `<build_dir>/pipeline-functions-<content digest>/` (the asset hashes its content).

    Staged into a temporary folder and renamed into place, and named by what it holds: synths running at the same
    time (pytest workers, two terminals) never see a half-copied folder or delete the one another is reading."""
    digest = hashlib.sha256()
    for relative in FUNCTION_FILES:
        digest.update(relative.encode() + b"\0" + (TRAINING_CODE / relative).read_bytes() + b"\0")
    target = build_dir / f"pipeline-functions-{digest.hexdigest()[:16]}"
    if target.is_dir():
        return target
    build_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".pipeline-functions-", dir=build_dir))
    for relative in FUNCTION_FILES:
        (staging / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(TRAINING_CODE / relative, staging / relative)
    try:
        staging.rename(target)
    except OSError:  # another synth renamed the same content into place first
        shutil.rmtree(staging, ignore_errors=True)
        if not target.is_dir():
            raise
    return target


def pipeline_arn(scope: Construct, pipeline_name: str) -> str:
    """One pipeline: the resource form of its pipeline actions (ListPipelineExecutions, ...)."""
    return Stack.of(scope).format_arn(
        service="sagemaker", resource="pipeline", resource_name=pipeline_name, arn_format=ArnFormat.SLASH_RESOURCE_NAME
    )


def pipeline_executions_arn(scope: Construct, pipeline_name: str) -> str:
    """Every execution of one pipeline: the resource form of its execution actions."""
    return f"{pipeline_arn(scope, pipeline_name)}/execution/*"


class PipelineFunction(Construct):
    """One function of the bundle: its own role, its own log group. `purpose` ends both descriptions."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name_prefix: str,
        log_groups: LogGroupSettings,
        key: kms.IKey,
        code: lambda_.Code,
        handler: str,
        timeout: Duration,
        purpose: str,
        environment: dict[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(self, "Role", assumed_by=LAMBDA, description=f"{name_prefix}: {purpose}")
        # Encrypted with the project key, whose policy lets CloudWatch Logs use it for this account's log groups.
        self.log_group = encrypted_log_group(self, "Logs", lifetime=log_groups, key=key)
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            handler=handler,
            code=code,
            role=self.role,
            timeout=timeout,
            memory_size=1024,  # CPU scales with memory: the record function hashes a model archive
            log_group=self.log_group,
            description=f"{name_prefix}: SageMaker {purpose}",
            environment=environment,
        )
        acknowledge(
            self.function,
            "L1",
            f"The pipeline functions run on {RUNTIME.name}, the Python of the training images whose qa modules (cost "
            "model, contract) they import, so both run the code on the same version.",
        )


class PipelineFunctions(Construct):
    """ClaimManifest, EstimateTrainingCost and RecordModel, least privilege each."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name_prefix: str,
        pipeline_name: str,
        layout: ArtifactLayout,
        log_groups: LogGroupSettings,
        key: ProjectKey,
        datasets: SecureBucket,
        artifacts: SecureBucket,
        build_dir: Path,
    ) -> None:
        super().__init__(scope, construct_id)
        # The bundle, shared with the notification function (stacks/notifications.py).
        self.code = code = lambda_.Code.from_asset(str(stage_function_code(build_dir)))
        self.claim, self.estimate, self.record = (
            PipelineFunction(
                self,
                name,
                name_prefix=name_prefix,
                log_groups=log_groups,
                key=key.key,
                code=code,
                handler=FUNCTION_HANDLERS[field],
                timeout=Duration.seconds(TIMEOUTS[field]),
                purpose=f"pipeline step {name}",
            )
            for name, field in (
                (names.CLAIM_STEP, "claim_function_arn"),
                (names.ESTIMATE_STEP, "estimate_function_arn"),
                (names.RECORD_STEP, "record_function_arn"),
            )
        )
        for function in (self.claim, self.estimate, self.record):
            key.grant_sse_kms(function.role)
        # The claim: read the manifest and its files at any version (datasets/*), claim with a conditional write
        # only, copy the pinned files into inputs/*, and look up the owner execution's status.
        claim = self.claim.role
        add_reviewed_statement(
            claim,
            iam.PolicyStatement(
                sid="ReadDatasetVersions",
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[datasets.object_arn(f"{DatasetLayout().root}/*")],
            ),
            "Only the ClaimManifest function reads dataset objects (GetObject, GetObjectVersion): the manifest and "
            "the files it lists, whose names users choose at upload time; it copies them at their versions into the "
            f"artifacts bucket's {layout.inputs}/ prefix.",
        )
        datasets.grant_list(claim)  # a missing key then reads as 404 (a clear error), not 403
        claims, inputs = artifacts.object_arn(f"{layout.claims}/*"), artifacts.object_arn(f"{layout.inputs}/*")
        # s3:if-none-match / s3:if-match: the claim object may only be created if absent, or replaced if unchanged
        # (a take-over); an unconditional overwrite is denied
        # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html).
        for sid, condition_key in (
            ("CreateClaimIfAbsent", "s3:if-none-match"),
            ("TakeOverClaimIfUnchanged", "s3:if-match"),
        ):
            add_reviewed_statement(
                claim,
                iam.PolicyStatement(
                    sid=sid,
                    actions=["s3:PutObject"],
                    resources=[claims],
                    conditions={"Null": {condition_key: "false"}},
                ),
                "ClaimManifest creates a claim object per manifest version (named by a SHA-256 of bucket, key and "
                "version); its PutObject is allowed only with an If-None-Match or If-Match header (s3:if-none-match "
                "/ s3:if-match Null conditions).",
            )
        add_reviewed_statement(
            claim,
            iam.PolicyStatement(sid="ReadClaimsAndInputs", actions=["s3:GetObject"], resources=[claims, inputs]),
            "ClaimManifest reads back the claim objects and the pinned inputs it wrote, whose keys are named by the "
            "claim digest of each manifest version.",
        )
        add_reviewed_statement(
            claim,
            iam.PolicyStatement(sid="PinInputs", actions=["s3:PutObject"], resources=[inputs]),
            "ClaimManifest writes one folder per manifest version (named by the claim digest) holding the pinned "
            "data files.",
        )
        artifacts.grant_list(claim)
        add_reviewed_statement(
            claim,
            iam.PolicyStatement(
                sid="DescribeOwnerExecutions",
                actions=["sagemaker:DescribePipelineExecution"],
                resources=[pipeline_executions_arn(self, pipeline_name)],
            ),
            "ClaimManifest may only describe executions of this one pipeline (DescribePipelineExecution), to learn "
            "whether a claim's owner failed.",
        )
        # ListPipelineExecutions: resource type pipeline, arn:${Partition}:sagemaker:${Region}:${Account}:pipeline/
        # ${PipelineName} (Service Authorization Reference, Amazon SageMaker AI; tests/stacks/iam_reference.py).
        claim.add_to_principal_policy(
            iam.PolicyStatement(
                sid="CountPipelineExecutions",
                actions=["sagemaker:ListPipelineExecutions"],
                resources=[pipeline_arn(self, pipeline_name)],
            )
        )

        # The estimate: the dataset statistics and the base model's config.json.
        add_reviewed_statement(
            self.estimate.role,
            iam.PolicyStatement(
                sid="ReadStatsAndModelConfig",
                actions=["s3:GetObject"],
                resources=[
                    artifacts.object_arn(f"{layout.processed}/*/{STATS_OUTPUT}/*"),  # ValidateAndTokenize's
                    artifacts.object_arn(f"{layout.base_models}/*/config.json"),
                ],
            ),
            "EstimateTrainingCost reads the dataset statistics that each execution's preprocessing writes under its "
            "own execution id, and only the config.json of a staged base model (its size decides the estimate), "
            "whichever model it is.",
        )

        # The record: read model archives, write the model-quality reports.
        add_reviewed_statement(
            self.record.role,
            iam.PolicyStatement(
                sid="ReadModelArchives",
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[artifacts.object_arn(f"{layout.models}/*")],
            ),
            "RecordModel reads (and hashes) the model archive of the execution's training job, whose key SageMaker "
            "names after the job at run time.",
        )
        add_reviewed_statement(
            self.record.role,
            iam.PolicyStatement(
                sid="WriteEvaluationReports",
                actions=["s3:PutObject"],
                resources=[artifacts.object_arn(f"{layout.evaluation}/*")],
            ),
            f"RecordModel writes one model-quality report per execution, under {layout.evaluation}/<execution id>/.",
        )

    @property
    def all(self) -> tuple[PipelineFunction, ...]:
        return (self.claim, self.estimate, self.record)

    def grant_invoke(self, grantee: iam.IGrantable) -> None:
        """lambda:InvokeFunction on exactly these functions (what the pipeline role needs for Lambda steps)."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="InvokePipelineFunctions",
                actions=["lambda:InvokeFunction"],
                resources=[function.function.function_arn for function in self.all],
            )
        )
