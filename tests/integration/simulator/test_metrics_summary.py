"""A run's metrics summary reads only the samples it reports: the per-pod and per-node families
(one sample per object, hundreds of MB at 100,000 pods) are never built for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy.controllers import state_metrics
from karpy.simulator import engine, run_result, scenario

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "topology-spread.yaml"


def _sim() -> engine.Simulation:
    sim = engine.Simulation(scenario.load_text(EXAMPLE.read_text(), source=str(EXAMPLE)))
    sim.run()
    return sim


def test_a_snapshot_of_the_reported_samples_is_the_full_snapshot_filtered() -> None:
    sim = _sim()
    full = sim.metrics.snapshot()
    assert any(name.startswith("karpenter_pods_state") for name in full)
    assert sim.metrics.snapshot(run_result.reported) == {k: v for k, v in full.items() if run_result.reported(k)}
    assert sim.metrics.wanted is None  # a scrape after it gets every family again


def test_the_metrics_summary_builds_no_per_pod_family(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = _sim()
    calls: list[str] = []
    original = state_metrics.StateMetrics._pods

    def counted(self: state_metrics.StateMetrics) -> object:
        calls.append("pods")
        return original(self)

    monkeypatch.setattr(state_metrics.StateMetrics, "_pods", counted)
    summary = sim.metrics_summary()["karpenter"]
    assert "karpenter_cluster_utilization_percent" in summary
    assert calls == []
    sim.metrics.snapshot()
    assert calls == ["pods"]
