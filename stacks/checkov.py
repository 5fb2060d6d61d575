"""checkov's findings that this project accepts, as inline skips in the templates (checkov reads a resource's
`Metadata.checkov.skip`; CloudFormation accepts any JSON there and ignores it when it deploys:
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-attribute-metadata.html), each with
its reason; README "checkov" has the full reasoning and sources. Any other finding still fails a checkov run
(README: the command, by hand, not in CI)."""

from __future__ import annotations

import jsii
from aws_cdk import CfnResource, IAspect
from constructs import IConstruct

# checkov's Lambda findings, accepted for every function of the app (ours and CDK's custom-resource handlers).
LAMBDA_FINDINGS = {
    "CKV_AWS_116": "no DLQ: Lambda steps and CloudFormation invoke synchronously (a DLQ only gets async failures); "
    "the notification function's failures are retried by Lambda and stay in its log group",
    "CKV_AWS_115": "no reserved concurrency: it fails in accounts with under 100 unreserved (new accounts)",
    "CKV_AWS_117": "outside the VPC: calls only S3/SageMaker/SNS under a least-privilege role, runs no user code",
}
# The bucket that receives the other buckets' server access logs cannot log into itself (a loop of logs).
ACCESS_LOG_BUCKET_FINDINGS = {"CKV_AWS_18": "the access-log destination itself: logging it would loop"}


def skips(findings: dict[str, str]) -> dict[str, list[dict[str, str]]]:
    return {"skip": [{"id": check, "comment": reason} for check, reason in findings.items()]}


@jsii.implements(IAspect)
class CheckovAcknowledgments:
    """Adds the accepted findings' skips to every Lambda function and to the access-log bucket."""

    def __init__(self, access_log_bucket_path: str) -> None:
        self.access_log_bucket_path = access_log_bucket_path

    def visit(self, node: IConstruct) -> None:
        if not isinstance(node, CfnResource):
            return
        if node.cfn_resource_type == "AWS::Lambda::Function":
            node.add_metadata("checkov", skips(LAMBDA_FINDINGS))
        elif node.cfn_resource_type == "AWS::S3::Bucket" and node.node.path.startswith(self.access_log_bucket_path):
            node.add_metadata("checkov", skips(ACCESS_LOG_BUCKET_FINDINGS))
