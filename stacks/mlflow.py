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

from stacks.data import ProjectKey, SecureBucket


class MlflowTrackingServer(Construct):
    """The tracking server `server_name`, its artifact store (the artifacts bucket's `prefix`) and its own role;
    `server_size` and `mlflow_version` (None: SageMaker's default) as CreateMlflowTrackingServer takes them."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name_prefix: str,
        server_name: str,
        server_size: str,
        mlflow_version: str | None,
        prefix: str,
        artifacts: SecureBucket,
        key: ProjectKey,
    ) -> None:
        super().__init__(scope, construct_id)
        # The server's execution role reads and writes the artifact store: "The role should have
        # AmazonS3FullAccess permissions" (CreateMlflowTrackingServer RoleArn,
        # https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateMlflowTrackingServer.html);
        # scoped here to the one prefix it uses, plus the project key the bucket encrypts with.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"{name_prefix}: the MLflow tracking server's access to s3://.../{prefix}/",
        )
        artifacts.grant_write_objects(
            self.role,
            [prefix],
            reason="The managed MLflow tracking server names its artifact keys by experiment and run ids, under the "
            f"'{prefix}/' prefix only.",
        )
        artifacts.grant_list(self.role)
        key.grant_sse_kms(self.role)
        self.server = sagemaker.CfnMlflowTrackingServer(
            self,
            "Server",
            tracking_server_name=server_name,
            artifact_store_uri=f"s3://{artifacts.bucket_name}/{prefix}",
            role_arn=self.role.role_arn,
            tracking_server_size=server_size,
            mlflow_version=mlflow_version,
            # The pipeline registers its models itself (RegisterModel, with approval): no second registration.
            automatic_model_registration=False,
        )
        self.server.node.add_dependency(self.role)
