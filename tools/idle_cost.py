"""What a deployed environment costs per month while no pipeline runs, from its synthesized templates.

List prices, us-east-1, read 2026-11-30 (other regions differ by a few percent):
- AWS PrivateLink interface endpoint: $0.01 per endpoint per Availability Zone per hour,
  https://aws.amazon.com/privatelink/pricing/ (data processed, $0.01/GB, is not idle cost).
- AWS KMS customer managed key: $1.00 per key per month (each rotated key version adds $1.00 per month for
  its first two rotations), https://aws.amazon.com/kms/pricing/
- SageMaker AI managed MLflow tracking server (tracking.managed_server): billed per hour by size while it
  exists, idle or not, https://aws.amazon.com/sagemaker-ai/pricing/ ("MLflow" tab). MLFLOW_SERVER_USD_PER_HOUR
  was NOT re-read in the session that wrote it (no internet there): check it before relying on the figure.
  Its metadata storage and the S3 artifact store bill for what they hold.
- Free while idle: the S3 gateway endpoint, VPC, subnets and security groups, EventBridge rules, an SNS topic
  and SQS queue without traffic, IAM, the SageMaker pipeline and model package group. Buckets and log groups
  bill for what they store, which is zero in a new deployment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HOURS_PER_MONTH = 730
ENDPOINT_AZ_HOUR_USD = 0.01
KMS_KEY_MONTH_USD = 1.00
MLFLOW_SERVER_USD_PER_HOUR = {"Small": 0.60, "Medium": 1.40, "Large": 2.70}  # unverified, see above
PRICES_AS_OF = "2026-11-30, us-east-1 list prices (aws.amazon.com/privatelink/pricing, aws.amazon.com/kms/pricing)"


@dataclass(frozen=True)
class IdleCost:
    """Billed-while-idle items of one environment."""

    endpoint_zone_hours_per_hour: int
    kms_keys: int
    mlflow_servers: tuple[str, ...] = ()  # TrackingServerSize of each managed MLflow tracking server

    @property
    def monthly_usd(self) -> float:
        endpoints = self.endpoint_zone_hours_per_hour * HOURS_PER_MONTH * ENDPOINT_AZ_HOUR_USD
        mlflow = sum(MLFLOW_SERVER_USD_PER_HOUR[size] for size in self.mlflow_servers) * HOURS_PER_MONTH
        return endpoints + self.kms_keys * KMS_KEY_MONTH_USD + mlflow

    def describe(self) -> str:
        mlflow = "".join(
            f" + MLflow tracking server ({size}) x {HOURS_PER_MONTH} h x ${MLFLOW_SERVER_USD_PER_HOUR[size]:.2f}"
            for size in self.mlflow_servers
        )
        note = " (MLflow price unverified: aws.amazon.com/sagemaker-ai/pricing)" if self.mlflow_servers else ""
        return (
            f"idle monthly cost: ${self.monthly_usd:.2f} = {self.kms_keys} KMS key(s) x ${KMS_KEY_MONTH_USD:.2f} + "
            f"{self.endpoint_zone_hours_per_hour} interface-endpoint zone(s) x {HOURS_PER_MONTH} h x "
            f"${ENDPOINT_AZ_HOUR_USD:.2f}{mlflow} (prices: {PRICES_AS_OF}){note}"
        )


def idle_cost(templates: list[dict[str, Any]]) -> IdleCost:
    """Count what bills by the hour or month in `templates` (one environment's stacks)."""
    resources = [r for template in templates for r in template.get("Resources", {}).values()]
    endpoint_zones = sum(
        len(r["Properties"].get("SubnetIds", []))
        for r in resources
        if r["Type"] == "AWS::EC2::VPCEndpoint" and r["Properties"].get("VpcEndpointType") == "Interface"
    )
    keys = sum(1 for r in resources if r["Type"] == "AWS::KMS::Key")
    servers = tuple(
        r["Properties"].get("TrackingServerSize", "Small")  # CreateMlflowTrackingServer's default size
        for r in resources
        if r["Type"] == "AWS::SageMaker::MlflowTrackingServer"
    )
    return IdleCost(endpoint_zone_hours_per_hour=endpoint_zones, kms_keys=keys, mlflow_servers=servers)
