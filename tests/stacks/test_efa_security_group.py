"""EfaSecurityGroup alone in a bare stack (in an imported VPC): its rules and the job ENI grant."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match, Template

from tests.stacks.conftest import (
    SUBNET_IDS,
    VPC_ID,
    efa_group_in_imported_vpc,
    grantee,
    joined,
    logical_id,
    statements_of,
)


@pytest.fixture
def template(bare_stack, dev_settings) -> Template:
    stack = bare_stack(dev_settings)
    efa_group_in_imported_vpc(stack).grant_job_network_interfaces(grantee(stack))
    return Template.from_stack(stack)


def test_all_traffic_to_and_from_itself(template):
    group = {"Fn::GetAtt": [logical_id(template, "AWS::EC2::SecurityGroup"), "GroupId"]}
    template.resource_count_is("AWS::EC2::SecurityGroupIngress", 1)
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress", {"IpProtocol": "-1", "GroupId": group, "SourceSecurityGroupId": group}
    )
    template.resource_count_is("AWS::EC2::SecurityGroupEgress", 1)
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress", {"IpProtocol": "-1", "GroupId": group, "DestinationSecurityGroupId": group}
    )


def test_no_other_inbound_and_only_https_outbound(template):
    template.has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "VpcId": VPC_ID,
            "SecurityGroupIngress": Match.absent(),
            "SecurityGroupEgress": [
                Match.object_like({"CidrIp": "0.0.0.0/0", "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443})
            ],
        },
    )


def test_grants_job_enis_only_in_its_subnets_with_itself(template):
    group_id = {"Fn::GetAtt": [logical_id(template, "AWS::EC2::SecurityGroup"), "GroupId"]}
    [manage] = [s for s in statements_of(template) if s.get("Sid") == "ManageJobNetworkInterfaces"]
    ec2_arn = "arn:<partition>:ec2:<region>:<account>:"
    security_group_arn = joined(f"{ec2_arn}security-group/")
    security_group_arn["Fn::Join"][1].append(group_id)
    assert manage["Resource"] == [
        joined(f"{ec2_arn}network-interface/*"),
        security_group_arn,
        *(joined(f"{ec2_arn}subnet/{subnet_id}") for subnet_id in SUBNET_IDS),
    ]
    assert manage["Action"] == [
        "ec2:CreateNetworkInterface",
        "ec2:CreateNetworkInterfacePermission",
        "ec2:DeleteNetworkInterface",
        "ec2:DeleteNetworkInterfacePermission",
    ]
    [describe] = [s for s in statements_of(template) if s.get("Sid") == "DescribeNetwork"]
    assert describe["Resource"] == "*"
    assert all(action.startswith("ec2:Describe") for action in describe["Action"])
