"""cdk-nag (AwsSolutions) acknowledgments: one exact finding id at a time, each with its reason.

The wildcards below are the narrowest form the AWS APIs allow; everything else must pass cdk-nag.
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

from config import Settings
from config.layout import DatasetLayout
from config.settings import DLC_REGISTRY_ACCOUNT, DLC_REPOSITORIES

DATASET_LAYOUT = DatasetLayout()

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
        _s3_objects(settings, "datasets", f"{DATASET_LAYOUT.root}/*"): "Only the ClaimManifest function reads "
        "dataset objects (GetObject, GetObjectVersion): the manifest and the files it lists, whose names users "
        "choose at upload time; it copies them at their versions into the artifacts bucket's inputs/ prefix.",
        _s3_objects(settings, "artifacts", f"{layout.base_models}/*"): "Base model weights are staged under "
        "this prefix by `make stage-model`; file names depend on the model.",
        _s3_objects(settings, "artifacts", f"{layout.base_models}/*/config.json"): "EstimateTrainingCost reads "
        "only the config.json of a staged base model (its size decides the estimate), whichever model it is.",
        _s3_objects(settings, "artifacts", f"{layout.claims}/*"): "ClaimManifest creates a claim object per "
        "manifest version (named by a SHA-256 of bucket, key and version); its PutObject is allowed only with "
        "an If-None-Match or If-Match header (s3:if-none-match / s3:if-match Null conditions).",
        _s3_objects(settings, "artifacts", f"{layout.inputs}/*"): "ClaimManifest writes, and the jobs only read, "
        "one folder per manifest version (named by the claim digest) holding the pinned data files.",
        _s3_objects(settings, "artifacts", f"{layout.evaluation}/*"): "RecordModel writes one model-quality "
        "report per execution (evaluation/<execution id>/evaluation.json); the pipeline role only reads them for "
        "RegisterModel's ModelMetrics.",
        _arn("sagemaker", f"pipeline/{settings.pipeline_name}/execution/*"): "ClaimManifest may only describe "
        "executions of this one pipeline (DescribePipelineExecution), to learn whether a claim's owner failed.",
        _arn("ecr", f"repository/{DLC_REPOSITORIES}", DLC_REGISTRY_ACCOUNT): "Jobs pull the AWS Hugging Face "
        "deep-learning containers (training, inference and CPU processing repositories) from AWS's registry.",
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
        # Python 3.12 is the Python of the training images, whose stdlib-only qa modules the functions share.
        "AwsSolutions::AwsSolutions-L1": "The pipeline functions run on Python 3.12, the Python of the training "
        "images whose qa modules (cost model, contract) they import, so both run the code on the same version.",
    }
    findings[_s3_objects(settings, "artifacts", f"{layout.processed}/*/stats/*")] = (
        "EstimateTrainingCost reads the dataset statistics that each execution's preprocessing writes under its "
        "own execution id."
    )
    findings["AwsSolutions::AwsSolutions-SQS3"] = (
        "The only queue is itself the dead-letter queue of the dataset trigger's EventBridge target; a "
        "dead-letter queue of a dead-letter queue would add nothing."
    )
    for prefix in layout.writable_by_jobs():
        findings[_s3_objects(settings, "artifacts", f"{prefix}/*")] = (
            f"Jobs write under the '{prefix}/' prefix, into keys SageMaker or the job names after the execution or "
            "job; IAM cannot tie a key to the execution, so isolation (no network of their own) keeps user code "
            "from writing other keys."
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
