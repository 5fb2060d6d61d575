"""The policy evaluator the IAM attacks use (tests/security/policy_evaluation.py), on IAM's own rules: a missing
key fails an operator except ...IfExists and Null; ForAllValues passes a missing key, ForAnyValue does not
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html)."""

from __future__ import annotations

import pytest

from tests.security.policy_evaluation import allowed, condition_holds, job_request_context

TYPES = {"ForAllValues:StringEquals": {"sagemaker:InstanceTypes": ["ml.p4d.24xlarge", "ml.p4de.24xlarge"]}}


def test_for_all_values_passes_a_missing_key_which_is_why_the_role_adds_a_null_check():
    assert condition_holds(TYPES, {})
    assert not condition_holds({**TYPES, "Null": {"sagemaker:InstanceTypes": "false"}}, {})
    assert condition_holds(TYPES, {"sagemaker:InstanceTypes": ["ml.p4d.24xlarge"]})
    assert not condition_holds(TYPES, {"sagemaker:InstanceTypes": ["ml.p4d.24xlarge", "ml.p5.48xlarge"]})


def test_for_any_value_fails_a_missing_key_and_passes_one_match():
    condition = {"ForAnyValue:StringEquals": {"aws:TagKeys": ["team"]}}
    assert not condition_holds(condition, {})
    assert condition_holds(condition, {"aws:TagKeys": ["team", "other"]})


def test_single_valued_operators_fail_a_missing_key_unless_if_exists():
    assert not condition_holds({"Bool": {"sagemaker:NetworkIsolation": "true"}}, {})
    assert condition_holds({"Bool": {"sagemaker:NetworkIsolation": "true"}}, {"sagemaker:NetworkIsolation": True})
    assert condition_holds({"ArnEqualsIfExists": {"sagemaker:VolumeKmsKey": "arn:aws:kms:r:1:key/k"}}, {})
    assert not condition_holds({"Null": {"sagemaker:VolumeKmsKey": "true"}}, {"sagemaker:VolumeKmsKey": "k"})


def test_arn_like_matches_each_part_and_string_like_globs():
    pattern = {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": "arn:aws:logs:eu-west-1:1:log-group:/p/*"}}
    assert condition_holds(pattern, {"kms:EncryptionContext:aws:logs:arn": "arn:aws:logs:eu-west-1:1:log-group:/p/a"})
    assert not condition_holds(
        pattern, {"kms:EncryptionContext:aws:logs:arn": "arn:aws:logs:eu-west-1:2:log-group:/p/a"}
    )
    assert condition_holds({"StringLike": {"s3:prefix": ["a/*", "b/*"]}}, {"s3:prefix": "b/x"})
    assert not condition_holds({"StringLike": {"s3:prefix": ["a/*"]}}, {"s3:prefix": "a"})


def test_an_operator_it_does_not_know_fails_loudly():
    with pytest.raises(NotImplementedError, match="NumericGreaterThan"):
        condition_holds({"NumericGreaterThan": {"sagemaker:MaxRuntimeInSeconds": "10"}}, {"x": 1})


def test_a_negated_operator_holds_without_the_key_and_where_the_positive_fails():
    condition = {"StringNotEquals": {"s3:x-amz-server-side-encryption": "aws:kms"}}
    assert condition_holds(condition, {})
    assert condition_holds(condition, {"s3:x-amz-server-side-encryption": "AES256"})
    assert not condition_holds(condition, {"s3:x-amz-server-side-encryption": "aws:kms"})


def test_a_deny_wins_and_actions_match_case_insensitively():
    allow = {"Effect": "Allow", "Action": "sagemaker:Create*", "Resource": "*"}
    deny = {"Effect": "Deny", "Action": "sagemaker:CreateTrainingJob", "Resource": "*"}
    assert allowed([allow], "sagemaker:createtrainingjob", "arn:x", {})
    assert not allowed([allow, deny], "sagemaker:CreateTrainingJob", "arn:x", {})


def test_a_processing_request_is_read_from_its_network_and_cluster_config():
    request = {
        "ProcessingResources": {"ClusterConfig": {"InstanceType": "ml.m5.4xlarge", "VolumeKmsKeyId": "k"}},
        "NetworkConfig": {"EnableNetworkIsolation": True, "VpcConfig": {"Subnets": ["s"], "SecurityGroupIds": ["g"]}},
        "ProcessingOutputConfig": {"KmsKeyId": "k", "Outputs": []},
    }
    assert job_request_context("sagemaker:CreateProcessingJob", request) == {
        "sagemaker:InstanceTypes": ["ml.m5.4xlarge"],
        "sagemaker:NetworkIsolation": True,
        "sagemaker:VpcSubnets": ["s"],
        "sagemaker:VpcSecurityGroupIds": ["g"],
        "sagemaker:VolumeKmsKey": "k",
        "sagemaker:OutputKmsKey": "k",
    }
