"""The timeline's samples: nodes by NodePool and type and the NodeClaim count are recounted only after a
Node or NodeClaim changed, and always equal a fresh count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from karpy.api import labels
from karpy.kube import interface
from karpy.simulator import engine, scenario

EXAMPLES = Path(__file__).parents[3] / "examples"


def _fresh(sim: engine.Simulation) -> tuple[dict[str, int], dict[str, int], int]:
    by_pool: dict[str, int] = {}
    by_type: dict[str, int] = {}
    for n in sim.cluster.objects("Node"):
        lb = interface.labels_of(n)
        pool = lb.get(labels.NODEPOOL) or engine.UNMANAGED
        by_pool[pool] = by_pool.get(pool, 0) + 1
        it = lb.get(labels.INSTANCE_TYPE) or "(unknown)"
        by_type[it] = by_type.get(it, 0) + 1
    return by_pool, by_type, len(sim.cluster.objects("NodeClaim"))


def test_every_sample_counts_the_nodes_as_a_fresh_walk_does_and_only_walks_after_a_change(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sim = engine.Simulation(scenario.load(EXAMPLES / "balanced-consolidation.yaml"))
    walks: list[str] = []
    real = sim.cluster.objects

    def counted(kind: str) -> Any:
        walks.append(kind)
        return real(kind)

    original = engine.Simulation.sample
    checked = 0

    def sample(self: engine.Simulation) -> engine.Sample:
        nonlocal checked
        out = original(self)
        want = _fresh(self)
        assert (out.nodes_by_nodepool, out.nodes_by_instance_type, out.nodeclaims) == want
        assert list(out.nodes_by_nodepool) == list(want[0]) and list(out.nodes_by_instance_type) == list(want[1])
        checked += 1
        return out

    monkeypatch.setattr(engine.Simulation, "sample", sample)
    monkeypatch.setattr(sim.cluster, "objects", counted)
    sim.run()
    assert checked > 10
    walks.clear()
    original(sim)
    original(sim)  # nothing changed since the first: no walk at all
    assert walks == []
    sim.cluster.delete("Node", sim.cluster.objects("Node")[0]["metadata"]["name"])
    walks.clear()
    assert (original(sim).nodes_by_nodepool, ) == (_fresh(sim)[0], )
    assert "Node" in walks
