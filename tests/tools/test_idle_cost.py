"""The synth summary's idle monthly cost: what bills while no pipeline runs."""

from __future__ import annotations

from tools.idle_cost import ENDPOINT_AZ_HOUR_USD, HOURS_PER_MONTH, KMS_KEY_MONTH_USD, IdleCost, idle_cost
from tools.summarize import summarize


def test_dev_idles_for_its_key_and_the_logs_endpoint(dev):
    cost = idle_cost(list(dev.templates.values()))
    zones = dev.settings.network.max_azs
    assert cost == IdleCost(endpoint_zone_hours_per_hour=zones, kms_keys=1)  # network.interface_endpoints: logs
    assert cost.monthly_usd == zones * HOURS_PER_MONTH * ENDPOINT_AZ_HOUR_USD + KMS_KEY_MONTH_USD < 20


def test_the_sum_counts_each_endpoint_zone_hour():
    cost = IdleCost(endpoint_zone_hours_per_hour=12, kms_keys=1)
    assert cost.monthly_usd == 12 * HOURS_PER_MONTH * ENDPOINT_AZ_HOUR_USD + KMS_KEY_MONTH_USD


def test_the_summary_prints_the_idle_cost_with_its_prices(dev):
    text = summarize(dev.assembly)
    assert "idle monthly cost: $" in text and "list prices" in text
