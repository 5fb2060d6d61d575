"""What every step needs: settings, deploy-time placeholders, parameters, the offline session."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from qa.outputs import CODE_DIR, PROCESSING_CODE_INPUT, PROCESSING_INPUT_DIR
from sagemaker.lambda_helper import Lambda
from sagemaker.network import NetworkConfig
from sagemaker.processing import ProcessingInput, Processor
from sagemaker.workflow.execution_variables import ExecutionVariables
from sagemaker.workflow.functions import Join
from sagemaker.workflow.pipeline_context import PipelineSession
from sagemaker.workflow.retry import (
    SageMakerJobExceptionTypeEnum,
    SageMakerJobStepRetryPolicy,
    StepExceptionTypeEnum,
    StepRetryPolicy,
)

from config import Settings
from config.instance_types import accepts_volume_kms_key
from pipeline_steps.parameters import PipelineParameters
from pipeline_steps.placeholders import REGION, URL_SUFFIX, DeployTimeValues

CODE_INPUT_DIR = f"{PROCESSING_INPUT_DIR}/{PROCESSING_CODE_INPUT}"
# Both jobs' entry commands start by checking the code bundle, before anything from it runs: `$0` is the SHA-256 the
# definition carries (the bundle the stacks built), `$1` the bundle file as SageMaker downloaded it. The bucket it
# comes from is writable by more principals than the definition is (any CDK deployer's file-publishing role), so a
# replaced object stops the job here. Each string of a ContainerEntrypoint holds at most 256 characters (checked by
# aws_rules from botocore's shapes: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_AppSpecification.html,
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_AlgorithmSpecification.html): digest and path are
# arguments of their own.
VERIFY_BUNDLE = (
    'set -euo pipefail; echo "$0  $1" | sha256sum --check --status || '
    '{ echo "refusing to run $1: its SHA-256 is not $0, the deployed code bundle\'s" >&2; exit 1; }'
)
# Processing containers have no SageMaker training toolkit: unpack the verified bundle the training job uses and
# run one of its entry points with the step's arguments (ContainerArguments, after the two above).
UNPACK_AND_RUN = f'{VERIFY_BUNDLE}; mkdir -p {CODE_DIR}; cd {CODE_DIR}; tar -xzf "$1"; shift; exec python3 "$@"'
# The training container: then start what the image's own entry point would (ContainerArguments).
VERIFY_AND_START = f'{VERIFY_BUNDLE}; shift; exec "$@"'


def verified_entrypoint(script: str, values: DeployTimeValues, download_dir: str) -> tuple[str, ...]:
    """`bash -c <script>` with the bundle's expected SHA-256 and its path once SageMaker has downloaded it into
    `download_dir` (an S3Prefix input names each file by the last part of its key)."""
    return ("/bin/bash", "-c", script, values.code_sha256, bundle_path(values, download_dir))


def bundle_path(values: DeployTimeValues, download_dir: str) -> str:
    """Where the code bundle lands in a container that downloads its object into `download_dir`."""
    return f"{download_dir}/{posixpath.basename(values.code_key)}"


def job_retry_policies(attempts: int) -> list:
    """Retries for the transient faults SageMaker Pipelines names for job steps: capacity, job-internal errors and
    resource limits (SageMaker.*), service faults and throttling (Step.*), with exponential backoff
    (https://docs.aws.amazon.com/sagemaker/latest/dg/pipelines-retry-policy.html). Lambda and condition steps
    take no retry policy there (only job, model and transform steps do; the SDK's LambdaStep has no
    retry_policies, aws/sagemaker-python-sdk#3922): the functions retry their own S3 conflicts instead."""
    if attempts == 0:
        return []
    return [
        SageMakerJobStepRetryPolicy(
            exception_types=[
                SageMakerJobExceptionTypeEnum.CAPACITY_ERROR,
                SageMakerJobExceptionTypeEnum.INTERNAL_ERROR,
                SageMakerJobExceptionTypeEnum.RESOURCE_LIMIT,
            ],
            max_attempts=attempts,
            interval_seconds=60,
            backoff_rate=2.0,
        ),
        StepRetryPolicy(
            exception_types=[StepExceptionTypeEnum.SERVICE_FAULT, StepExceptionTypeEnum.THROTTLING],
            max_attempts=attempts,
            interval_seconds=30,
            backoff_rate=2.0,
        ),
    ]


def service_retry_policies(attempts: int) -> list:
    """Retries of a registration (a service call, no job): service faults and throttling, with backoff
    (https://docs.aws.amazon.com/sagemaker/latest/dg/pipelines-retry-policy.html)."""
    if attempts == 0:
        return []
    return [
        StepRetryPolicy(
            exception_types=[StepExceptionTypeEnum.SERVICE_FAULT, StepExceptionTypeEnum.THROTTLING],
            max_attempts=attempts,
            interval_seconds=30,
            backoff_rate=2.0,
        )
    ]


@dataclass(frozen=True)
class BuildContext:
    settings: Settings
    values: DeployTimeValues
    params: PipelineParameters
    session: PipelineSession
    artifacts_bucket: str

    @property
    def training_image(self) -> str:
        return self.settings.training.image_uri or self._dlc(self.settings.training_image_repository)

    @property
    def processing_image(self) -> str:
        return self.settings.processing.image_uri or self._dlc(self.settings.processing_image_repository)

    @property
    def inference_image(self) -> str:
        return self.settings.registry.inference_image_uri or self._dlc(self.settings.inference_image_repository)

    def _dlc(self, repository: str) -> str:
        return f"{self.values.dlc_registry_account}.dkr.ecr.{REGION}.{URL_SUFFIX}/{repository}"

    def execution_uri(self, prefix: str, *parts: str) -> Join:
        """s3://<artifacts>/<prefix>/<pipeline execution id>[/parts]: one folder per execution."""
        return Join(
            on="/",
            values=[f"s3://{self.artifacts_bucket}/{prefix}", ExecutionVariables.PIPELINE_EXECUTION_ID, *parts],
        )

    def function(self, arn: str) -> Lambda:
        """A Lambda function the stacks define (the SDK neither creates nor updates it)."""
        return Lambda(function_arn=arn, session=self.session)

    def volume_kms_key(self, *instance_types: str) -> str | None:
        """The project key for a job's storage volume, or None when any of its possible instance types has
        local NVMe storage. API_ResourceConfig and API_ProcessingClusterConfig: "You can't request a
        VolumeKmsKeyId when using an instance type with local storage"; that storage is encrypted by a
        hardware module on the instance, and an EBS volume without a key uses the account's default EBS key.
        https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceConfig.html"""
        return self.values.kms_key_arn if accepts_volume_kms_key(instance_types) else None

    @property
    def training_subnet_ids(self) -> list[str]:
        """The one subnet that every training node shares (none outside a VPC)."""
        return self.settings.training_subnets(self.values.subnet_ids)

    def network_config(self) -> NetworkConfig:
        """Network isolation: the container makes no network calls; SageMaker moves inputs and outputs
        (API_NetworkConfig, EnableNetworkIsolation:
        https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_NetworkConfig.html)."""
        in_vpc = self.values.security_group_id is not None
        return NetworkConfig(
            enable_network_isolation=True,
            subnets=list(self.values.subnet_ids) if in_vpc else None,
            security_group_ids=[self.values.security_group_id] if in_vpc else None,  # type: ignore[list-item]
            encrypt_inter_container_traffic=self.settings.training.encrypt_inter_container_traffic,
        )

    def code_input(self) -> ProcessingInput:
        return ProcessingInput(
            source=self.values.code_uri, destination=CODE_INPUT_DIR, input_name=PROCESSING_CODE_INPUT
        )

    def script_processor(self, instance_type: str, base_job_name: str) -> Processor:
        """A CPU processing job that runs an entry point of training_code/ from the source bundle."""
        processing = self.settings.processing
        return Processor(
            role=self.values.job_role_arn,
            image_uri=self.processing_image,
            instance_count=1,
            instance_type=instance_type,
            entrypoint=list(verified_entrypoint(UNPACK_AND_RUN, self.values, CODE_INPUT_DIR)),
            volume_size_in_gb=processing.volume_size_gb,
            volume_kms_key=self.volume_kms_key(instance_type),
            output_kms_key=self.values.kms_key_arn,
            max_runtime_in_seconds=processing.max_runtime_seconds,
            base_job_name=base_job_name,
            sagemaker_session=self.session,
            env={"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "true"},
            network_config=self.network_config(),
        )
