"""JobNetwork alone in a bare stack: isolated VPC, endpoints, flow logs; opt-in endpoints open to the job group."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from config import ArtifactLayout, Settings
from config.settings import InterfaceEndpoint
from stacks.log_groups import LogGroupSettings
from stacks.network import EfaSecurityGroup, JobBuckets, JobNetwork
from tests.conftest import dumps
from tests.stacks.conftest import BareStack, joined, logical_id
from tools.idle_cost import idle_cost

LAYOUT = ArtifactLayout()
BUCKETS = JobBuckets("project-datasets", "project-artifacts", LAYOUT.writable_by_jobs(), LAYOUT.deletable_by_jobs())
FLOW_LOGS = LogGroupSettings(
    retention_days=60, removal=RemovalPolicy.DESTROY, name_root="/hfqa-test/", function_folder="functions"
)


def job_network(
    bare_stack: BareStack,
    settings: Settings,
    *,
    availability_zones: tuple[str, ...] = (),
    interface_endpoints: tuple[InterfaceEndpoint, ...] = ("logs",),
) -> Template:
    """JobNetwork (at most 2 zones) with an EFA group opened to its endpoints, as NetworkStack wires them."""
    stack = bare_stack(settings)
    network = JobNetwork(
        stack,
        "JobNetwork",
        availability_zones=availability_zones,
        max_azs=2,
        interface_endpoints=interface_endpoints,
        buckets=BUCKETS,
        flow_logs=FLOW_LOGS,
        key=kms.Key(stack, "Key"),
    )
    group = EfaSecurityGroup(stack, "EfaSecurityGroup", vpc=network.vpc, subnets=network.vpc.isolated_subnets)
    network.allow_endpoint_access_from(group.security_group)
    return Template.from_stack(stack)


def test_only_isolated_subnets_and_no_route_out(bare_stack, dev_settings):
    template = job_network(bare_stack, dev_settings)
    template.resource_count_is("AWS::EC2::VPC", 1)
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    template.resource_count_is("AWS::EC2::InternetGateway", 0)
    subnets = template.find_resources("AWS::EC2::Subnet")
    assert len(subnets) == 2  # max_azs
    assert all(subnet["Properties"]["MapPublicIpOnLaunch"] is False for subnet in subnets.values())


def test_pinned_zones_get_one_subnet_each_in_their_order(bare_stack, dev_settings):
    zones = ("us-east-1d", "us-east-1a", "us-east-1f")
    subnets = job_network(bare_stack, dev_settings, availability_zones=zones).find_resources("AWS::EC2::Subnet")
    assert tuple(subnet["Properties"]["AvailabilityZone"] for subnet in subnets.values()) == zones


def test_the_logs_endpoint_alone_adds_one_interface_endpoint_beside_the_s3_gateway(bare_stack, dev_settings):
    """SageMaker pulls images itself; the logs endpoint is what keeps a first run from being blind (settings)."""
    template = job_network(bare_stack, dev_settings, interface_endpoints=("logs",))
    template.resource_count_is("AWS::EC2::VPCEndpoint", 2)
    [gateway] = template.find_resources("AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Gateway"}})
    assert ".s3" in dumps(template.to_json()["Resources"][gateway]["Properties"]["ServiceName"])
    [interface] = template.find_resources("AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Interface"}})
    assert ".logs" in dumps(template.to_json()["Resources"][interface]["Properties"]["ServiceName"])


def gateway_policy(template: Template) -> list[dict]:
    [gateway] = template.find_resources(
        "AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Gateway"}}
    ).values()
    return gateway["Properties"]["PolicyDocument"]["Statement"]


def test_the_s3_gateway_endpoint_reads_the_project_and_asset_buckets_and_writes_only_job_prefixes(
    bare_stack, dev_settings
):
    """Writes only where jobs write, deletes only under checkpoints/ (SageMaker mirrors checkpoint deletions:
    https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html); tests/stacks/test_s3_endpoint_agreement.py
    compares the whole policy with the job role's."""
    read, write, delete = gateway_policy(job_network(bare_stack, dev_settings))
    assets_bucket = [
        "arn:",
        {"Ref": "AWS::Partition"},
        ":s3:::",
        {"Fn::Sub": "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}"},
    ]
    assets = [{"Fn::Join": ["", assets_bucket]}, {"Fn::Join": ["", [*assets_bucket, "/*"]]}]
    names = (BUCKETS.datasets, BUCKETS.artifacts)
    project = [joined(f"arn:<partition>:s3:::{name}{suffix}") for name in names for suffix in ("", "/*")]
    assert sorted(map(dumps, read["Resource"])) == sorted(map(dumps, project + assets))
    assert read["Action"] == ["s3:GetObject", "s3:ListBucket"]

    def under(prefixes: tuple[str, ...]) -> list[str]:
        return sorted(dumps(joined(f"arn:<partition>:s3:::{BUCKETS.artifacts}/{prefix}/*")) for prefix in prefixes)

    assert write["Action"] == ["s3:AbortMultipartUpload", "s3:PutObject"]
    assert sorted(map(dumps, write["Resource"])) == under(LAYOUT.writable_by_jobs())
    assert delete["Action"] == "s3:DeleteObject"
    assert [dumps(delete["Resource"])] == under((LAYOUT.checkpoints,))
    for statement in (read, write, delete):
        assert statement["Principal"] == {"AWS": "*"} and statement["Effect"] == "Allow"


def test_ecr_through_the_vpc_adds_only_ecrs_layer_bucket(bare_stack, dev_settings):
    statements = gateway_policy(job_network(bare_stack, dev_settings, interface_endpoints=("ecr", "logs")))
    assert [s["Sid"] for s in statements] == [
        "ReadProjectAndAssetBuckets",
        "WriteJobOutputs",
        "PruneCheckpoints",
        "EcrImageLayers",
    ]
    assert "-starport-layer-bucket/*" in dumps(statements[-1]["Resource"])
    assert statements[-1]["Action"] == "s3:GetObject"


def test_flow_logs_are_encrypted_and_kept_as_configured(bare_stack, dev_settings):
    template = job_network(bare_stack, dev_settings)
    template.resource_count_is("AWS::EC2::FlowLog", 1)
    key_arn = {"Fn::GetAtt": [logical_id(template, "AWS::KMS::Key"), "Arn"]}
    [log_group] = template.find_resources("AWS::Logs::LogGroup", {"Properties": {"KmsKeyId": key_arn}}).values()
    assert log_group["Properties"]["RetentionInDays"] == 90  # the shortest CloudWatch retention >= 60 days
    assert log_group["DeletionPolicy"] == "Delete"


def test_default_security_group_is_stripped_of_its_rules(bare_stack, dev_settings):
    """`@aws-cdk/aws-ec2:restrictDefaultSecurityGroup`: nothing can use the VPC's default group by accident."""
    job_network(bare_stack, dev_settings).resource_count_is("Custom::VpcRestrictDefaultSG", 1)


def test_opt_in_interface_endpoints_accept_https_from_the_job_group_only(bare_stack, dev_settings):
    endpoints: tuple[InterfaceEndpoint, ...] = ("ecr", "logs")
    template = job_network(bare_stack, dev_settings, interface_endpoints=endpoints)
    expected = sum(len(JobNetwork.INTERFACE_ENDPOINTS[name]) for name in endpoints)
    interface = template.find_resources("AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Interface"}})
    assert len(interface) == expected
    assert all(endpoint["Properties"]["PrivateDnsEnabled"] for endpoint in interface.values())
    groups = template.find_resources("AWS::EC2::SecurityGroup")
    [endpoint_group] = [k for k in groups if k.startswith("JobNetworkEndpointSecurityGroup")]
    [efa_group] = [k for k in groups if k.startswith("EfaSecurityGroup")]
    assert "SecurityGroupIngress" not in groups[endpoint_group]["Properties"]
    ingress = template.find_resources(
        "AWS::EC2::SecurityGroupIngress",
        {"Properties": {"GroupId": {"Fn::GetAtt": [endpoint_group, "GroupId"]}}},
    )
    assert [r["Properties"] for r in ingress.values()] == [
        {
            "Description": "HTTPS from the SageMaker jobs",
            "FromPort": 443,
            "GroupId": {"Fn::GetAtt": [endpoint_group, "GroupId"]},
            "IpProtocol": "tcp",
            "SourceSecurityGroupId": {"Fn::GetAtt": [efa_group, "GroupId"]},
            "ToPort": 443,
        }
    ]
    template.has_resource_properties(
        "AWS::EC2::VPCEndpoint",
        {"VpcEndpointType": "Interface", "SecurityGroupIds": [{"Fn::GetAtt": [endpoint_group, "GroupId"]}]},
    )
    zones = len(template.find_resources("AWS::EC2::Subnet"))
    assert idle_cost([template.to_json()]).endpoint_zone_hours_per_hour == expected * zones
