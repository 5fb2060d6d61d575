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
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from config import Settings
from pipeline_steps import names
from pipeline_steps.placeholders import FUNCTION_HANDLERS
from stacks.data import ProjectKey, SecureBucket, removal_policy
from stacks.network import log_retention

TRAINING_CODE = Path(__file__).resolve().parents[1] / "training_code"
# What pipeline_functions.py imports (stdlib, boto3 from the runtime, and these stdlib-only modules).
FUNCTION_FILES = ("pipeline_functions.py", "qa/__init__.py", "qa/cost.py", "qa/outputs.py")
# A Lambda step waits for its function at most 10 minutes (SageMaker Pipelines step types, Lambda step:
# https://docs.aws.amazon.com/sagemaker/latest/dg/build-and-manage-steps-types.html#step-type-lambda; a step
# whose function ran 7 minutes timed out "exactly at 10 minutes which is the maximum run time for the
# LambdaStep", aws/sagemaker-python-sdk#3236); each function's own timeout stays below it (Lambda allows 900 s).
TIMEOUTS = {"claim_function_arn": 300, "estimate_function_arn": 60, "record_function_arn": 300}
LAMBDA = iam.ServicePrincipal("lambda.amazonaws.com")


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


class PipelineFunction(Construct):
    """One function: its own role, its own log group (retained as the settings say)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        key: ProjectKey,
        code: lambda_.Code,
        field: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self, "Role", assumed_by=LAMBDA, description=f"{settings.name_prefix}: pipeline step {construct_id}"
        )
        # Encrypted with the project key, whose policy lets CloudWatch Logs use it for this account's log groups.
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=log_retention(settings.log_retention_days),
            encryption_key=key.key,
            removal_policy=removal_policy(settings),
        )
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=lambda_.Runtime.PYTHON_3_12,
            handler=FUNCTION_HANDLERS[field],
            code=code,
            role=self.role,
            timeout=Duration.seconds(TIMEOUTS[field]),
            memory_size=1024,  # CPU scales with memory: the record function hashes a model archive
            log_group=self.log_group,
            description=f"{settings.name_prefix}: SageMaker pipeline step {construct_id}",
        )


class PipelineFunctions(Construct):
    """ClaimManifest, EstimateTrainingCost and RecordModel, least privilege each."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        key: ProjectKey,
        datasets: SecureBucket,
        artifacts: SecureBucket,
        build_dir: Path,
    ) -> None:
        super().__init__(scope, construct_id)
        layout = settings.layout
        code = lambda_.Code.from_asset(str(stage_function_code(build_dir)))
        self.claim, self.estimate, self.record = (
            PipelineFunction(self, name, settings=settings, key=key, code=code, field=field)
            for name, field in (
                (names.CLAIM_STEP, "claim_function_arn"),
                (names.ESTIMATE_STEP, "estimate_function_arn"),
                (names.RECORD_STEP, "record_function_arn"),
            )
        )
        for function in (self.claim, self.estimate, self.record):
            key.grant_sse_kms(function.role)
        artifacts_objects = f"{artifacts.arn_by_name}/"

        # The claim: read the manifest and its files at any version (datasets/*), claim with a conditional write
        # only, copy the pinned files into inputs/*, and look up the owner execution's status.
        claim = self.claim.role
        claim.add_to_policy(
            iam.PolicyStatement(
                sid="ReadDatasetVersions",
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[f"{datasets.arn_by_name}/datasets/*"],
            )
        )
        datasets.grant_list(claim)  # a missing key then reads as 404 (a clear error), not 403
        # s3:if-none-match / s3:if-match: the claim object may only be created if absent, or replaced if unchanged
        # (a take-over); an unconditional overwrite is denied
        # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html).
        for sid, condition_key in (
            ("CreateClaimIfAbsent", "s3:if-none-match"),
            ("TakeOverClaimIfUnchanged", "s3:if-match"),
        ):
            claim.add_to_policy(
                iam.PolicyStatement(
                    sid=sid,
                    actions=["s3:PutObject"],
                    resources=[f"{artifacts_objects}{layout.claims}/*"],
                    conditions={"Null": {condition_key: "false"}},
                )
            )
        claim.add_to_policy(
            iam.PolicyStatement(
                sid="ReadClaimsAndInputs",
                actions=["s3:GetObject"],
                resources=[f"{artifacts_objects}{layout.claims}/*", f"{artifacts_objects}{layout.inputs}/*"],
            )
        )
        claim.add_to_policy(
            iam.PolicyStatement(
                sid="PinInputs", actions=["s3:PutObject"], resources=[f"{artifacts_objects}{layout.inputs}/*"]
            )
        )
        artifacts.grant_list(claim)
        stack = Stack.of(self)
        claim.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeOwnerExecutions",
                actions=["sagemaker:DescribePipelineExecution"],
                resources=[
                    stack.format_arn(
                        service="sagemaker",
                        resource="pipeline",
                        resource_name=f"{settings.pipeline_name}/execution/*",
                        arn_format=ArnFormat.SLASH_RESOURCE_NAME,
                    )
                ],
            )
        )

        # The estimate: the dataset statistics and the base model's config.json.
        self.estimate.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadStatsAndModelConfig",
                actions=["s3:GetObject"],
                resources=[
                    f"{artifacts_objects}{layout.processed}/*/stats/*",
                    f"{artifacts_objects}{layout.base_models}/*/config.json",
                ],
            )
        )

        # The record: read model archives, write the model-quality reports.
        self.record.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadModelArchives",
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[f"{artifacts_objects}{layout.models}/*"],
            )
        )
        self.record.role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteEvaluationReports",
                actions=["s3:PutObject"],
                resources=[f"{artifacts_objects}{layout.evaluation}/*"],
            )
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
