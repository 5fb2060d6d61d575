"""Least-privilege IAM roles: one the jobs run as, one the pipeline runs as.

Composition: each role is granted access to the key, buckets and network by the constructs that own them;
only the grants on AWS-owned resources (images, log groups, metrics, SageMaker jobs) are written here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from config import ArtifactLayout
from config.aws_locations import JOB_LOG_GROUPS
from config.images import DLC_REPOSITORIES
from config.instance_types import accepts_volume_kms_key
from stacks.data import ProjectKey, SecureBucket
from stacks.nag import add_reviewed_statement
from stacks.network import EfaSecurityGroup
from stacks.registry import registry_account

SAGEMAKER = iam.ServicePrincipal("sagemaker.amazonaws.com")


class JobRole(Construct):
    """The role processing and training jobs (user code, network-isolated) run as: read the pinned inputs and
    base models, write their own outputs (processed features, checkpoints, models, TensorBoard), pull images,
    log. No dataset, claim or evaluation-report access: the Lambda functions own those."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name_prefix: str,
        layout: ArtifactLayout,
        key: ProjectKey,
        artifacts: SecureBucket,
        job_security_group: EfaSecurityGroup | None,
        benchmark_prefix: str | None = None,
        features_job: bool = True,
    ) -> None:
        """`features_job`: ValidateAndTokenize writes features under processed/ (processing.tokenize_in = "cpu_job");
        False: FineTune tokenizes the pinned inputs itself, and no job writes or lists processed/."""
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        reader = "ValidateAndTokenize" if features_job else "FineTune"
        benchmark = f"; {reader} reads the benchmark in {benchmark_prefix}" if benchmark_prefix else ""
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=SAGEMAKER,
            description=f"{name_prefix}: SageMaker processing and training jobs",
        )
        role = self.role
        # BaseModelUri (the training job's model channel, the processing job's tokenizer) can name only what this
        # role reads: base-models/ and the prefixes below, nothing of the datasets bucket or outside the project. IAM
        # cannot narrow it to base-models/ alone: the same role reads the pinned inputs (the processing job's data)
        # and the features and checkpoints (the training job's channels), and no CreateTrainingJob condition key
        # names a channel's URI (list_amazonsagemaker.html). The claim step's parameter rule
        # (training_code/qa/parameter_rules.py) refuses any other BaseModelUri before a job starts.
        artifacts.grant_read_objects(
            role,
            [f"{layout.base_models}/*", f"{layout.inputs}/*", *([f"{benchmark_prefix}*"] if benchmark_prefix else [])],
            reason=f"Jobs read the base model weights `make stage-model` stages under {layout.base_models}/ (file "
            f"names depend on the model) and the pinned inputs under {layout.inputs}/, one folder per manifest "
            f"version (named by the claim digest) that ClaimManifest writes{benchmark}.",
        )
        written = layout.writable_by_jobs(features_job)
        artifacts.grant_write_objects(
            role,
            written,
            reason=f"Jobs write under the {', '.join(f'{prefix}/' for prefix in written)} prefixes, into keys "
            "SageMaker or the job names after the execution or job; IAM cannot tie a key to the execution, so "
            "isolation (no network of their own) keeps user code from writing other keys.",
        )
        # "If a checkpoint is deleted in the SageMaker AI container, it will also be deleted in the S3 folder"
        # (https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html), done with this role.
        artifacts.grant_delete_objects(
            role,
            layout.deletable_by_jobs(),
            reason="train.py prunes old checkpoints and SageMaker mirrors the deletes to S3 with the job's role, so "
            f"the job may delete under {layout.checkpoints}/ and nowhere else. IAM cannot narrow it to the job's own "
            "execution; the jobs are network-isolated, so only SageMaker's sync of the job's own checkpoint_s3_uri "
            "uses it, and the bucket's versioning keeps what a delete hides.",
        )
        # SageMaker lists each S3Prefix input: the benchmark's folder is one in prod.
        artifacts.grant_list(
            role,
            (
                *layout.listed_by_jobs(features_job),
                *([benchmark_prefix.rstrip("/")] if benchmark_prefix else []),
            ),
        )
        key.grant_sse_kms(role)
        key.grant_job_output_encryption(role)
        key.grant_job_volume_encryption(role)
        if job_security_group is not None:
            job_security_group.grant_job_network_interfaces(role)
        add_reviewed_statement(
            role,
            iam.PolicyStatement(
                sid="PullDeepLearningContainers",
                actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                resources=[
                    stack.format_arn(
                        service="ecr",
                        account=registry_account(self),
                        resource="repository",
                        resource_name=DLC_REPOSITORIES,
                    )
                ],
            ),
            "Jobs pull the AWS Hugging Face deep-learning containers (training, inference and CPU processing "
            "repositories) from AWS's registry.",
        )
        add_reviewed_statement(
            role,
            iam.PolicyStatement(sid="EcrLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            "ecr:GetAuthorizationToken (the registry login before any image pull) supports no resource-level "
            "permissions.",
        )

        # The job logs, in the resource forms AWS gives per action: CreateLogGroup and DescribeLogStreams take a
        # log-group (arn:...:log-group:<name>), CreateLogStream and PutLogEvents a log-stream
        # (arn:...:log-group:<name>:log-stream:<stream>) in the Service Authorization Reference
        # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatchlogs.html);
        # CloudWatch Logs' own page gives a log group's ARN both without and with a trailing ":*", the latter "to
        # refer to the ARN when specifying permissions in IAM policies for all other API actions" than tagging
        # (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/iam-access-control-overview-cwl.html): both
        # forms, so that the job's first CreateLogGroup in a fresh account is allowed whichever ARN it is checked
        # against. Scoped to SageMaker's two job log groups: the execution-role page grants these actions on "*"
        # (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html), no AWS page says they need it.
        def job_log_arn(group: str, suffix: str) -> str:
            return stack.format_arn(
                service="logs",
                resource="log-group",
                resource_name=group + suffix,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )

        groups = list(JOB_LOG_GROUPS.values())
        add_reviewed_statement(
            role,
            iam.PolicyStatement(
                sid="CreateJobLogGroups",
                actions=["logs:CreateLogGroup", "logs:DescribeLogStreams"],
                resources=[job_log_arn(group, suffix) for group in groups for suffix in ("", ":*")],
            ),
            "A log group's ARN with CloudWatch Logs' trailing :* (its own form for IAM policies), for SageMaker's "
            "fixed training and processing log groups only.",
        )
        add_reviewed_statement(
            role,
            iam.PolicyStatement(
                sid="WriteJobLogStreams",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[job_log_arn(group, ":log-stream:*") for group in groups],
            ),
            "SageMaker names one log stream per job and host inside its fixed training and processing log groups.",
        )
        add_reviewed_statement(
            role,
            iam.PolicyStatement(
                sid="PutJobMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*"]}},
            ),
            "cloudwatch:PutMetricData has no resource type: the statement is scoped by namespace instead.",
        )


@dataclass(frozen=True)
class JobRequests:
    """What every request of one Create*Job action of the definition carries, as IAM conditions on the pipeline
    role: the instance types the job may run on, its subnets and security group (none: no VPC) and the project key.

    The condition keys, each one CreateTrainingJob and CreateProcessingJob support in the Service Authorization
    Reference (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html):
    sagemaker:NetworkIsolation (Bool), sagemaker:InstanceTypes, sagemaker:VpcSubnets and
    sagemaker:VpcSecurityGroupIds (ArrayOfString: "the list of all ... associated with the resource in the
    request"), sagemaker:VolumeKmsKey and sagemaker:OutputKmsKey (ARN). A list key takes ForAllValues: (every value
    of the request among the allowed), which a request without the key also passes (IAM's "ForAllValues" on a
    missing key: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html),
    so each has a Null "false" beside it; outside a VPC, Null "true" instead: no job in any VPC. A single-valued
    operator on a missing key fails, so Bool and ArnEquals require their key
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html). The
    forms follow SageMaker's "Control creation of SageMaker AI resources with condition keys" examples
    (https://docs.aws.amazon.com/sagemaker/latest/dg/security_iam_id-based-policy-examples.html)."""

    instance_types: tuple[str, ...]
    subnet_ids: tuple[str, ...]
    security_group_id: str | None
    key_arn: str

    def conditions(self) -> dict[str, dict[str, Any]]:
        one_of = {"sagemaker:InstanceTypes": list(self.instance_types)}
        null = {"sagemaker:InstanceTypes": "false"}
        if self.security_group_id is None:
            null.update({"sagemaker:VpcSubnets": "true", "sagemaker:VpcSecurityGroupIds": "true"})
        else:
            one_of.update(
                {
                    "sagemaker:VpcSubnets": list(self.subnet_ids),
                    "sagemaker:VpcSecurityGroupIds": [self.security_group_id],
                }
            )
            null.update({"sagemaker:VpcSubnets": "false", "sagemaker:VpcSecurityGroupIds": "false"})
        keys = {"sagemaker:OutputKmsKey": self.key_arn}
        # The definition names the volume key unless a possible instance type has local NVMe, where AWS rejects one:
        # then the request must name none.
        if accepts_volume_kms_key(self.instance_types):
            keys["sagemaker:VolumeKmsKey"] = self.key_arn
        else:
            null["sagemaker:VolumeKmsKey"] = "true"
        return {
            "Bool": {"sagemaker:NetworkIsolation": "true"},
            "ForAllValues:StringEquals": one_of,
            "Null": null,
            "ArnEquals": keys,
        }


class PipelineRole(Construct):
    """The role the SageMaker Pipeline runs as: start the jobs (as JobRole) and register models."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name_prefix: str,
        layout: ArtifactLayout,
        approval_statuses: Sequence[str],
        key: ProjectKey,
        job_role: iam.IRole,
        artifacts: SecureBucket,
        model_package_group_name: str,
        training_jobs: JobRequests,
        processing_jobs: JobRequests | None,
    ) -> None:
        """`processing_jobs`: None when the definition has no processing job (processing.tokenize_in = "fine_tune"):
        the role then can neither create nor stop one."""
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.role = iam.Role(
            self, "Role", assumed_by=SAGEMAKER, description=f"{name_prefix}: SageMaker Pipeline executions"
        )
        role = self.role
        sagemaker_arn = lambda kind, name: stack.format_arn(service="sagemaker", resource=kind, resource_name=name)  # noqa: E731
        job_names = "Pipeline executions generate processing and training job names at run time."
        # IAM backs the definition: a job is created only as the definition creates it (network-isolated, on an
        # allowed instance type, in the project's subnets and group, encrypted with the project key), whatever the
        # execution's parameters.
        creates = [("CreateTrainingJobsAsDefined", "sagemaker:CreateTrainingJob", "training-job", training_jobs)]
        if processing_jobs is not None:
            creates.append(
                ("CreateProcessingJobsAsDefined", "sagemaker:CreateProcessingJob", "processing-job", processing_jobs)
            )
        processing = processing_jobs is not None
        for sid, action, kind, requests in creates:
            add_reviewed_statement(
                role,
                iam.PolicyStatement(
                    sid=sid,
                    actions=[action],
                    resources=[sagemaker_arn(kind, "*")],
                    conditions=requests.conditions(),
                ),
                job_names,
            )
        add_reviewed_statement(
            role,
            iam.PolicyStatement(
                sid="RunPipelineJobs",
                actions=[
                    *(["sagemaker:DescribeProcessingJob", "sagemaker:StopProcessingJob"] if processing else []),
                    "sagemaker:DescribeTrainingJob",
                    "sagemaker:StopTrainingJob",
                    "sagemaker:AddTags",
                    "sagemaker:ListTags",
                ],
                resources=[
                    *([sagemaker_arn("processing-job", "*")] if processing else []),
                    sagemaker_arn("training-job", "*"),
                ],
            ),
            job_names,
        )
        packages = [
            sagemaker_arn("model-package-group", model_package_group_name),
            sagemaker_arn("model-package", f"{model_package_group_name}/*"),
        ]
        numbered = "Model package versions are numbered by SageMaker inside the project's own group."
        # Registration only with a status the settings allow (in production never Approved): CreateModelPackage
        # supports the condition key sagemaker:ModelApprovalStatus ("Filters access by the model approval status
        # with the model-package in the request", https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html).
        # No UpdateModelPackage: no step changes a package, approving is a person's action.
        add_reviewed_statement(
            role,
            iam.PolicyStatement(
                sid="RegisterModels",
                actions=["sagemaker:CreateModelPackage"],
                resources=packages,
                conditions={"StringEquals": {"sagemaker:ModelApprovalStatus": list(approval_statuses)}},
            ),
            numbered,
        )
        add_reviewed_statement(
            role,
            iam.PolicyStatement(
                sid="ReadModelPackages",
                actions=[
                    "sagemaker:DescribeModelPackage",
                    "sagemaker:DescribeModelPackageGroup",
                    "sagemaker:AddTags",
                    "sagemaker:ListTags",
                ],
                resources=packages,
            ),
            numbered,
        )
        job_role.grant_pass_role(role)
        # No property files are read: the conditions test Lambda outputs and FinalMetricDataList.
        artifacts.grant_read_objects(
            role,
            [f"{layout.models}/*", f"{layout.evaluation}/*"],
            reason="RegisterModel names the model archive SageMaker wrote under the execution's training job name "
            f"and the model-quality report RecordModel wrote under {layout.evaluation}/<execution id>/ (for its "
            "ModelMetrics); the pipeline role only reads them.",
        )
        key.grant_sse_kms(role)
        key.grant_job_volume_encryption(role)
