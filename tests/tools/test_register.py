"""make register PACKAGE=<arn> on AWS: the package's model registered again as a person's decision,
PendingManualApproval, against moto server, which has CreateModelPackage, DescribeModelPackage and
UpdateModelPackage. (A local run or package: tests/local_runner/test_register.py.)"""

from __future__ import annotations

from pipeline_steps.package_metadata import REASON, REGISTERED_BY, SOURCE
from tests.tools.conftest import assert_one_line_error, run_cli
from tools.deployment import settings_for

DEV = settings_for("dev")
WHY = "F1 82.1 on the pilot data is enough for the pilot: approved by the QA lead"


def test_register_is_refused_in_production():
    arn = "arn:aws:sagemaker:us-east-1:123456789012:model-package/g/1"
    result = run_cli("tools.register", "--package", arn, "--reason", WHY, "--env", "prod", env={})
    assert_one_line_error(result, "not for production", "no approval role")


def test_an_aws_package_is_registered_again_with_the_decision(deployed, deployed_env):
    sagemaker = deployed.client("sagemaker")
    group = DEV.model_package_group_name
    if not sagemaker.list_model_package_groups(NameContains=group)["ModelPackageGroupSummaryList"]:
        sagemaker.create_model_package_group(ModelPackageGroupName=group)
    specification = {
        "Containers": [{"Image": "123.dkr.ecr.us-east-1.amazonaws.com/hf:1", "ModelDataUrl": "s3://a/model.tar.gz"}],
        "SupportedContentTypes": ["application/json"],
        "SupportedResponseMIMETypes": ["application/json"],
    }
    rejected = sagemaker.create_model_package(
        ModelPackageGroupName=group,
        InferenceSpecification=specification,
        ModelApprovalStatus="Rejected",
        CustomerMetadataProperties={"evaluation_f1": "82.1"},
    )["ModelPackageArn"]

    result = run_cli("tools.register", "--package", rejected, "--reason", WHY, "--env", "dev", env=deployed_env)

    assert result.returncode == 0, result.stderr
    arn = result.stdout.split()[1]
    package = sagemaker.describe_model_package(ModelPackageName=arn)
    assert (package["ModelApprovalStatus"], package["ApprovalDescription"]) == ("PendingManualApproval", WHY)
    metadata = package["CustomerMetadataProperties"]
    assert metadata["evaluation_f1"] == "82.1" and metadata[REASON] == WHY and metadata[SOURCE] == rejected
    assert metadata[REGISTERED_BY].startswith("arn:aws:")  # the caller's identity
    assert package["InferenceSpecification"]["Containers"][0]["ModelDataUrl"] == "s3://a/model.tar.gz"
