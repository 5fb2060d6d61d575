"""Least-privilege IAM roles: one the jobs run as, one the pipeline runs as.

Composition: each role is granted access to the key, buckets and network by the constructs that own them;
only the grants on AWS-owned resources (images, log groups, metrics, SageMaker jobs) are written here.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from config import Settings
from config.settings import DLC_REGISTRY_ACCOUNT, DLC_REPOSITORIES
from stacks.data import ProjectKey, SecureBucket
from stacks.network import EfaSecurityGroup

SAGEMAKER = iam.ServicePrincipal("sagemaker.amazonaws.com")
JOB_LOG_GROUPS = ("/aws/sagemaker/TrainingJobs", "/aws/sagemaker/ProcessingJobs")


class JobRole(Construct):
    """The role processing and training jobs (user code, network-isolated) run as: read the pinned inputs and
    base models, write their own outputs (processed features, checkpoints, models, TensorBoard), pull images,
    log. No dataset, claim or evaluation-report access: the Lambda functions own those."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        key: ProjectKey,
        artifacts: SecureBucket,
        job_security_group: EfaSecurityGroup | None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        layout = settings.layout
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=SAGEMAKER,
            description=f"{settings.name_prefix}: SageMaker processing and training jobs",
        )
        role = self.role
        artifacts.grant_read_objects(role, [f"{layout.base_models}/*", f"{layout.inputs}/*"])
        artifacts.grant_write_objects(role, layout.writable_by_jobs())
        # "If a checkpoint is deleted in the SageMaker AI container, it will also be deleted in the S3 folder"
        # (https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html), done with this role: train.py
        # prunes old checkpoints, so the job may delete under checkpoints/ and nowhere else. IAM cannot narrow
        # it to the job's own execution; the jobs are network-isolated, so only SageMaker's sync of the job's
        # own checkpoint_s3_uri uses it, and the bucket's versioning keeps what a delete hides.
        artifacts.grant_delete_objects(role, [layout.checkpoints])
        artifacts.grant_list(role)
        key.grant_sse_kms(role)
        key.grant_job_output_encryption(role)
        key.grant_job_volume_encryption(role)
        if job_security_group is not None:
            job_security_group.grant_job_network_interfaces(role)
        role.add_to_policy(
            iam.PolicyStatement(
                sid="PullDeepLearningContainers",
                actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                resources=[
                    stack.format_arn(
                        service="ecr",
                        account=DLC_REGISTRY_ACCOUNT,
                        resource="repository",
                        resource_name=DLC_REPOSITORIES,
                    )
                ],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="EcrLogin",
                actions=["ecr:GetAuthorizationToken"],
                resources=["*"],  # not resource-scopable
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteJobLogs",
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[
                    stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name=f"{group}:*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                    for group in JOB_LOG_GROUPS
                ],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="PutJobMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],  # PutMetricData has no resource type; scoped by namespace instead
                conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*"]}},
            )
        )


class PipelineRole(Construct):
    """The role the SageMaker Pipeline runs as: start the jobs (as JobRole) and register models."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        key: ProjectKey,
        job_role: iam.IRole,
        artifacts: SecureBucket,
        model_package_group_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.role = iam.Role(
            self, "Role", assumed_by=SAGEMAKER, description=f"{settings.name_prefix}: SageMaker Pipeline executions"
        )
        role = self.role
        sagemaker_arn = lambda kind, name: stack.format_arn(service="sagemaker", resource=kind, resource_name=name)  # noqa: E731
        role.add_to_policy(
            iam.PolicyStatement(
                sid="RunPipelineJobs",
                actions=[
                    "sagemaker:CreateProcessingJob",
                    "sagemaker:DescribeProcessingJob",
                    "sagemaker:StopProcessingJob",
                    "sagemaker:CreateTrainingJob",
                    "sagemaker:DescribeTrainingJob",
                    "sagemaker:StopTrainingJob",
                    "sagemaker:AddTags",
                    "sagemaker:ListTags",
                ],
                resources=[sagemaker_arn("processing-job", "*"), sagemaker_arn("training-job", "*")],
            )
        )
        packages = [
            sagemaker_arn("model-package-group", model_package_group_name),
            sagemaker_arn("model-package", f"{model_package_group_name}/*"),
        ]
        # Registration only with a status the settings allow (in production never Approved): CreateModelPackage
        # supports the condition key sagemaker:ModelApprovalStatus ("Filters access by the model approval status
        # with the model-package in the request", https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html).
        # No UpdateModelPackage: no step changes a package, approving is a person's action.
        role.add_to_policy(
            iam.PolicyStatement(
                sid="RegisterModels",
                actions=["sagemaker:CreateModelPackage"],
                resources=packages,
                conditions={
                    "StringEquals": {"sagemaker:ModelApprovalStatus": list(settings.registry.approval_statuses)}
                },
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadModelPackages",
                actions=[
                    "sagemaker:DescribeModelPackage",
                    "sagemaker:DescribeModelPackageGroup",
                    "sagemaker:AddTags",
                    "sagemaker:ListTags",
                ],
                resources=packages,
            )
        )
        job_role.grant_pass_role(role)
        layout = settings.layout
        # RegisterModel names the model archive and its model-quality report (no property files are read: the
        # conditions test Lambda outputs and FinalMetricDataList).
        artifacts.grant_read_objects(role, [f"{layout.models}/*", f"{layout.evaluation}/*"])
        key.grant_sse_kms(role)
        key.grant_job_volume_encryption(role)
