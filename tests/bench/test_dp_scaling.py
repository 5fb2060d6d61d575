"""The DP benchmark's padding ceiling: 1 when lengths are equal, below 1 when paired batches differ."""

from __future__ import annotations

import pytest

from bench.common import squad_like_lengths
from bench.dp_scaling import padding_ceiling


def test_equal_lengths_cost_nothing():
    assert padding_ceiling([128] * 64, batch=8) == pytest.approx(1.0)


def test_mixed_lengths_cap_the_efficiency_and_larger_datasets_raise_the_cap():
    small = padding_ceiling(squad_like_lengths(160), batch=8)
    large = padding_ceiling(squad_like_lengths(3200), batch=8)
    assert 0.5 < small < 0.95
    assert small < large <= 1.0
