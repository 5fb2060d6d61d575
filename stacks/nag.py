"""cdk-nag (AwsSolutions) acknowledgments: one exact finding id at a time, each with its reason.

The wildcards below are the narrowest form the AWS APIs allow; everything else must pass cdk-nag.
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

from config import Settings
from config.settings import DLC_REGISTRY_ACCOUNT, DLC_REPOSITORIES

PARTITION, REGION, ACCOUNT = "<AWS::Partition>", "<AWS::Region>", "<AWS::AccountId>"


def _iam5(resource: str) -> str:
    return f"AwsSolutions::AwsSolutions-IAM5[Resource::{resource}]"


def _s3_objects(settings: Settings, purpose: str, pattern: str) -> str:
    return _iam5(f"arn:{PARTITION}:s3:::{settings.bucket_name(purpose, ACCOUNT, REGION)}/{pattern}")


def _arn(service: str, resource: str, account: str = ACCOUNT) -> str:
    return _iam5(f"arn:{PARTITION}:{service}:{REGION}:{account}:{resource}")


def reviewed_findings(settings: Settings, model_package_group_name: str) -> dict[str, str]:
    """Finding id -> why the wildcard is the least privilege possible."""
    layout = settings.layout
    findings = {
        _s3_objects(settings, "datasets", "*"): "Jobs read any dataset version uploaded to the datasets "
        "bucket; dataset keys are chosen by users at upload time.",
        _s3_objects(settings, "artifacts", f"{layout.base_models}/*"): "Base model weights are staged under "
        "this prefix by `make stage-model`; file names depend on the model.",
        _arn("ecr", f"repository/{DLC_REPOSITORIES}", DLC_REGISTRY_ACCOUNT): "Jobs pull the AWS Hugging Face "
        "deep-learning containers (training and inference repositories) from AWS's registry account.",
        "AwsSolutions::AwsSolutions-IAM5[Resource::*]": "ecr:GetAuthorizationToken, ec2:Describe* and "
        "cloudwatch:PutMetricData support no resource-level permissions (the last is scoped by namespace).",
        _arn("logs", "log-group:/aws/sagemaker/TrainingJobs:*"): "SageMaker names one log stream per job "
        "and host inside its fixed training log group.",
        _arn("logs", "log-group:/aws/sagemaker/ProcessingJobs:*"): "SageMaker names one log stream per job "
        "and host inside its fixed processing log group.",
        _arn("sagemaker", "processing-job/*"): "Pipeline executions generate processing job names at run time.",
        _arn("sagemaker", "training-job/*"): "Pipeline executions generate training job names at run time.",
        _arn("sagemaker", f"model-package/{model_package_group_name}/*"): "Model package versions are "
        "numbered by SageMaker inside the project's own group.",
    }
    findings[_s3_objects(settings, "artifacts", f"{layout.processed}/*/stats/*")] = (
        "The pipeline reads the dataset statistics (its cost guard's property file) that each execution's "
        "preprocessing writes under its own execution id."
    )
    findings["AwsSolutions::AwsSolutions-SQS3"] = (
        "The only queue is itself the dead-letter queue of the dataset trigger's EventBridge target; a "
        "dead-letter queue of a dead-letter queue would add nothing."
    )
    for prefix in layout.writable_by_jobs():
        findings[_s3_objects(settings, "artifacts", f"{prefix}/*")] = (
            f"Jobs write run-specific keys (execution and job ids) under the '{prefix}/' prefix only."
        )
    if settings.tracking.managed_server:
        findings[_s3_objects(settings, "artifacts", f"{layout.mlflow}/*")] = (
            "The managed MLflow tracking server names its artifact keys by experiment and run ids, under the "
            f"'{layout.mlflow}/' prefix only."
        )
    if settings.network.mode != "none":
        findings[_arn("ec2", "network-interface/*")] = (
            "SageMaker creates the job ENIs at run time; subnets and security group are named exactly."
        )
    return findings


def acknowledge_reviewed_findings(scope: IConstruct, settings: Settings, model_package_group_name: str) -> None:
    """Record every reviewed finding on `scope` (a stack) with its reason."""
    validations = cdk.Validations.of(scope)
    for finding_id, reason in reviewed_findings(settings, model_package_group_name).items():
        validations.acknowledge(cdk.Acknowledgment(id=finding_id, reason=reason))
