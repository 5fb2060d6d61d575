"""NetworkStack as composed in the whole app: the EFA group in the created VPC, its endpoints opened to it;
the constructs themselves are tested alone in test_efa_security_group.py and test_job_network.py."""

from __future__ import annotations

from aws_cdk.assertions import Match

from tests.conftest import resources_of_type


def group_id(env, prefix):
    [logical_id] = [
        k for k in resources_of_type(env.templates["network"], "AWS::EC2::SecurityGroup") if k.startswith(prefix)
    ]
    return logical_id


def test_the_efa_group_lives_in_the_job_vpc_and_is_exported(dev):
    template = dev.template("network")
    [vpc_id] = resources_of_type(dev.templates["network"], "AWS::EC2::VPC")
    template.has_resource_properties(
        "AWS::EC2::SecurityGroup", {"VpcId": {"Ref": vpc_id}, "GroupDescription": Match.string_like_regexp("EFA")}
    )
    template.has_output("EfaSecurityGroupId", {"Value": {"Fn::GetAtt": [group_id(dev, "EfaSecurityGroup"), "GroupId"]}})


def test_configured_endpoints_accept_https_from_the_efa_group(prod):
    assert prod.settings.network.interface_endpoints
    prod.template("network").has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "GroupId": {"Fn::GetAtt": [group_id(prod, "JobNetworkEndpointSecurityGroup"), "GroupId"]},
            "SourceSecurityGroupId": {"Fn::GetAtt": [group_id(prod, "EfaSecurityGroup"), "GroupId"]},
            "FromPort": 443,
            "ToPort": 443,
        },
    )
