"""PipelineStack: the IAM roles, the Model Package Group and the SageMaker Pipeline."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from config import Settings
from stacks.data import DataStack
from stacks.nag import acknowledge_reviewed_findings
from stacks.network import NetworkStack
from stacks.roles import JobRole, PipelineRole


class PipelineStack(Stack):
    """Everything that runs: roles, the model registry group and the pipeline."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        data: DataStack,
        network: NetworkStack,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # Buckets referenced by their deterministic names: policies and the pipeline definition then
        # need no cross-stack exports, and the finding ids of cdk-nag stay stable.
        self.add_stack_dependency(data)
        datasets_bucket = s3.Bucket.from_bucket_name(self, "DatasetsBucket", data.bucket_names["datasets"])
        artifacts_bucket = s3.Bucket.from_bucket_name(self, "ArtifactsBucket", data.bucket_names["artifacts"])
        self.model_package_group_name = f"{settings.name_prefix}-qa-models"
        model_package_group = sagemaker.CfnModelPackageGroup(
            self,
            "ModelPackageGroup",
            model_package_group_name=self.model_package_group_name,
            model_package_group_description=f"{settings.model.base_model} fine-tuned for extractive QA (SQuAD)",
        )
        self.job_role = JobRole(
            self,
            "JobRole",
            settings=settings,
            key=data.key,
            datasets_bucket=datasets_bucket,
            artifacts_bucket=artifacts_bucket,
            subnets=network.subnets,
            security_group=network.security_group,
        ).role
        self.pipeline_role = PipelineRole(
            self,
            "PipelineRole",
            settings=settings,
            key=data.key,
            job_role=self.job_role,
            artifacts_bucket=artifacts_bucket,
            model_package_group_name=self.model_package_group_name,
        ).role
        acknowledge_reviewed_findings(self, settings, self.model_package_group_name)
        CfnOutput(self, "ModelPackageGroupName", value=model_package_group.ref)
