"""What a deployed environment costs per month while no pipeline runs, from its synthesized templates.

List prices, us-east-1, read 2026-11-30 (other regions differ by a few percent):
- AWS PrivateLink interface endpoint: $0.01 per endpoint per Availability Zone per hour,
  https://aws.amazon.com/privatelink/pricing/ (data processed, $0.01/GB, is not idle cost).
- AWS KMS customer managed key: $1.00 per key per month (each rotated key version adds $1.00 per month for
  its first two rotations), https://aws.amazon.com/kms/pricing/
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
PRICES_AS_OF = "2026-11-30, us-east-1 list prices (aws.amazon.com/privatelink/pricing, aws.amazon.com/kms/pricing)"


@dataclass(frozen=True)
class IdleCost:
    """Billed-while-idle items of one environment."""

    endpoint_zone_hours_per_hour: int
    kms_keys: int

    @property
    def monthly_usd(self) -> float:
        endpoints = self.endpoint_zone_hours_per_hour * HOURS_PER_MONTH * ENDPOINT_AZ_HOUR_USD
        return endpoints + self.kms_keys * KMS_KEY_MONTH_USD

    def describe(self) -> str:
        return (
            f"idle monthly cost: ${self.monthly_usd:.2f} = {self.kms_keys} KMS key(s) x ${KMS_KEY_MONTH_USD:.2f} + "
            f"{self.endpoint_zone_hours_per_hour} interface-endpoint zone(s) x {HOURS_PER_MONTH} h x "
            f"${ENDPOINT_AZ_HOUR_USD:.2f} (prices: {PRICES_AS_OF})"
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
    return IdleCost(endpoint_zone_hours_per_hour=endpoint_zones, kms_keys=keys)
