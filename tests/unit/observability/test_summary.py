"""Summaries with quantiles, as Karpenter's dashboards read them (``{quantile="0.5"}``)."""

from __future__ import annotations

import math

import prometheus_client
import pytest

from karpy import clock
from karpy.observability import summary


def test_quantiles_are_over_the_last_ten_minutes_and_sum_and_count_over_all_time() -> None:
    c = clock.VirtualClock()
    s = summary.QuantileSummary("x_seconds", "x", ("nodepool",), c.now)
    for v in range(1, 101):
        s.observe(float(v), "default")
    q = s.quantiles("default")
    assert (q[0.0], q[0.5], q[0.9], q[0.99], q[1.0]) == (1.0, 50.0, 90.0, 99.0, 100.0)
    c.advance(601.0)
    s.observe(7.0, "default")
    assert s.quantiles("default") == {o: 7.0 for o in summary.OBJECTIVES}
    registry = prometheus_client.CollectorRegistry()
    registry.register(s)
    text = prometheus_client.generate_latest(registry).decode()
    assert '# TYPE x_seconds summary' in text
    assert 'x_seconds{nodepool="default",quantile="0.5"} 7.0' in text
    assert 'x_seconds_count{nodepool="default"} 101.0' in text
    assert 'x_seconds_sum{nodepool="default"} 5057.0' in text


def test_an_empty_window_gives_nan_quantiles_and_wrong_label_counts_are_refused() -> None:
    c = clock.VirtualClock()
    s = summary.QuantileSummary("y", "y", (), c.now, max_samples=3)
    assert all(math.isnan(v) for v in s.quantiles().values())
    for v in (5.0, 1.0, 2.0, 3.0):  # at most 3 kept: the oldest (5) goes
        s.observe(v)
    assert s.quantiles()[1.0] == 3.0
    with pytest.raises(ValueError, match="labels"):
        s.observe(1.0, "extra")
