"""DataStack: the project KMS key and the datasets, artifacts and access-log buckets."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import cast

from aws_cdk import ArnFormat, Aws, CfnOutput, CustomResourceProviderBase, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct
from qa.outputs import SPLITS

from config import Settings
from config.settings import BUCKET_PURPOSES
from stacks.nag import add_reviewed_statement
from stacks.outputs import ARTIFACTS_BUCKET_OUTPUT, DATASETS_BUCKET_OUTPUT

# IAM: "The Sid element supports ASCII uppercase letters (A-Z), lowercase letters (a-z), and numbers (0-9)."
# https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_sid.html
_STATEMENT_ID = re.compile(r"[A-Za-z0-9]+")
# What a service needs from the key to write to an encrypted topic (sns-key-management, below).
ENCRYPTED_DELIVERY_ACTIONS = ["kms:Decrypt", "kms:GenerateDataKey*"]
# CDK's auto-delete custom resource (dev's removal_policy=destroy): its provider's construct id in the stack.
AUTO_DELETE_PROVIDER_ID = "Custom::S3AutoDeleteObjectsCustomResourceProvider"
# What replaces or removes an object's bytes: PutObject (also CopyObject's and CompleteMultipartUpload's
# destination), DeleteObject (a delete marker) and DeleteObjectVersion (the bytes themselves). ACLs are disabled
# (BucketOwnerEnforced) and no object lock is configured, so no other object action changes what a key serves.
REGISTRY_WRITE_ACTIONS = ["s3:PutObject"]
REGISTRY_DELETE_ACTIONS = ["s3:DeleteObject", "s3:DeleteObjectVersion"]


def removal_policy(setting: str) -> RemovalPolicy:
    """Settings.removal_policy as CDK's: RETAIN unless the environment explicitly allows destroying data (dev)."""
    return RemovalPolicy.DESTROY if setting == "destroy" else RemovalPolicy.RETAIN


def statement_id(*words: str) -> str:
    """A policy statement id made of `words`, checked against IAM's Sid rule."""
    sid = "".join(words)
    if not _STATEMENT_ID.fullmatch(sid):
        raise ValueError(f"policy statement id {sid!r}: IAM allows only ASCII letters and digits")
    return sid


class ProjectKey(Construct):
    """Customer-managed KMS key with yearly rotation, used by every bucket, queue, topic and job.

    `topic_names` name the encrypted topics (one per pipeline stack) whose alarm deliveries may use the key;
    `log_group_root` the folder of the log groups CloudWatch Logs may encrypt with it (Settings.log_group_root)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name_prefix: str,
        removal: RemovalPolicy,
        topic_names: tuple[str, ...],
        log_group_root: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            alias=f"alias/{name_prefix}",
            description=f"{name_prefix}: datasets, artifacts, checkpoints, logs and job volumes",
            enable_key_rotation=True,
            removal_policy=removal,
            pending_window=Duration.days(7 if removal == RemovalPolicy.DESTROY else 30),
        )
        # CloudWatch Logs (VPC flow logs, the functions' log groups) encrypts with this key, scoped to the project's
        # log groups (all named under log_group_root, stacks/log_groups.py): the key policy of
        # https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html, whose encryption context
        # is kms:EncryptionContext:aws:logs:arn with "the ARN of the log group as the value" (arn:...:log-group:<name>,
        # no ":*"), matched with ArnLike as the page's account-wide example is; another log group of the account gets
        # no use of the key. In two statements: the page's kms:Describe* sits under that condition, which no
        # DescribeKey request carries (DescribeKey's condition keys are kms:CallerAccount, kms:RequestAlias and
        # kms:ViaService: https://docs.aws.amazon.com/service-authorization/latest/reference/list_awskeymanagementservice.html),
        # so there it allows nothing: DescribeKey gets a statement of its own, without the condition.
        stack = Stack.of(self)
        logs = iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchLogsForTheProjectLogGroups",
                principals=[logs],
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                            service="logs",
                            resource="log-group",
                            resource_name=f"{log_group_root}*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    }
                },
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchLogsDescribesTheKey", principals=[logs], actions=["kms:DescribeKey"], resources=["*"]
            )
        )

        topic_arns = [stack.format_arn(service="sns", resource=name) for name in topic_names]
        # CloudWatch alarms write to the encrypted topic through SNS, which names the topic in the encryption
        # context of every KMS call: that scopes the grant
        # (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services:
        # kms:Decrypt, kms:GenerateDataKey*). The topic's other publisher, the notification function, has its KMS
        # actions in its role (stacks/notifications.py).
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AlarmsPublishToTheEncryptedTopic",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=ENCRYPTED_DELIVERY_ACTIONS,
                resources=["*"],
                conditions={"StringEquals": {"kms:EncryptionContext:aws:sns:topicArn": _one_or_list(topic_arns)}},
            )
        )
        # EventBridge writes the trigger's dead letters to the encrypted queue: the statement as the SQS developer
        # guide gives it for an AWS service event source, kms:GenerateDataKey and kms:Decrypt, no condition
        # (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html#compatibility-with-aws-services).
        # No AWS page shows the encryption context (aws:sqs:arn) or aws:SourceArn in EventBridge's dead-letter KMS
        # calls, and a key the call lacks denies it silently; the queue policy (stacks/trigger.py) still lets only
        # the trigger's rule send (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html).
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeSendsToTheEncryptedDeadLetterQueue",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=["*"],
            )
        )

    def grant_sse_kms(self, grantee: iam.IGrantable) -> None:
        """What reading and writing SSE-KMS objects of the project buckets needs from this key."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="UseProjectKey",
                actions=["kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                resources=[self.key.key_arn],
            )
        )

    def grant_job_output_encryption(self, grantee: iam.IGrantable) -> None:
        """kms:Encrypt for the execution role of jobs whose outputs name this key: "If you use a KMS key ID or an
        alias of your KMS key, the SageMaker execution role must include permissions to call kms:Encrypt"
        (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_OutputDataConfig.html)."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(sid="EncryptJobOutputs", actions=["kms:Encrypt"], resources=[self.key.key_arn])
        )

    def grant_job_volume_encryption(self, grantee: iam.IGrantable) -> None:
        """SageMaker creates grants on this key to encrypt job volumes: only grants for AWS resources.

        kms:GrantIsForAWSResource "Allows principals to call CreateGrant, ListGrants, or RevokeGrant only when an AWS
        service that is integrated with AWS KMS sends the request" (https://docs.aws.amazon.com/kms/latest/developerguide/grant-authorization.html):
        no DescribeKey request carries it, so the statement holds kms:CreateGrant alone; kms:DescribeKey is
        grant_sse_kms's, unconditioned."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="CreateGrantsForAwsResources",
                actions=["kms:CreateGrant"],
                resources=[self.key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
            )
        )


class SecureBucket(Construct):
    """An S3 bucket with the project's baseline: no public access, TLS only, access-logged.

    Its grants name the bucket by `bucket_name`, which must be deterministic (pseudo parameters at most, no
    attribute of a resource): a role in another stack then needs no cross-stack export, and the cdk-nag
    finding ids of its policy (which contain the ARNs) stay stable.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal: RemovalPolicy,
        bucket_name: str,
        key: kms.IKey | None,
        access_logs: s3.IBucket | None,
        versioned: bool,
        lifecycle_rules: list[s3.LifecycleRule],
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket_name = bucket_name
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            bucket_name=bucket_name,
            encryption=s3.BucketEncryption.KMS if key else s3.BucketEncryption.S3_MANAGED,
            encryption_key=key,
            bucket_key_enabled=bool(key),
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=versioned,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix=f"{construct_id.lower()}/" if access_logs else None,
            lifecycle_rules=lifecycle_rules,
            removal_policy=removal,
            auto_delete_objects=removal == RemovalPolicy.DESTROY,
        )

    @property
    def arn_by_name(self) -> str:
        """The bucket's ARN built from its name, usable in any stack of the account."""
        return f"arn:{Aws.PARTITION}:s3:::{self.bucket_name}"

    def object_arn(self, key_pattern: str) -> str:
        """The ARN of the objects matching `key_pattern`, built from the bucket's name."""
        return f"{self.arn_by_name}/{key_pattern}"

    # Each object grant says why its key patterns need wildcards: `reason` acknowledges the cdk-nag findings
    # (AwsSolutions-IAM5) they cause on the grantee's policy.
    def grant_read_objects(self, grantee: iam.IGrantable, key_patterns: Iterable[str], *, reason: str) -> None:
        """s3:GetObject on the given key patterns only."""
        self._grant_objects(grantee, "Read", ["s3:GetObject"], key_patterns, reason)

    def grant_write_objects(self, grantee: iam.IGrantable, prefixes: Iterable[str], *, reason: str) -> None:
        """Read, write and abort uploads of objects under the given prefixes (no deletes)."""
        self._grant_objects(
            grantee,
            "Write",
            ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
            [f"{prefix}/*" for prefix in prefixes],
            reason,
        )

    def grant_delete_objects(self, grantee: iam.IGrantable, prefixes: Iterable[str], *, reason: str) -> None:
        """s3:DeleteObject under the given prefixes (on a versioned bucket a delete adds a delete marker)."""
        self._grant_objects(grantee, "Delete", ["s3:DeleteObject"], [f"{prefix}/*" for prefix in prefixes], reason)

    def grant_list(self, grantee: iam.IGrantable, prefixes: Iterable[str] | None = None) -> None:
        """s3:ListBucket on this bucket: SageMaker lists S3Prefix inputs, and a missing key reads as 404, not 403.

        `prefixes`: only listings under them (s3:prefix, ListBucket's condition key for the Prefix of the request,
        https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html); a listing without a
        prefix is then denied. None: the whole bucket."""
        conditions = None if prefixes is None else {"StringLike": {"s3:prefix": [f"{p}/*" for p in prefixes]}}
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid=statement_id("List", self.node.id),
                actions=["s3:ListBucket"],
                resources=[self.arn_by_name],
                conditions=conditions,
            )
        )

    def _grant_objects(
        self, grantee: iam.IGrantable, verb: str, actions: list[str], key_patterns: Iterable[str], reason: str
    ) -> None:
        add_reviewed_statement(
            grantee,
            iam.PolicyStatement(
                sid=statement_id(verb, self.node.id),
                actions=actions,
                resources=[self.object_arn(pattern) for pattern in key_patterns],
            ),
            reason,
        )


def checkpoint_noncurrent_days(settings: Settings) -> int:
    """Days a checkpoint version hidden by an overwrite or a delete stays recoverable: as long as the training
    step can run (every attempt of it waiting up to its stopping condition), plus a day to look after it ended.
    Checkpoints are rewritten at every save, so each day kept costs up to a checkpoint's size per save."""
    training = settings.training
    attempt_seconds = training.max_wait_seconds if training.use_spot else training.max_run_seconds
    return math.ceil(attempt_seconds * (training.retry_attempts + 1) / 86400) + 1


def require_dataset_writes_as_the_upload_makes_them(
    datasets: SecureBucket, key_arn: str, roots: tuple[str, ...]
) -> None:
    """Bucket-policy denies that make a dataset version stay put in S3 itself, whoever writes.

    Conditional writes (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html):
    "All PutObject and CompleteMultipartUpload requests ... must include the if-none-match header", and "For
    multipart uploads you must specify the s3:ObjectCreationOperation condition key to exempt the
    CreateMultipartUpload, UploadPart, and UploadPartCopy operations, as these APIs don't accept conditional
    headers": each deny holds only where s3:ObjectCreationOperation is true. Data files (under a split folder)
    are written once (If-None-Match); anything else, i.e. a manifest, also by If-Match on the ETag it replaces
    (the page's example 3; `make upload-dataset REPLACE=1`). The page's note applies: CopyObject into this
    bucket is refused (403 without the headers, 501 with them). s3:PutObject supports s3:if-none-match,
    s3:if-match and s3:ObjectCreationOperation (Service Authorization Reference, list_amazons3.html).

    SSE-KMS: the bucket default encrypts with the project key when a request names no encryption, which is how
    the upload tool writes. A deny on a *missing* s3:x-amz-server-side-encryption header would also refuse those
    uploads (AWS: avoid such a policy with default encryption, "as they could conflict":
    https://docs.aws.amazon.com/sdk-for-go/v1/developer-guide/s3-example-enforce-server-side-encryption.html),
    so only a request that names other encryption is denied: another algorithm, SSE-C, aws:kms without a key id
    (S3 then uses the AWS managed key aws/s3: https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html),
    or another key (the condition compares the key ARN)."""
    objects = datasets.object_arn("*")
    data_files = [datasets.object_arn(f"{root}/*/*/{split}/*") for root in roots for split in SPLITS]
    creates = {"Bool": {"s3:ObjectCreationOperation": "true"}}
    encryption = "s3:x-amz-server-side-encryption"
    denies = {
        "OnlyConditionalWrites": (
            [objects],
            {**creates, "Null": {"s3:if-none-match": "true", "s3:if-match": "true"}},
        ),
        "DataFilesAreWrittenOnce": (data_files, {**creates, "Null": {"s3:if-none-match": "true"}}),
        "OnlyTheProjectKeyAlgorithm": (
            [objects],
            {"Null": {encryption: "false"}, "StringNotEquals": {encryption: "aws:kms"}},
        ),
        "NoCustomerProvidedKeys": ([objects], {"Null": {f"{encryption}-customer-algorithm": "false"}}),
        "NoAwsManagedKey": (
            [objects],
            {"StringEquals": {encryption: "aws:kms"}, "Null": {f"{encryption}-aws-kms-key-id": "true"}},
        ),
        "OnlyTheProjectKey": (
            [objects],
            {
                "Null": {f"{encryption}-aws-kms-key-id": "false"},
                "StringNotEquals": {f"{encryption}-aws-kms-key-id": key_arn},
            },
        ),
    }
    for sid, (resources, conditions) in denies.items():
        datasets.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid=statement_id("Datasets", sid),
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                resources=resources,
                conditions=conditions,
            )
        )


def protect_registry(bucket: SecureBucket, prefix: str, writer_role_arn: str, sid_suffix: str = "") -> None:
    """Bucket-policy denies that keep `prefix`/* (one pipeline's registry) as its RecordModel wrote it: PutObject for
    every principal but that pipeline's role `writer_role_arn` (named, as the role is in another stack), and deletes
    for everyone but CDK's auto-delete provider where the stack has one (dev, destroyed with its data). Each
    pipeline's statements carry `sid_suffix` (none for question answering's, which kept its Sids).

    aws:PrincipalArn is the role's ARN for a session of that role, and is in the request context of every
    IAM-principal request; an AWS service principal's request has none, and the negated operator then denies too
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn,
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html).
    An explicit deny in the bucket policy overrides any allow in an identity policy of the account
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-policies.html)."""
    resources = [bucket.object_arn(f"{prefix}/*")]
    bucket.bucket.add_to_resource_policy(
        iam.PolicyStatement(
            sid=f"OnlyRecordModelWritesTheRegistry{sid_suffix}",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=REGISTRY_WRITE_ACTIONS,
            resources=resources,
            conditions={"ArnNotEquals": {"aws:PrincipalArn": writer_role_arn}},
        )
    )
    provider = cast("CustomResourceProviderBase | None", Stack.of(bucket).node.try_find_child(AUTO_DELETE_PROVIDER_ID))
    bucket.bucket.add_to_resource_policy(
        iam.PolicyStatement(
            sid=f"NothingDeletesFromTheRegistry{sid_suffix}",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=REGISTRY_DELETE_ACTIONS,
            resources=resources,
            conditions={"ArnNotEquals": {"aws:PrincipalArn": provider.role_arn}} if provider else None,
        )
    )


def _one_or_list(values: list[str]) -> str | list[str]:
    """A condition value as one environment with one pipeline always had it (a string), else the list."""
    return values[0] if len(values) == 1 else values


def statement_suffix(infix: str) -> str:
    """A policy statement Sid's suffix for a pipeline's resource infix: "-text-classification" -> "TextClassification"
    (a Sid "supports ASCII uppercase letters (A-Z), lowercase letters (a-z), and numbers (0-9)",
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_sid.html)."""
    return "".join(word.capitalize() for word in infix.split("-"))


def _abort_uploads() -> s3.LifecycleRule:
    return s3.LifecycleRule(
        id="abort-incomplete-multipart-uploads", abort_incomplete_multipart_upload_after=Duration.days(7)
    )


class DataStack(Stack):
    """Encrypted storage for the whole pipeline; exposes the buckets, the key and the checkpoint URI."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        layout = settings.layout
        removal = removal_policy(settings.removal_policy)
        self.project_key = ProjectKey(
            self,
            "ProjectKey",
            name_prefix=settings.name_prefix,
            removal=removal,
            topic_names=tuple(pipeline.notification_topic_name for pipeline in settings.deployed_pipelines),
            log_group_root=settings.log_group_root,
        )
        self.bucket_names = {
            purpose: settings.bucket_name(purpose, Aws.ACCOUNT_ID, Aws.REGION) for purpose in BUCKET_PURPOSES
        }
        # S3 server access logs cannot be delivered to a KMS-encrypted bucket: SSE-S3 here.
        self.access_logs_bucket = SecureBucket(
            self,
            "AccessLogs",
            removal=removal,
            bucket_name=self.bucket_names["access-logs"],
            key=None,
            access_logs=None,
            # Versioned, so that a deleted or overwritten log object can be recovered for a day.
            versioned=True,
            lifecycle_rules=[
                _abort_uploads(),
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=Duration.days(settings.log_retention_days),
                    noncurrent_version_expiration=Duration.days(1),
                ),
            ],
        ).bucket
        self.datasets = SecureBucket(
            self,
            "Datasets",
            removal=removal,
            bucket_name=self.bucket_names["datasets"],
            key=self.project_key.key,
            access_logs=self.access_logs_bucket,
            versioned=True,
            # No expiry of any kind: registered model packages name the dataset version they were trained on, and
            # nothing a package references expires. Noncurrent versions arise only from replaced manifests and
            # deletes (data files are written once, below).
            lifecycle_rules=[_abort_uploads()],
        )
        require_dataset_writes_as_the_upload_makes_them(
            self.datasets,
            self.project_key.key.key_arn,
            tuple(pipeline.datasets.root for pipeline in settings.deployed_pipelines),
        )
        # EventBridge delivery straight from S3 (no notification custom resource / Lambda).
        cfn_datasets = cast(s3.CfnBucket, self.datasets.bucket.node.default_child)
        cfn_datasets.add_property_override(
            "NotificationConfiguration.EventBridgeConfiguration.EventBridgeEnabled", True
        )
        self.artifacts = SecureBucket(
            self,
            "Artifacts",
            removal=removal,
            bucket_name=self.bucket_names["artifacts"],
            key=self.project_key.key,
            access_logs=self.access_logs_bucket,
            versioned=True,
            lifecycle_rules=[
                _abort_uploads(),
                # Each pipeline's checkpoints (ArtifactLayout.of_pipeline), kept as long as its spot jobs may resume.
                *(
                    s3.LifecycleRule(
                        id=f"expire-checkpoints{pipeline.task_facts.RESOURCE_INFIX}",
                        prefix=f"{pipeline.layout.checkpoints}/",
                        expiration=Duration.days(settings.checkpoint_retention_days),
                        noncurrent_version_expiration=Duration.days(checkpoint_noncurrent_days(pipeline)),
                    )
                    for pipeline in settings.deployed_pipelines
                ),
                # Per prefix, as a lifecycle filter cannot exclude one: registry/ and evaluation/ (what model
                # packages reference: ModelDataUrl, ModelMetrics) have no rule, so neither their objects nor their
                # versions ever expire.
                *(
                    s3.LifecycleRule(
                        id=f"expire-old-{prefix}-versions",
                        prefix=f"{prefix}/",
                        noncurrent_version_expiration=Duration.days(30),
                    )
                    for prefix in dict.fromkeys(
                        prefix
                        for pipeline in settings.deployed_pipelines
                        for prefix in pipeline.layout.expiring_versions()
                    )
                ),
            ],
        )
        for pipeline in settings.deployed_pipelines:
            protect_registry(
                self.artifacts,
                pipeline.layout.registry,
                f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:role/" + pipeline.record_model_role_name(Aws.REGION),
                sid_suffix=statement_suffix(pipeline.task_facts.RESOURCE_INFIX),
            )
        self._protect_benchmarks(settings)
        # The exact prefix the own pipeline's CheckpointConfig.S3Uri starts with (one folder per execution).
        self.checkpoint_s3_uri_prefix = f"s3://{self.bucket_names['artifacts']}/{layout.checkpoints}/"
        CfnOutput(self, DATASETS_BUCKET_OUTPUT, value=self.datasets.bucket.bucket_name)
        CfnOutput(self, ARTIFACTS_BUCKET_OUTPUT, value=self.artifacts.bucket.bucket_name)
        CfnOutput(self, "CheckpointS3UriPrefix", value=self.checkpoint_s3_uri_prefix)

    def _protect_benchmarks(self, settings: Settings) -> None:
        """Only evaluation.benchmark.writers (of any of the environment's pipelines) may write the benchmarks the gates
        score: a bucket-policy deny of
        s3:PutObject (which covers copies and multipart uploads) under benchmarks/ to every other principal, the
        project's job and Lambda roles included. aws:PrincipalArn is a role's ARN, not its session's, and absent
        for service principals, which ArnNotLike then denies too
        (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn).
        A delete is not denied: it makes the pinned manifest's SHA-256 check fail, so nothing is gated on it."""
        writers = [
            writer
            for pipeline in settings.deployed_pipelines
            if pipeline.evaluation.benchmark is not None
            for writer in pipeline.evaluation.benchmark.writers
        ]
        if not writers:
            return
        self.artifacts.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyReleasePrincipalsWriteBenchmarks",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                resources=[self.artifacts.object_arn(f"{settings.layout.benchmarks}/*")],
                conditions={"ArnNotLike": {"aws:PrincipalArn": list(dict.fromkeys(writers))}},
            )
        )
