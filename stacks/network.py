"""NetworkStack: a private VPC without NAT, the endpoints the jobs need, flow logs, the EFA security group."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from aws_cdk import Aws, CfnOutput, DefaultStackSynthesizer, Fn, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from config import Settings
from config.settings import InterfaceEndpoint
from stacks.log_groups import LogGroupSettings, encrypted_log_group
from stacks.nag import add_reviewed_statement

HTTPS = ec2.Port.tcp(443)


@dataclass(frozen=True)
class JobBuckets:
    """The buckets the jobs reach through the S3 gateway endpoint (names), and the artifacts prefixes the jobs of
    the environment's pipelines write and delete under (each pipeline's layout: ArtifactLayout.of_pipeline)."""

    datasets: str
    artifacts: str
    writable: tuple[str, ...]
    deletable: tuple[str, ...]

    @classmethod
    def of(cls, settings: Settings) -> JobBuckets:
        pipelines = settings.deployed_pipelines
        return cls(
            datasets=settings.bucket_name("datasets", Aws.ACCOUNT_ID, Aws.REGION),
            artifacts=settings.bucket_name("artifacts", Aws.ACCOUNT_ID, Aws.REGION),
            writable=_each_once(p.layout.writable_by_jobs(not p.tokenizes_in_fine_tune) for p in pipelines),
            deletable=_each_once(p.layout.deletable_by_jobs() for p in pipelines),
        )


def _each_once(groups: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    """The prefixes of every group in order, each once."""
    return tuple(dict.fromkeys(prefix for group in groups for prefix in group))


# What the jobs' role does in S3 through the endpoint (stacks/roles.py JobRole, the only principal in the jobs'
# subnets: the Lambda functions and the MLflow server run outside the VPC): read and list; write and abort multipart
# uploads under the prefixes jobs write; delete checkpoints. An S3 request through the endpoint needs both the
# endpoint policy and the role to allow it ("An endpoint policy does not override or replace identity-based
# policies", https://docs.aws.amazon.com/vpc/latest/userguide/vpc-endpoints-access.html), so the endpoint allows
# exactly those (tests/stacks/test_s3_endpoint_agreement.py compares the two).
S3_ENDPOINT_READS = ["s3:GetObject", "s3:ListBucket"]
S3_ENDPOINT_WRITES = ["s3:PutObject", "s3:AbortMultipartUpload"]
S3_ENDPOINT_DELETES = ["s3:DeleteObject"]


def s3_endpoint_statements(stack: Stack, *, buckets: JobBuckets, ecr_layers: bool) -> list[iam.PolicyStatement]:
    """The S3 gateway endpoint's policy: reads of the project buckets and the CDK assets bucket (the training code);
    writes only under the artifacts prefixes jobs write (`ArtifactLayout.writable_by_jobs`), deletes only under
    checkpoints/ (SageMaker mirrors the script's checkpoint pruning to S3 with the job's role:
    https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html). Under network isolation "SageMaker still
    performs download and upload operations against Amazon S3 using your SageMaker execution role"
    (https://docs.aws.amazon.com/sagemaker/latest/dg/mkt-algo-model-internet-free.html), and with a VpcConfig through
    a network interface in the VPC, "for Amazon S3 and logging access"
    (https://repost.aws/knowledge-center/sagemaker-access-network-isolation): through this endpoint. No write to the
    datasets or assets bucket: no job writes there. A gateway endpoint without a policy allows every
    bucket (https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html#edit-vpc-endpoint-policy-s3).

    SageMaker pulls the training and processing images itself, not through the job's VPC (the dev VPC has no ECR
    endpoint and jobs start), so no AWS-owned bucket is needed; only with the opt-in `ecr` interface endpoints
    (images pulled through the VPC: `ecr_layers`) do ECR's layers come from the AWS-owned bucket
    prod-<region>-starport-layer-bucket (https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html#ecr-minimum-s3-perms).
    """
    qualifier = getattr(stack.synthesizer, "bootstrap_qualifier", None) or DefaultStackSynthesizer.DEFAULT_QUALIFIER
    assets_bucket = Fn.sub(DefaultStackSynthesizer.DEFAULT_FILE_ASSETS_BUCKET_NAME.replace("${Qualifier}", qualifier))

    def under(prefixes: tuple[str, ...]) -> list[str]:
        return [f"arn:{Aws.PARTITION}:s3:::{buckets.artifacts}/{prefix}/*" for prefix in prefixes]

    statements = [
        iam.PolicyStatement(
            sid="ReadProjectAndAssetBuckets",
            principals=[iam.AnyPrincipal()],
            actions=S3_ENDPOINT_READS,
            resources=[
                arn
                for bucket in (buckets.datasets, buckets.artifacts, assets_bucket)
                for arn in _bucket_and_objects(bucket)
            ],
        ),
        iam.PolicyStatement(
            sid="WriteJobOutputs",
            principals=[iam.AnyPrincipal()],
            actions=S3_ENDPOINT_WRITES,
            resources=under(buckets.writable),
        ),
        iam.PolicyStatement(
            sid="PruneCheckpoints",
            principals=[iam.AnyPrincipal()],
            actions=S3_ENDPOINT_DELETES,
            resources=under(buckets.deletable),
        ),
    ]
    if ecr_layers:
        statements.append(
            iam.PolicyStatement(
                sid="EcrImageLayers",
                principals=[iam.AnyPrincipal()],
                actions=["s3:GetObject"],
                resources=[f"arn:{Aws.PARTITION}:s3:::prod-{Aws.REGION}-starport-layer-bucket/*"],
            )
        )
    return statements


def _bucket_and_objects(bucket: str) -> tuple[str, str]:
    return f"arn:{Aws.PARTITION}:s3:::{bucket}", f"arn:{Aws.PARTITION}:s3:::{bucket}/*"


class EfaSecurityGroup(Construct):
    """The security group EFA needs: all traffic to and from itself, HTTPS out to the endpoints and S3.

    Jobs attach to `subnets` with this group; `grant_job_network_interfaces` lets a job role do exactly that.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc, subnets: list[ec2.ISubnet]) -> None:
        super().__init__(scope, construct_id)
        self.subnets = subnets
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="SageMaker training/processing jobs: EFA traffic within the group, HTTPS to endpoints",
            allow_all_outbound=False,
        )
        sg = self.security_group
        # Self-references become separate AWS::EC2::SecurityGroupIngress/Egress resources.
        sg.add_ingress_rule(sg, ec2.Port.all_traffic(), "EFA and NCCL traffic between training nodes")
        sg.add_egress_rule(sg, ec2.Port.all_traffic(), "EFA and NCCL traffic between training nodes")
        # The subnets route nowhere but the VPC and the S3 gateway endpoint, whose prefix-list id is
        # region-specific (a lookup we avoid at synth); HTTPS egress therefore reaches only those.
        sg.add_egress_rule(ec2.Peer.any_ipv4(), HTTPS, "HTTPS to the interface endpoints and the S3 gateway endpoint")

    def grant_job_network_interfaces(self, grantee: iam.IGrantable) -> None:
        """What SageMaker needs to attach jobs to the VPC: ENIs in these subnets with this group only."""
        stack = Stack.of(self)

        def ec2_arn(kind: str, name: str) -> str:
            return stack.format_arn(service="ec2", resource=kind, resource_name=name)

        add_reviewed_statement(
            grantee,
            iam.PolicyStatement(
                sid="DescribeNetwork",
                actions=[
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeVpcs",
                    "ec2:DescribeDhcpOptions",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeSecurityGroups",
                ],
                resources=["*"],
            ),
            "ec2:Describe* (SageMaker looks up the subnets and group it attaches jobs to) supports no resource-level "
            "permissions.",
        )
        add_reviewed_statement(
            grantee,
            iam.PolicyStatement(
                sid="ManageJobNetworkInterfaces",
                actions=[
                    "ec2:CreateNetworkInterface",
                    "ec2:CreateNetworkInterfacePermission",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DeleteNetworkInterfacePermission",
                ],
                resources=[
                    ec2_arn("network-interface", "*"),
                    ec2_arn("security-group", self.security_group.security_group_id),
                    *(ec2_arn("subnet", subnet.subnet_id) for subnet in self.subnets),
                ],
            ),
            "SageMaker creates the job ENIs at run time (their ids are unknown before); subnets and security group "
            "are named exactly.",
        )


class JobNetwork(Construct):
    """A VPC with isolated subnets only (no NAT, no internet), endpoints and flow logs.

    Subnets in `availability_zones`, in order (empty: the region's first `max_azs` zones); the S3 gateway endpoint
    reaches `buckets` and the CDK assets bucket only, as the jobs use them; flow logs encrypted with `key`, kept for
    `flow_logs`.
    """

    # An interface_endpoints name -> the endpoints it adds (construct id, service).
    INTERFACE_ENDPOINTS: ClassVar[dict[InterfaceEndpoint, dict[str, ec2.InterfaceVpcEndpointAwsService]]] = {
        "ecr": {
            "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
            "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
        },
        "logs": {"CloudWatchLogs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS},
        "monitoring": {"CloudWatchMetrics": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING},
        "sts": {"Sts": ec2.InterfaceVpcEndpointAwsService.STS},
        "sagemaker": {"SageMakerApi": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_API},
    }

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        availability_zones: tuple[str, ...],
        max_azs: int,
        interface_endpoints: tuple[InterfaceEndpoint, ...],
        buckets: JobBuckets,
        flow_logs: LogGroupSettings,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            # Pinned zones (where p4d is offered) or the region's first max_azs zones.
            **({"availability_zones": list(availability_zones)} if availability_zones else {"max_azs": max_azs}),
            nat_gateways=0,
            ip_addresses=ec2.IpAddresses.cidr("10.40.0.0/16"),
            subnet_configuration=[
                ec2.SubnetConfiguration(name="jobs", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=20)
            ],
        )
        self.s3_endpoint = self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        statements = s3_endpoint_statements(Stack.of(self), buckets=buckets, ecr_layers="ecr" in interface_endpoints)
        for statement in statements:
            self.s3_endpoint.add_to_policy(statement)
        flow_log_group = encrypted_log_group(self, "FlowLogs", lifetime=flow_logs, key=key, purpose="vpc-flow-logs")
        self.vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group))
        self._endpoint_security_group: ec2.SecurityGroup | None = None
        endpoints = [self.INTERFACE_ENDPOINTS[name] for name in interface_endpoints]
        if not endpoints:
            return
        self._endpoint_security_group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=self.vpc,
            description="Interface VPC endpoints: HTTPS from the job security group",
            allow_all_outbound=False,
        )
        for group in endpoints:
            for name, service in group.items():
                self.vpc.add_interface_endpoint(
                    name,
                    service=service,
                    private_dns_enabled=True,
                    open=False,
                    security_groups=[self._endpoint_security_group],
                )

    def allow_endpoint_access_from(self, peer: ec2.ISecurityGroup) -> None:
        """Let `peer` (the jobs' group) reach the interface endpoints over HTTPS; nothing to do without any."""
        if self._endpoint_security_group is not None:
            self._endpoint_security_group.add_ingress_rule(peer, HTTPS, "HTTPS from the SageMaker jobs")


class NetworkStack(Stack):
    """Where the jobs run. `vpc`, `security_group` and `job_security_group` are None when network.mode is
    'none'."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, key: kms.IKey, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        network = settings.network
        self.vpc: ec2.IVpc | None = None
        self.security_group: ec2.ISecurityGroup | None = None
        self.job_security_group: EfaSecurityGroup | None = None
        self.subnets: list[ec2.ISubnet] = []
        if network.mode == "none":
            return
        job_network = None
        vpc: ec2.IVpc
        if network.mode == "create":
            job_network = JobNetwork(
                self,
                "JobNetwork",
                availability_zones=network.availability_zones,
                max_azs=network.max_azs,
                interface_endpoints=network.interface_endpoints,
                buckets=JobBuckets.of(settings),
                flow_logs=LogGroupSettings.of(settings),
                key=key,
            )
            vpc = job_network.vpc
        elif network.existing_vpc_id is None:
            raise ValueError("network.mode=existing needs network.existing_vpc_id")  # settings validation says so
        else:
            vpc = ec2.Vpc.from_vpc_attributes(
                self,
                "ExistingVpc",
                vpc_id=network.existing_vpc_id,
                availability_zones=list(network.existing_availability_zones),
                isolated_subnet_ids=list(network.existing_subnet_ids),
            )
        self.vpc = vpc
        self.subnets = vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED).subnets
        self.job_security_group = EfaSecurityGroup(self, "EfaSecurityGroup", vpc=vpc, subnets=self.subnets)
        self.security_group = self.job_security_group.security_group
        if job_network is not None:
            job_network.allow_endpoint_access_from(self.security_group)
        CfnOutput(self, "EfaSecurityGroupId", value=self.security_group.security_group_id)
