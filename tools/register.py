"""Register an AWS model package's model again, without retraining: a person's recorded decision.

    make register PACKAGE=<arn> REASON="..."     (a local run or package: local_runner/register.py)

CreateModelPackage of the package's model (its inference specification, metrics and metadata) as a new version of
its group, PendingManualApproval, recording who (your AWS identity's ARN), when (UTC), why (REASON) and what it
came from in its CustomerMetadataProperties (pipeline_steps/package_metadata.py) and the reason as its
ApprovalDescription. Not in production: stacks/ defines no approval role (no principal but the pipeline's may
CreateModelPackage there), so a person's registration has none to use.
"""

from __future__ import annotations

import sys
from typing import Any

from pipeline_steps.package_metadata import METADATA_ENTRIES_MAX, PENDING, decision
from tools.deployment import ToolParser, add_pipeline_arguments, fail, load_deployment, run_tool

PRODUCTION = "prod"


def register_aws_package(sagemaker: Any, caller_arn: str, arn: str, reason: str) -> str:
    """The new package's ARN."""
    source = sagemaker.describe_model_package(ModelPackageName=arn)
    try:
        metadata = {**source.get("CustomerMetadataProperties", {}), **decision(caller_arn, reason, arn)}
    except ValueError as err:
        fail(str(err))
    if len(metadata) > METADATA_ENTRIES_MAX:
        fail(f"{arn}: with the decision, {len(metadata)} metadata properties; a package has at most 50")
    request: dict[str, Any] = {
        "ModelPackageGroupName": source["ModelPackageGroupName"],
        "InferenceSpecification": source["InferenceSpecification"],
        "ModelApprovalStatus": PENDING,
        "CustomerMetadataProperties": metadata,
        "ModelPackageDescription": f"registered by hand from {arn.rsplit('/', 2)[-2]}/{arn.rsplit('/', 1)[-1]}",
    }
    if "ModelMetrics" in source:
        request["ModelMetrics"] = source["ModelMetrics"]
    created = sagemaker.create_model_package(**request)
    # ApprovalDescription (at most 1024 characters) is UpdateModelPackage's, beside the status it explains. The
    # metadata again: an update without it keeps it on AWS, but moto 5 clears it.
    sagemaker.update_model_package(
        ModelPackageArn=created["ModelPackageArn"],
        ModelApprovalStatus=PENDING,
        ApprovalDescription=reason,
        CustomerMetadataProperties=metadata,
    )
    return str(created["ModelPackageArn"])


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(__doc__)
    parser.add_argument("--package", required=True, help="a model package ARN whose model is registered again")
    parser.add_argument("--reason", required=True, help="why (kept in the package's metadata)")
    add_pipeline_arguments(parser)
    args = parser.parse_args(argv)
    if args.env == PRODUCTION:
        fail(
            "register is not for production: stacks/ defines no approval role, and only the pipeline may create "
            "model packages there; register in dev, or train again in prod"
        )
    if ":local:" in args.package:
        fail(f"{args.package} is a local package: python -m local_runner.register (make register does it)")
    deployment = load_deployment(args.env, args.task)
    caller = deployment.session.client("sts", region_name=deployment.region).get_caller_identity()["Arn"]
    arn = register_aws_package(deployment.client("sagemaker"), caller, args.package, args.reason)
    print(f"registered {arn} ({PENDING}): approve or reject it in SageMaker Studio or with UpdateModelPackage")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
