"""A Prometheus summary with quantiles, as Karpenter's ``opmetrics.NewPrometheusSummary`` exports them.

``prometheus_client``'s ``Summary`` has no quantiles, yet Karpenter's dashboards read
``karpenter_nodes_termination_duration_seconds{quantile="0.5"}``. :class:`QuantileSummary` keeps the
observations of the last ``max_age`` seconds of an injected clock (client_golang's default window,
10 minutes) per label set, at most ``max_samples`` of them (the oldest go first), and exposes
``name{quantile="q"}`` for Karpenter's objectives (0, 0.5, 0.9, 0.99, 1), ``name_sum`` and
``name_count`` (both over all time, as client_golang does). Quantiles are exact over the window
(nearest rank), where client_golang's are within its 1 % error objective.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client import core as prom_core

OBJECTIVES = (0.0, 0.5, 0.9, 0.99, 1.0)
"""Karpenter's ``metrics.SummaryObjectives()`` quantiles."""
MAX_AGE = 600.0
MAX_SAMPLES = 10_000


class _Series:
    __slots__ = ("count", "total", "window")

    def __init__(self) -> None:
        self.window: deque[tuple[float, float]] = deque()
        self.count = 0
        self.total = 0.0


class QuantileSummary:
    """A registered summary collector; :meth:`observe` one value for one label set."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], now: Callable[[], float], *,
                 max_age: float = MAX_AGE, max_samples: int = MAX_SAMPLES) -> None:
        self.name, self.documentation = name, documentation
        self.labelnames = tuple(labelnames)
        self.now = now
        self.max_age, self.max_samples = max_age, max_samples
        self._series: dict[tuple[str, ...], _Series] = {}

    def observe(self, value: float, *labelvalues: str) -> None:
        if len(labelvalues) != len(self.labelnames):
            raise ValueError(f"{self.name}: labels {self.labelnames} expected, found {labelvalues}")
        series = self._series.setdefault(tuple(labelvalues), _Series())
        series.window.append((self.now(), value))
        if len(series.window) > self.max_samples:
            series.window.popleft()
        series.count += 1
        series.total += value

    def quantiles(self, *labelvalues: str) -> dict[float, float]:
        """Each objective's value over the window (NaN when the window is empty)."""
        series = self._series.get(tuple(labelvalues))
        if series is None:
            return {q: math.nan for q in OBJECTIVES}
        cutoff = self.now() - self.max_age
        while series.window and series.window[0][0] < cutoff:
            series.window.popleft()
        values = sorted(v for _, v in series.window)
        out: dict[float, float] = {}
        for q in OBJECTIVES:
            if not values:
                out[q] = math.nan
            else:
                rank = min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))
                out[q] = values[rank]
        return out

    def describe(self) -> list[Any]:
        return [prom_core.SummaryMetricFamily(self.name, self.documentation, labels=list(self.labelnames))]

    def collect(self) -> Iterator[Any]:
        family = prom_core.Metric(self.name, self.documentation, "summary")
        for labelvalues, series in sorted(self._series.items()):
            labels = dict(zip(self.labelnames, labelvalues, strict=True))
            for q, v in self.quantiles(*labelvalues).items():
                family.add_sample(self.name, {**labels, "quantile": _format(q)}, v)
            family.add_sample(self.name + "_sum", labels, series.total)
            family.add_sample(self.name + "_count", labels, float(series.count))
        yield family


def _format(q: float) -> str:
    return "0" if q == 0 else "1" if q == 1 else repr(q)
