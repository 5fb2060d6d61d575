"""The synth summary's idle monthly cost: what bills while no pipeline runs."""

from __future__ import annotations

from tools.idle_cost import ENDPOINT_AZ_HOUR_USD, HOURS_PER_MONTH, KMS_KEY_MONTH_USD, IdleCost, idle_cost
from tools.summarize import summarize


def test_dev_idles_under_five_dollars_a_month(dev):
    cost = idle_cost(list(dev.templates.values()))
    assert cost == IdleCost(endpoint_zone_hours_per_hour=0, kms_keys=1)
    assert cost.monthly_usd == KMS_KEY_MONTH_USD < 5


def test_the_sum_counts_each_endpoint_zone_hour():
    cost = IdleCost(endpoint_zone_hours_per_hour=12, kms_keys=1)
    assert cost.monthly_usd == 12 * HOURS_PER_MONTH * ENDPOINT_AZ_HOUR_USD + KMS_KEY_MONTH_USD


def test_the_summary_prints_the_idle_cost_with_its_prices(dev):
    text = summarize(dev.assembly)
    assert "idle monthly cost: $" in text and "list prices" in text
