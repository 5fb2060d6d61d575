"""The optional SageMaker AI managed MLflow tracking server (settings tracking.managed_server).

`make report` records AWS executions there (its ARN is the tracking URI, through the sagemaker-mlflow
plugin); the jobs themselves never call it (they run network-isolated). It bills per hour while it exists,
running or idle: the synth summary's idle cost counts it (tools/idle_cost.py).
AWS::SageMaker::MlflowTrackingServer: https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-sagemaker-mlflowtrackingserver.html
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from config import Settings
from stacks.data import ProjectKey, SecureBucket


class MlflowTrackingServer(Construct):
    """The tracking server, its artifact store (the artifacts bucket's mlflow/ prefix) and its own role."""

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: Settings, artifacts: SecureBucket, key: ProjectKey
    ) -> None:
        super().__init__(scope, construct_id)
        prefix = settings.layout.mlflow
        # The server's execution role reads and writes the artifact store: "The role should have
        # AmazonS3FullAccess permissions" (CreateMlflowTrackingServer RoleArn,
        # https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateMlflowTrackingServer.html);
        # scoped here to the one prefix it uses, plus the project key the bucket encrypts with.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"{settings.name_prefix}: the MLflow tracking server's access to s3://.../{prefix}/",
        )
        artifacts.grant_write_objects(self.role, [prefix])
        artifacts.grant_list(self.role)
        key.grant_sse_kms(self.role)
        tracking = settings.tracking
        self.server = sagemaker.CfnMlflowTrackingServer(
            self,
            "Server",
            tracking_server_name=settings.mlflow_server_name,
            artifact_store_uri=f"s3://{artifacts.bucket_name}/{prefix}",
            role_arn=self.role.role_arn,
            tracking_server_size=tracking.server_size,
            mlflow_version=tracking.mlflow_version,
            # The pipeline registers its models itself (RegisterModel, with approval): no second registration.
            automatic_model_registration=False,
        )
        self.server.node.add_dependency(self.role)
