"""NetworkStack as composed in the whole app: the EFA group in the created VPC, its endpoints opened to it;
the constructs themselves are tested alone in test_efa_security_group.py and test_job_network.py."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match

from stacks.network import JobNetwork
from tests.conftest import dumps, resources_of_type
from tests.stacks.conftest import bucket_arn


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


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_the_job_network_gets_the_settings_buckets_zones_endpoints_and_flow_log_lifetime(request, env_name):
    """What NetworkStack unpacks from the settings for JobNetwork (which is tested with plain values alone)."""
    env = request.getfixturevalue(env_name)
    network, template = env.settings.network, env.templates["network"]
    assert len(resources_of_type(template, "AWS::EC2::Subnet")) == network.subnet_count
    endpoints = resources_of_type(template, "AWS::EC2::VPCEndpoint").values()
    [gateway] = [e["Properties"] for e in endpoints if e["Properties"]["VpcEndpointType"] == "Gateway"]
    resources = list(map(dumps, gateway["PolicyDocument"]["Statement"][0]["Resource"]))
    for purpose in ("datasets", "artifacts"):
        assert dumps(bucket_arn(env.settings, purpose)) in resources
        assert dumps(bucket_arn(env.settings, purpose, "/*")) in resources
    interface = [e for e in endpoints if e["Properties"]["VpcEndpointType"] == "Interface"]
    assert len(interface) == sum(len(JobNetwork.INTERFACE_ENDPOINTS[name]) for name in network.interface_endpoints)
    [flow_logs] = resources_of_type(template, "AWS::Logs::LogGroup").values()
    assert flow_logs["Properties"]["RetentionInDays"] >= env.settings.log_retention_days
    assert flow_logs["DeletionPolicy"] == {"destroy": "Delete", "retain": "Retain"}[env.settings.removal_policy]
