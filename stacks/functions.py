"""The pipeline's Lambda functions (its Lambda steps), each with a role of its own that may do exactly its job.

Code: the stdlib-only part of training_code/ that training_code/pipeline_functions.py imports, as a folder asset
(staged here, no Docker). Runtime: Python 3.12, the Python of the training images whose qa modules it shares.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from aws_cdk import ArnFormat, Duration, Size, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct
from qa.claim_validation import CLAIM_MAX_DATASET_MB, CLAIM_TIMEOUT_SECONDS, CLAIM_VALIDATION_MEMORY_MB
from qa.data import MAX_JSON_FILE_BYTES
from qa.outputs import CLAIM_STATS_FOLDER, STATS_FILE, STATS_OUTPUT

from config import ArtifactLayout
from config.layout import DatasetLayout
from config.paths import TRAINING_CODE, private_dir
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
    "qa/claim_validation.py",
    "qa/cost.py",
    "qa/data.py",
    "qa/features.py",
    "qa/memory.py",
    "qa/notifications.py",
    "qa/outputs.py",
    "qa/parameter_rules.py",
    "qa/task_file.py",
    "tasks/__init__.py",
    "tasks/labels.py",
    "tasks/question_answering.py",
    "tasks/text_classification.py",
    "tasks/token_classification.py",
)
# A Lambda step waits for its function at most 10 minutes (SageMaker Pipelines step types, Lambda step:
# https://docs.aws.amazon.com/sagemaker/latest/dg/build-and-manage-steps-types.html#step-type-lambda; a step
# whose function ran 7 minutes timed out "exactly at 10 minutes which is the maximum run time for the
# LambdaStep", aws/sagemaker-python-sdk#3236); each function's own timeout stays below it (Lambda allows 900 s).
TIMEOUTS = {"claim_function_arn": 300, "estimate_function_arn": 60, "record_function_arn": 300}
CLAIM_VALIDATION_TIMEOUT = CLAIM_TIMEOUT_SECONDS  # fine_tune mode's claim (below)
# processing.tokenize_in "fine_tune": the claim validates every record (qa/claim_validation.py), sized for the largest
# dataset it accepts, CLAIM_MAX_DATASET_MB (Lambda quotas: timeout up to 900 s, memory 128-10,240 MB, ephemeral
# storage /tmp 512-10,240 MB, https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html):
# - timeout CLAIM_TIMEOUT_SECONDS, under the Lambda step's 10 minutes (above);
# - memory 10,240 MB, the most: a SQuAD JSON file is parsed whole (at most MAX_JSON_FILE_BYTES a file), measured at
#   JSON_PEAK_MEMORY_FACTOR x its size (peak RSS of validate_dataset on the sample's validation file repeated 4,000
#   times, 58 MiB: 480 MiB; a 730 MiB JSON Lines file peaked at 419 MiB, the ids of the duplicate check); 1,769 MB
#   is one vCPU and validation uses one (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html);
# - /tmp twice the largest dataset: the pinned files are downloaded there whole, then removed.
CLAIM_VALIDATION_EPHEMERAL_MB = 2 * CLAIM_MAX_DATASET_MB
JSON_PEAK_MEMORY_FACTOR = 7.7
assert JSON_PEAK_MEMORY_FACTOR * MAX_JSON_FILE_BYTES < CLAIM_VALIDATION_MEMORY_MB * 2**20, "a JSON file must fit"
assert 512 <= CLAIM_VALIDATION_EPHEMERAL_MB <= 10_240 and CLAIM_TIMEOUT_SECONDS < 600
LAMBDA = iam.ServicePrincipal("lambda.amazonaws.com")
# Not the newest Lambda Python (cdk-nag AwsSolutions-L1, acknowledged on each function): the training images' Python.
RUNTIME = lambda_.Runtime.PYTHON_3_12


def function_files_digest(root: Path, relatives: Iterable[str] = FUNCTION_FILES) -> str:
    """SHA-256 over the path and bytes of each of `relatives` under `root`, in sorted order."""
    digest = hashlib.sha256()
    for relative in sorted(relatives):
        digest.update(relative.encode() + b"\0" + (root / relative).read_bytes() + b"\0")
    return digest.hexdigest()


def _holds_exactly(folder: Path, expected_digest: str) -> bool:
    """Whether `folder` holds the function files and nothing else (no symlink, no extra file), with the content
    whose digest is `expected_digest`."""
    try:
        entries = list(folder.rglob("*"))
        if any(entry.is_symlink() for entry in entries):
            return False
        files = {entry.relative_to(folder).as_posix() for entry in entries if not entry.is_dir()}
        return files == set(FUNCTION_FILES) and function_files_digest(folder, files) == expected_digest
    except OSError:
        return False


def stage_function_code(build_dir: Path) -> Path:
    """The function's files in `<build_dir>/pipeline-functions-<content digest>/` (the asset hashes its content).

    `build_dir` must be private to the user (`config.paths.private_dir`). A folder found there is reused only when it
    holds exactly the files of training_code/ that ship (same names, same bytes, no symlinks, nothing else);
    otherwise it is replaced: an appended line or a planted module never reaches the asset. Staged into a temporary
    folder and renamed into place: synths running at the same time (pytest workers, two terminals) never see a
    half-copied folder."""
    expected = function_files_digest(TRAINING_CODE)
    directory = private_dir(build_dir)
    target = directory / f"pipeline-functions-{expected[:16]}"
    if _holds_exactly(target, expected):
        return target
    if target.exists() or target.is_symlink():
        stale = Path(tempfile.mkdtemp(prefix=".stale-pipeline-functions-", dir=directory))
        with contextlib.suppress(FileNotFoundError):  # another synth moved it away first
            target.rename(stale / target.name)
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=".pipeline-functions-", dir=directory))
    for relative in FUNCTION_FILES:
        (staging / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(TRAINING_CODE / relative, staging / relative)
    try:
        staging.rename(target)
    except OSError:  # another synth renamed the same content into place first
        shutil.rmtree(staging, ignore_errors=True)
        if not _holds_exactly(target, expected):
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
        role_name: str | None = None,
        memory_mb: int = 1024,
        ephemeral_mb: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self, "Role", assumed_by=LAMBDA, description=f"{name_prefix}: {purpose}", role_name=role_name
        )
        # Encrypted with the project key, whose policy lets CloudWatch Logs use it for the project's log groups.
        self.log_group = encrypted_log_group(
            self, "Logs", lifetime=log_groups, key=key, purpose=f"{log_groups.function_folder}/{construct_id}"
        )
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            handler=handler,
            code=code,
            role=self.role,
            timeout=timeout,
            memory_size=memory_mb,  # CPU scales with memory: the record function hashes a model archive
            ephemeral_storage_size=Size.mebibytes(ephemeral_mb) if ephemeral_mb else None,
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
        record_role_name: str,
        layout: ArtifactLayout,
        dataset_layout: DatasetLayout,
        log_groups: LogGroupSettings,
        key: ProjectKey,
        datasets: SecureBucket,
        artifacts: SecureBucket,
        build_dir: Path,
        claim_validates: bool = False,
    ) -> None:
        """`claim_validates`: processing.tokenize_in "fine_tune" (the claim validates the records, estimates stats)."""
        super().__init__(scope, construct_id)
        # The bundle, shared with the notification function (stacks/notifications.py).
        self.code = code = lambda_.Code.from_asset(str(stage_function_code(build_dir)))
        claim_memory, claim_ephemeral = (
            (CLAIM_VALIDATION_MEMORY_MB, CLAIM_VALIDATION_EPHEMERAL_MB) if claim_validates else (1024, None)
        )
        self.claim, self.estimate, self.record = (
            PipelineFunction(
                self,
                name,
                name_prefix=name_prefix,
                log_groups=log_groups,
                key=key.key,
                code=code,
                handler=FUNCTION_HANDLERS[field],
                timeout=Duration.seconds(
                    CLAIM_VALIDATION_TIMEOUT if claim_validates and name == names.CLAIM_STEP else TIMEOUTS[field]
                ),
                purpose=f"pipeline step {name}",
                role_name=role_name,
                memory_mb=memory_mb,
                ephemeral_mb=ephemeral_mb,
            )
            for name, field, role_name, memory_mb, ephemeral_mb in (
                (names.CLAIM_STEP, "claim_function_arn", None, claim_memory, claim_ephemeral),
                (names.ESTIMATE_STEP, "estimate_function_arn", None, 1024, None),
                # The data stack's bucket policy names this role: the only writer of registry/.
                (names.RECORD_STEP, "record_function_arn", record_role_name, 1024, None),
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
                resources=[datasets.object_arn(f"{dataset_layout.root}/*")],
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

        # fine_tune mode's validation needs no claim permission more: it reads each pinned file at its version with
        # ReadDatasetVersions (GetObject with a VersionId is authorized as s3:GetObjectVersion, resource type object),
        # sizes the pinned copies with HeadObject (authorized as s3:GetObject: ReadClaimsAndInputs) and writes the
        # stats under inputs/ (PinInputs) (https://docs.aws.amazon.com/service-authorization/latest/reference/
        # list_amazons3.html, https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html).
        # The estimate: the dataset statistics and the base model's config.json. In fine_tune mode also the claim's
        # estimated stats.json (s3:GetObject on that key only: <inputs>/CLAIM_STATS_FOLDER/<claim digest>/stats.json,
        # never inside a pinned folder, whose name is a 64-hex digest, so no uploaded file matches it).
        claim_stats = artifacts.object_arn(f"{layout.inputs}/{CLAIM_STATS_FOLDER}/*/{STATS_FILE}")
        job_stats = artifacts.object_arn(f"{layout.processed}/*/{STATS_OUTPUT}/*")  # ValidateAndTokenize's
        add_reviewed_statement(
            self.estimate.role,
            iam.PolicyStatement(
                sid="ReadStatsAndModelConfig",
                actions=["s3:GetObject"],
                resources=[
                    claim_stats if claim_validates else job_stats,
                    artifacts.object_arn(f"{layout.base_models}/*/config.json"),
                ],
            ),
            "EstimateTrainingCost reads the dataset statistics (ValidateAndTokenize's under each execution id, or in "
            "fine_tune mode the claim's per manifest version), and only the config.json of a staged base model (its "
            "size decides the estimate), whichever model it is.",
        )

        # The record: list the trained archive's versions, read (hash) and copy its one version into registry/
        # (read back when the same bytes were registered before), write the model-quality reports.
        add_reviewed_statement(
            self.record.role,
            iam.PolicyStatement(
                sid="ReadModelArchives",
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[artifacts.object_arn(f"{layout.models}/*"), artifacts.object_arn(f"{layout.registry}/*")],
            ),
            "RecordModel reads (and hashes) the model archive of the execution's training job, whose key SageMaker "
            f"names after the job at run time, and its copy under {layout.registry}/<sha256>/.",
        )
        # ListObjectVersions is authorized as s3:ListBucketVersions, whose s3:prefix condition key scopes it
        # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html).
        for sid, prefix in (("ListModelArchiveVersions", layout.models), ("ListRegistryVersions", layout.registry)):
            self.record.role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid=sid,
                    actions=["s3:ListBucketVersions"],
                    resources=[artifacts.arn_by_name],
                    conditions={"StringLike": {"s3:prefix": f"{prefix}/*"}},
                )
            )
        add_reviewed_statement(
            self.record.role,
            iam.PolicyStatement(
                sid="CopyToRegistryIfAbsent",
                actions=["s3:PutObject"],
                resources=[artifacts.object_arn(f"{layout.registry}/*")],
                # No condition on s3:if-none-match, though the copy always sends If-None-Match
                # (pipeline_functions.copy_to_registry): AWS's pages disagree on whether a CopyObject carries that
                # key. The conditional-writes enforcement page says copies under such a condition fail (403 without
                # the header, 501 Not Implemented with it:
                # https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html); S3's
                # conditional-copy announcement (2025-10) says the keys now apply to copies. A condition that AWS
                # does not evaluate for copies would fail every RecordModel; the bucket policy still lets only this
                # role write registry/ and no one delete there, and the key is the content's own SHA-256.
            ),
            f"RecordModel creates one content-addressed copy per trained archive, {layout.registry}/<sha256>/"
            "model.tar.gz (with If-None-Match, not required by IAM: see the comment).",
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
