"""The disrupted taint is written with an optimistic lock (issue 19): a taint another controller adds
between karpy's read and its write survives (Karpenter writes it with ``MergeFromWithOptimisticLock``)."""

from __future__ import annotations

from typing import Any

from karpy import clock
from karpy.disruption import orchestrator
from karpy.kube import events, memory

UNINITIALIZED = {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}


class RacingCluster(memory.InMemoryCluster):
    """Another controller adds a taint right after karpy's first read of the node."""

    def __init__(self, vclock: clock.VirtualClock) -> None:
        super().__init__(vclock)
        self.raced = False

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        obj = super().get(kind, name, namespace)
        if kind == "Node" and not self.raced:
            self.raced = True
            other = super().get(kind, name, namespace)
            other["spec"]["taints"] = [*other["spec"].get("taints", []), UNINITIALIZED]
            self.update(other)
        return obj


def _keys(cluster: memory.InMemoryCluster) -> list[str]:
    return [t["key"] for t in cluster.get("Node", "n1")["spec"].get("taints", [])]


def _setup(taints: list[dict[str, Any]]) -> tuple[RacingCluster, orchestrator.Orchestrator]:
    vclock = clock.VirtualClock()
    cluster = RacingCluster(vclock)
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"taints": taints}})
    return cluster, orchestrator.Orchestrator(cluster, vclock, events.EventRecorder(cluster, vclock))


def test_a_taint_added_concurrently_survives_the_disrupted_taint() -> None:
    cluster, orch = _setup([])
    assert orch._taint("n1", add=True)
    assert cluster.raced
    assert sorted(_keys(cluster)) == ["karpenter.sh/disrupted", UNINITIALIZED["key"]]


def test_a_taint_added_concurrently_survives_removing_the_disrupted_taint() -> None:
    cluster, orch = _setup([dict(orchestrator.DISRUPTED_TAINT)])
    assert orch._taint("n1", add=False)
    assert cluster.raced
    assert _keys(cluster) == [UNINITIALIZED["key"]]
