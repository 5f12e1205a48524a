"""``nodepool.counter``: a NodePool's ``status.nodes`` and ``status.resources`` follow its NodeClaims
(what ``kubectl get nodepools`` shows in its Nodes, CPU and Memory columns), without waking the
provisioner."""

from __future__ import annotations

from typing import Any

import pytest

from karpy import clock
from karpy.api import labels, quantity
from karpy.controllers import nodepool_counter, state
from karpy.kube import interface, memory

from ..disruption import test_consolidation as h

QUIET = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}


def pool_status(run: h.Run, name: str = "default") -> dict[str, Any]:
    return dict(run.sim.cluster.get("NodePool", name).get("status") or {})


def claims_of(run: h.Run, pool: str = "default") -> list[dict[str, Any]]:
    return [c for c in run.sim.cluster.list("NodeClaim") if interface.labels_of(c).get(labels.NODEPOOL) == pool]


def test_the_nodepool_status_counts_its_nodeclaims_and_their_capacity() -> None:
    run = h.Run(h.build([h.NODECLASS, h.nodepool(("fake-it-1",), disruption_=QUIET),
                         h.deployment("web", 3, "1000m")]))
    run.run_until(300)
    claims = claims_of(run)
    assert len(claims) >= 2
    status = pool_status(run)
    assert status["nodes"] == len(claims)
    cpu = sum(quantity.parse_milli(c["status"]["capacity"]["cpu"]) for c in claims)
    assert quantity.parse_milli(status["resources"]["cpu"]) == cpu
    assert status["resources"]["nodes"] == str(len(claims))
    assert set(nodepool_counter.BASE_RESOURCES) <= set(status["resources"])


def test_the_counts_go_down_when_the_nodes_go() -> None:
    run = h.Run(h.build([h.NODECLASS, h.nodepool(("fake-it-1",), disruption_=QUIET),
                         h.deployment("web", 2, "1000m")], [h.scale("5m", "web", 0)]))
    run.run_until(290)
    assert pool_status(run)["nodes"] == len(claims_of(run)) > 0
    run.run_until(900)
    assert claims_of(run) == []
    status = pool_status(run)
    assert status["nodes"] == 0
    assert {k: status["resources"][k] for k in ("cpu", "nodes")} == {"cpu": "0", "nodes": "0"}


def test_a_count_written_into_status_starts_no_provisioning_pass_and_is_corrected() -> None:
    run = h.Run(h.build([h.NODECLASS, h.nodepool(("fake-it-1",), disruption_=QUIET),
                         h.deployment("web", 1, "1000m")]))
    run.run_until(300)
    metrics = run.ctrl.metrics
    assert metrics is not None

    def passes() -> float:
        return metrics.value("karpenter_scheduler_scheduling_duration_seconds_count", controller="provisioner")

    before = passes()
    assert before >= 1
    run.sim.cluster.patch_status("NodePool", "default", {"status": {"nodes": 99}})
    run.run_until(400)
    assert pool_status(run)["nodes"] == 1  # the counter put the truth back
    assert passes() == before  # neither write woke the provisioner


def walk(counter: nodepool_counter.NodePoolCounter, pool: str) -> tuple[dict[str, int], int]:
    """The oracle: (resources, count) of ``pool`` by a walk over every NodeClaim."""
    total: dict[str, int] = dict.fromkeys(nodepool_counter.BASE_RESOURCES, 0)
    count = 0
    for claim in counter.state.nodeclaims():
        if claim.nodepool_name != pool:
            continue
        count += 1
        total = quantity.add(total, claim.status.capacity)
    total[nodepool_counter.NODES] = count * nodepool_counter.ONE
    return total, count


def test_the_kept_sums_count_what_a_walk_over_every_nodeclaim_counts(monkeypatch: Any) -> None:
    compared: list[tuple[dict[str, int], int]] = []
    kept = nodepool_counter.NodePoolCounter.counts

    def checked(self: nodepool_counter.NodePoolCounter, pool: str) -> tuple[dict[str, int], int]:
        out = kept(self, pool)
        assert self.manager is not None  # registered: the sums are kept from its NodeClaim watch
        assert out == walk(self, pool)
        compared.append(out)
        return out

    monkeypatch.setattr(nodepool_counter.NodePoolCounter, "counts", checked)
    run = h.Run(h.build([h.NODECLASS, h.nodepool(("fake-it-1", "fake-it-2"), disruption_=QUIET),
                         h.deployment("web", 4, "1000m"), h.deployment("db", 2, "1500m")],
                        [h.scale("4m", "web", 1), h.scale("8m", "db", 0), h.scale("9m", "web", 0)]))
    run.run_until(900)
    assert any(count > 0 for _, count in compared) and compared[-1][1] == 0


def test_an_unregistered_counter_refuses_to_count_since_no_watch_keeps_its_sums() -> None:
    cluster = memory.InMemoryCluster(clock.VirtualClock())
    counter = nodepool_counter.NodePoolCounter(cluster, state.ClusterState(cluster).start())
    with pytest.raises(RuntimeError, match="not registered"):
        counter.counts("default")
