"""PipelineStack: IAM roles, the code asset, the Model Package Group, the pipeline, its trigger and
notifications."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from config import Settings
from config.paths import TRAINING_CODE
from pipeline_steps.definition_cache import definition_json_cached
from pipeline_steps.placeholders import DeployTimeValues, variables_in
from stacks.data import DataStack, removal_policy
from stacks.functions import PipelineFunctions
from stacks.log_groups import LogGroupSettings
from stacks.mlflow import MlflowTrackingServer
from stacks.network import NetworkStack
from stacks.notifications import PipelineNotifications
from stacks.outputs import TASK_OUTPUT
from stacks.registry import registry_account
from stacks.roles import JobRequests, JobRole, PipelineRole
from stacks.source_bundle import write_source_tarball
from stacks.trigger import DatasetTrigger


class TrainingCodeAsset(Construct):
    """training_code/ as a reproducible tar.gz file asset (SageMaker's source-dir format; no Docker)."""

    def __init__(self, scope: Construct, construct_id: str, *, build_dir: Path) -> None:
        super().__init__(scope, construct_id)
        bundle = write_source_tarball(TRAINING_CODE, build_dir)
        self.asset = s3_assets.Asset(self, "SourceDir", path=str(bundle.path))
        # What the jobs' entry commands check the downloaded bundle against before running anything from it.
        self.sha256 = bundle.sha256

    def grant_download(self, grantee: iam.IGrantable) -> None:
        """Read exactly this object (and list its key), nothing else in the assets bucket."""
        bucket_arn = f"arn:{Stack.of(self).partition}:s3:::{self.asset.s3_bucket_name}"
        principal = grantee.grant_principal
        principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadTrainingCode",
                actions=["s3:GetObject"],
                resources=[f"{bucket_arn}/{self.asset.s3_object_key}"],
            )
        )
        principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ListTrainingCode",
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringEquals": {"s3:prefix": [self.asset.s3_object_key]}},
            )
        )


class PipelineStack(Stack):
    """Everything that runs: roles, the model registry group, the pipeline, trigger and notifications."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        data: DataStack,
        network: NetworkStack,
        build_dir: Path,
        definition_cache: Path | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # The buckets' grants and the pipeline definition name them by their deterministic names (no
        # cross-stack exports): the dependency says what the names alone do not.
        self.add_stack_dependency(data)
        self.model_package_group_name = settings.model_package_group_name
        model_package_group = sagemaker.CfnModelPackageGroup(
            self,
            "ModelPackageGroup",
            model_package_group_name=self.model_package_group_name,
            # A new description replaces the group (CloudFormation: update requires replacement): question
            # answering's reads as it did before tasks existed.
            model_package_group_description=f"{settings.model.base_model} fine-tuned for {settings.task_facts.PURPOSE}",
        )
        # What holds state outlives the stack in production (RETAIN): the registered models, the pipeline with
        # its execution history, the trigger's dead letters.
        retention = removal_policy(settings.removal_policy)
        model_package_group.apply_removal_policy(retention)
        # ValidateAndTokenize, the one processing job, exists in processing.tokenize_in = "cpu_job" only.
        features_job = not settings.tokenizes_in_fine_tune
        self.job_role = JobRole(
            self,
            "JobRole",
            name_prefix=settings.pipeline_prefix,
            layout=settings.layout,
            key=data.project_key,
            artifacts=data.artifacts,
            job_security_group=network.job_security_group,
            benchmark_prefix=settings.benchmark_prefix,
            features_job=features_job,
        ).role
        group = network.security_group
        security_group_id = group.security_group_id if group is not None else None
        subnet_ids = tuple(subnet.subnet_id for subnet in network.subnets)
        key_arn = data.project_key.key.key_arn
        self.pipeline_role = PipelineRole(
            self,
            "PipelineRole",
            name_prefix=settings.pipeline_prefix,
            layout=settings.layout,
            approval_statuses=settings.registry.approval_statuses,
            key=data.project_key,
            job_role=self.job_role,
            artifacts=data.artifacts,
            model_package_group_name=self.model_package_group_name,
            # As the definition's FineTune and ValidateAndTokenize steps request them (pipeline_steps/steps).
            training_jobs=JobRequests(
                instance_types=settings.training_instance_types,
                subnet_ids=tuple(settings.training_subnets(subnet_ids)),
                security_group_id=security_group_id,
                key_arn=key_arn,
            ),
            processing_jobs=JobRequests(
                instance_types=(settings.processing.preprocess_instance_type,),
                subnet_ids=subnet_ids,
                security_group_id=security_group_id,
                key_arn=key_arn,
            )
            if features_job
            else None,
        ).role
        code = TrainingCodeAsset(self, "TrainingCode", build_dir=build_dir)
        code.grant_download(self.job_role)
        self.functions = PipelineFunctions(
            self,
            "Functions",
            name_prefix=settings.pipeline_prefix,
            pipeline_name=settings.pipeline_name,
            record_role_name=settings.record_model_role_name(self.region),
            layout=settings.layout,
            dataset_layout=settings.datasets,
            log_groups=LogGroupSettings.of(settings),
            key=data.project_key,
            datasets=data.datasets,
            artifacts=data.artifacts,
            build_dir=build_dir,
            claim_validates=settings.tokenizes_in_fine_tune,
        )
        self.functions.grant_invoke(self.pipeline_role)

        body = definition_json_cached(settings, definition_cache)
        substitutions = DeployTimeValues(
            job_role_name=self.job_role.role_name,
            kms_key_arn=key_arn,
            dlc_registry_account=registry_account(self),
            code_bucket=code.asset.s3_bucket_name,
            code_key=code.asset.s3_object_key,
            code_sha256=code.sha256,
            claim_function_arn=self.functions.claim.function.function_arn,
            estimate_function_arn=self.functions.estimate.function.function_arn,
            record_function_arn=self.functions.record.function.function_arn,
            security_group_id=security_group_id,
            subnet_ids=subnet_ids,
        ).substitutions()
        missing = variables_in(body) - set(substitutions)
        if missing:
            raise ValueError(f"pipeline definition placeholders without a value: {sorted(missing)}")
        self.pipeline = sagemaker.CfnPipeline(
            self,
            "Pipeline",
            pipeline_name=settings.pipeline_name,
            pipeline_description=f"{settings.task}: claim + pin (Lambda) -> validate + tokenize (CPU) -> cost guard "
            f"(Lambda) -> distributed fine-tuning + {'/'.join(settings.task_facts.METRICS)} (GPU) -> record (Lambda) "
            f"-> {settings.task_facts.GATE_METRIC} gate -> register",
            role_arn=self.pipeline_role.role_arn,
            pipeline_definition={"PipelineDefinitionBody": Fn.sub(body, substitutions)},
        )
        self.pipeline.apply_removal_policy(retention)
        self.pipeline.node.add_dependency(model_package_group)
        self.pipeline_arn = self.format_arn(
            service="sagemaker", resource="pipeline", resource_name=settings.pipeline_name
        )
        self.trigger = DatasetTrigger(
            self,
            "DatasetTrigger",
            datasets_bucket_name=data.bucket_names["datasets"],
            datasets=settings.datasets,
            pipeline_name=settings.pipeline_name,
            pipeline_arn=self.pipeline_arn,
            key=data.project_key.key,
            dead_letter_queue_name=settings.trigger_dead_letter_queue_name,
            removal_policy=retention,
        )
        self.trigger.node.add_dependency(self.pipeline)
        self.notifications = PipelineNotifications(
            self,
            "Notifications",
            topic_name=settings.notification_topic_name,
            display_name=f"{settings.task} fine-tuning",
            pipeline_name=settings.pipeline_name,
            pipeline_arn=self.pipeline_arn,
            model_package_group_name=self.model_package_group_name,
            gate_metric=settings.task_facts.GATE_METRIC,
            key=data.project_key.key,
            email=settings.notification_email,
            env_name=settings.env_name,
            name_prefix=settings.pipeline_prefix,
            code=self.functions.code,
            log_groups=LogGroupSettings.of(settings),
        )
        self.notifications.alarm_on_dead_letters(
            self.trigger.dead_letter_queue, "Dataset trigger: a pipeline start failed after every retry"
        )
        tracking = settings.tracking
        if tracking.managed_server:
            mlflow = MlflowTrackingServer(
                self,
                "MlflowTrackingServer",
                name_prefix=settings.pipeline_prefix,
                server_name=settings.mlflow_server_name,
                server_size=tracking.server_size,
                mlflow_version=tracking.mlflow_version,
                prefix=settings.layout.mlflow,
                artifacts=data.artifacts,
                key=data.project_key,
            )
            CfnOutput(self, "MlflowTrackingServerArn", value=mlflow.server.attr_tracking_server_arn)
        CfnOutput(self, "ModelPackageGroupName", value=model_package_group.ref)
        CfnOutput(self, "PipelineName", value=settings.pipeline_name)
        CfnOutput(self, TASK_OUTPUT, value=settings.task)
        CfnOutput(self, "NotificationTopicArn", value=self.notifications.topic.topic_arn)
        CfnOutput(self, "DeadLetterQueueUrl", value=self.trigger.dead_letter_queue.queue_url)
