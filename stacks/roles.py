"""Least-privilege IAM roles: one the jobs run as, one the pipeline runs as."""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from config import Settings
from config.settings import DLC_REGISTRY_ACCOUNT, DLC_REPOSITORIES

SAGEMAKER = iam.ServicePrincipal("sagemaker.amazonaws.com")
JOB_LOG_GROUPS = ("/aws/sagemaker/TrainingJobs", "/aws/sagemaker/ProcessingJobs")


def _kms_grant_for_job_volumes(key: kms.IKey) -> iam.PolicyStatement:
    """SageMaker creates grants on the key to encrypt job volumes; only for AWS resources."""
    return iam.PolicyStatement(
        actions=["kms:CreateGrant", "kms:DescribeKey"],
        resources=[key.key_arn],
        conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
    )


def read_objects(sid: str, bucket: s3.IBucket, key_patterns: list[str]) -> iam.PolicyStatement:
    """s3:GetObject on the given key patterns of one bucket (explicit action, no wildcard)."""
    return iam.PolicyStatement(
        sid=sid, actions=["s3:GetObject"], resources=[bucket.arn_for_objects(pattern) for pattern in key_patterns]
    )


def use_key_for_s3(key: kms.IKey) -> iam.PolicyStatement:
    """What SSE-KMS reads and writes need from the project key."""
    return iam.PolicyStatement(
        sid="UseProjectKey", actions=["kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"], resources=[key.key_arn]
    )


class JobRole(Construct):
    """The role processing and training jobs run as: read data, write artifacts, pull images, log."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        key: kms.IKey,
        datasets_bucket: s3.IBucket,
        artifacts_bucket: s3.IBucket,
        subnets: list[ec2.ISubnet],
        security_group: ec2.ISecurityGroup | None,
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
        role.add_to_policy(read_objects("ReadDatasets", datasets_bucket, ["*"]))
        role.add_to_policy(read_objects("ReadBaseModels", artifacts_bucket, [f"{layout.base_models}/*"]))
        role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteJobArtifacts",
                actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[artifacts_bucket.arn_for_objects(f"{prefix}/*") for prefix in layout.writable_by_jobs()],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ListDataBuckets",
                actions=["s3:ListBucket"],
                resources=[datasets_bucket.bucket_arn, artifacts_bucket.bucket_arn],
            )
        )
        role.add_to_policy(use_key_for_s3(key))
        role.add_to_policy(_kms_grant_for_job_volumes(key))
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
        if security_group is not None:
            self._allow_vpc_networking(stack, subnets, security_group)

    def _allow_vpc_networking(
        self, stack: Stack, subnets: list[ec2.ISubnet], security_group: ec2.ISecurityGroup
    ) -> None:
        """What SageMaker needs to attach jobs to the VPC: ENIs in our subnets with our security group."""
        ec2_arn = lambda kind, name: stack.format_arn(service="ec2", resource=kind, resource_name=name)  # noqa: E731
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeNetwork",
                actions=[
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeVpcs",
                    "ec2:DescribeDhcpOptions",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeSecurityGroups",
                ],
                resources=["*"],  # Describe* actions have no resource-level permissions
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ManageJobNetworkInterfaces",
                actions=[
                    "ec2:CreateNetworkInterface",
                    "ec2:CreateNetworkInterfacePermission",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DeleteNetworkInterfacePermission",
                ],
                resources=[
                    ec2_arn("network-interface", "*"),  # ENI ids are created by SageMaker at job start
                    ec2_arn("security-group", security_group.security_group_id),
                    *(ec2_arn("subnet", subnet.subnet_id) for subnet in subnets),
                ],
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
        key: kms.IKey,
        job_role: iam.IRole,
        artifacts_bucket: s3.IBucket,
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
        role.add_to_policy(
            iam.PolicyStatement(
                sid="RegisterModels",
                actions=[
                    "sagemaker:CreateModelPackage",
                    "sagemaker:DescribeModelPackage",
                    "sagemaker:UpdateModelPackage",
                    "sagemaker:DescribeModelPackageGroup",
                    "sagemaker:AddTags",
                    "sagemaker:ListTags",
                ],
                resources=[
                    sagemaker_arn("model-package-group", model_package_group_name),
                    sagemaker_arn("model-package", f"{model_package_group_name}/*"),
                ],
            )
        )
        job_role.grant_pass_role(role)
        layout = settings.layout
        # The pipeline reads the property files its conditions test (evaluation.json, claim.json, stats.json).
        role.add_to_policy(
            read_objects(
                "ReadModelsAndPropertyFiles",
                artifacts_bucket,
                [
                    f"{layout.models}/*",
                    f"{layout.evaluation}/*",
                    f"{layout.claims}/*",
                    f"{layout.processed}/*/stats/*",
                ],
            )
        )
        role.add_to_policy(use_key_for_s3(key))
        role.add_to_policy(_kms_grant_for_job_volumes(key))
