"""NetworkStack: private VPC without NAT, endpoints, flow logs and the EFA security group."""

from __future__ import annotations

from tests.conftest import dumps, resources_of_type


def test_vpc_has_only_isolated_subnets_and_no_nat(dev):
    template = dev.templates["network"]
    assert len(resources_of_type(template, "AWS::EC2::VPC")) == 1
    assert not resources_of_type(template, "AWS::EC2::NatGateway")
    assert not resources_of_type(template, "AWS::EC2::InternetGateway")
    subnets = resources_of_type(template, "AWS::EC2::Subnet")
    assert len(subnets) == dev.settings.network.max_azs
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets.values())


def test_only_the_free_s3_gateway_endpoint_by_default(dev):
    """The jobs need no interface endpoint (SageMaker pulls images and ships logs itself); each would bill
    per zone-hour while idle."""
    [endpoint] = resources_of_type(dev.templates["network"], "AWS::EC2::VPCEndpoint").values()
    assert endpoint["Properties"]["VpcEndpointType"] == "Gateway"
    assert ".s3" in dumps(endpoint["Properties"]["ServiceName"])


def test_flow_logs_are_encrypted(dev):
    template = dev.templates["network"]
    assert len(resources_of_type(template, "AWS::EC2::FlowLog")) == 1
    [log_group] = resources_of_type(template, "AWS::Logs::LogGroup").values()
    assert "KmsKeyId" in log_group["Properties"]


def efa_group_id(env):
    [(logical_id, _)] = [
        (k, v)
        for k, v in resources_of_type(env.templates["network"], "AWS::EC2::SecurityGroup").items()
        if k.startswith("EfaSecurityGroup")
    ]
    return logical_id


def test_efa_group_allows_all_traffic_to_and_from_itself(dev):
    template = dev.templates["network"]
    group = {"Fn::GetAtt": [efa_group_id(dev), "GroupId"]}
    ingress = resources_of_type(template, "AWS::EC2::SecurityGroupIngress").values()
    egress = resources_of_type(template, "AWS::EC2::SecurityGroupEgress").values()
    assert any(
        r["Properties"]["GroupId"] == group
        and r["Properties"]["SourceSecurityGroupId"] == group
        and r["Properties"]["IpProtocol"] == "-1"
        for r in ingress
    )
    assert any(
        r["Properties"]["GroupId"] == group
        and r["Properties"]["DestinationSecurityGroupId"] == group
        and r["Properties"]["IpProtocol"] == "-1"
        for r in egress
    )


def test_efa_group_has_no_other_inbound_and_only_https_outbound(dev):
    template = dev.templates["network"]
    props = template["Resources"][efa_group_id(dev)]["Properties"]
    assert "SecurityGroupIngress" not in props
    assert [(r["IpProtocol"], r["FromPort"], r["ToPort"]) for r in props["SecurityGroupEgress"]] == [("tcp", 443, 443)]


def test_default_security_group_is_stripped_of_its_rules(dev):
    """`@aws-cdk/aws-ec2:restrictDefaultSecurityGroup`: nothing can use the VPC's default group by accident."""
    assert len(resources_of_type(dev.templates["network"], "Custom::VpcRestrictDefaultSG")) == 1
