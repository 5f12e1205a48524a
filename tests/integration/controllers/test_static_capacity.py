"""Static NodePools (``spec.replicas``, feature gate StaticCapacity) on the in-memory cluster, virtual time.

Expectations from Karpenter v1.14's tests: ``pkg/controllers/static/provisioning/suite_test.go``
(scale up to replicas, limits.nodes, zero replicas, nothing while the gate is off since the controller is
not registered), ``static/deprovisioning/suite_test.go`` (scale down: unlaunched first, empty nodes
first, non-empty nodes when empty ones are not enough), ``disruption/staticdrift_test.go`` (drift
replaced one for one within budgets and limits) and ``disruption/consolidation.go`` ("Disable
consolidation for static NodePool").
"""

from __future__ import annotations

from typing import Any

from karpy import settings
from karpy.api import labels
from karpy.kube import interface

from . import builders as b

GATES = (("StaticCapacity", True),)


def _world(**kwargs: Any) -> b.World:
    gates = dict(settings.DEFAULT_FEATURE_GATES)
    gates.update(GATES)
    return b.make_world(settings_=settings.Settings(cluster_name="test", feature_gates=tuple(gates.items())),
                        **kwargs)


def _static_pool(name: str = "static", replicas: int = 3, **kwargs: Any) -> dict[str, Any]:
    pool = b.nodepool_manifest(name, **kwargs)
    pool["spec"]["replicas"] = replicas
    return pool


def _live(w: b.World, pool: str = "static") -> list[dict[str, Any]]:
    return [c for c in w.nodeclaims() if interface.labels_of(c).get(labels.NODEPOOL) == pool
            and not interface.is_terminating(c)]


def _scale(w: b.World, replicas: int, pool: str = "static") -> None:
    w.cluster.patch("NodePool", pool, {"spec": {"replicas": replicas}})


def test_a_static_nodepool_launches_its_replicas_with_no_pod_pending() -> None:
    """static/provisioning: "should create nodeclaims when current node count is less than desired replicas"."""
    w = _world()
    w.cluster.create(_static_pool(replicas=3))
    w.run_for(120)
    claims = _live(w)
    assert len(claims) == 3
    assert all(b.condition(c, "Initialized") == "True" for c in claims)
    assert len(w.nodes()) == 3


def test_every_node_is_the_cheapest_instance_type_the_template_admits() -> None:
    """static/provisioning: "should respect nodepool template specifications"; the cloud provider picks
    the cheapest compatible offering (Karpenter leaves the instance type to Create)."""
    w = _world()
    w.cluster.create(_static_pool(replicas=2, labels={"team": "web"}))
    w.run_for(120)
    pool = w.karpy.state.nodepool("static")
    assert pool is not None
    types = {t.name: min(o.price for o in t.offerings) for t in w.cloud.get_instance_types(pool)}
    cheapest = min(types, key=lambda n: (types[n], n))
    for claim in _live(w):
        assert interface.labels_of(claim)[labels.INSTANCE_TYPE] == cheapest
        assert interface.labels_of(claim)["team"] == "web"


def test_nothing_is_launched_while_the_feature_gate_is_off() -> None:
    """Karpenter registers the static controllers only with FEATURE_GATES StaticCapacity=true; the
    provisioner skips static NodePools whatever the gate."""
    w = b.make_world()
    w.cluster.create(_static_pool(replicas=3))
    w.run_for(120)
    assert w.nodeclaims() == []


def test_limits_nodes_bounds_a_static_nodepool() -> None:
    """static/provisioning: "should not create additional nodeclaims when node limits are reached"."""
    w = _world()
    w.cluster.create(_static_pool(replicas=3, limits={"nodes": "2"}))
    w.run_for(180)
    assert len(_live(w)) == 2


def test_zero_replicas_launch_nothing() -> None:
    """static/provisioning: "should handle zero replicas"."""
    w = _world()
    w.cluster.create(_static_pool(replicas=0))
    w.run_for(120)
    assert w.nodeclaims() == []


def test_raising_replicas_adds_nodes_and_lowering_them_removes_empty_nodes_first() -> None:
    """static/provisioning "should create additional nodeclaims to reach desired replicas";
    static/deprovisioning "should terminate excess nodeclaims" and "should prioritize empty nodes (with
    only daemonset pods) for termination"."""
    w = _world()
    w.cluster.create(_static_pool(replicas=2))
    w.run_for(120)
    _scale(w, 4)
    w.run_for(120)
    claims = _live(w)
    assert len(claims) == 4
    busy = [str((c.get("status") or {}).get("nodeName")) for c in claims[:2]]
    for i, node in enumerate(busy):
        w.cluster.create(b.running_pod(f"app-{i}", node))
    _scale(w, 2)
    w.run_for(300)
    left = _live(w)
    assert sorted(str((c.get("status") or {}).get("nodeName")) for c in left) == sorted(busy)
    ctl = w.karpy.static_capacity
    assert ctl is not None and len(ctl.deleted) == 2


def test_a_deleted_node_is_replaced_one_for_one() -> None:
    """A NodeClaim deleted by anyone (expiration, a user) is replaced (static/provisioning watches
    NodeClaim deletions)."""
    w = _world()
    w.cluster.create(_static_pool(replicas=2))
    w.run_for(120)
    victim = interface.name_of(_live(w)[0])
    w.cluster.delete("NodeClaim", victim)
    w.run_for(120)
    claims = _live(w)
    assert len(claims) == 2 and victim not in {interface.name_of(c) for c in claims}


def test_pending_pods_get_no_node_from_a_static_nodepool() -> None:
    """provisioner.go NewScheduler: static NodePools are filtered out."""
    w = _world()
    w.cluster.create(_static_pool(replicas=1))
    w.run_for(120)
    for i in range(12):
        w.cluster.create(b.pending_pod(f"big-{i}", cpu="3"))
    w.run_for(120)
    assert len(_live(w)) == 1
    assert len(w.nodeclaims()) == 1


def test_empty_static_nodes_are_never_consolidated() -> None:
    """consolidation.go ShouldDisrupt / emptiness.go: static NodePools are not disrupted for being empty
    or underutilized."""
    w = _world()
    pool = _static_pool(replicas=3)
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
    w.cluster.create(pool)
    w.run_for(900)
    assert len(_live(w)) == 3
    assert not [c for c in w.nodeclaims() if interface.is_terminating(c)]


def test_drifted_static_nodes_are_replaced_one_for_one_within_the_budget() -> None:
    """staticdrift_test: "should respect disruption budgets (Nodes Count) for static drift": with a
    Drifted budget of 2, two nodes are replaced at a time and the pool ends with its replicas, all new."""
    w = _world()
    pool = _static_pool(replicas=4)
    pool["spec"]["disruption"] = {"consolidateAfter": "Never",
                                  "budgets": [{"nodes": "2", "reasons": ["Drifted"]}]}
    w.cluster.create(pool)
    w.run_for(120)
    old = {interface.name_of(c) for c in _live(w)}
    assert len(old) == 4
    w.cluster.patch("NodePool", "static", {"spec": {"template": {"metadata": {"labels": {"rev": "2"}}}}})
    w.run_for(60)
    terminating = [c for c in w.nodeclaims() if interface.is_terminating(c) and interface.name_of(c) in old]
    held = [n for n in w.nodes() if (labels.TAINT_DISRUPTED, "NoSchedule") in b.taint_keys(n)]
    assert 0 < len(terminating) + len(held) <= 2
    w.run_for(1200)
    now = _live(w)
    assert len(now) == 4
    assert not old & {interface.name_of(c) for c in now}
    assert all(interface.labels_of(c).get("rev") == "2" for c in now)


def test_drift_acquires_limits_nodes_before_replacing() -> None:
    """staticdrift_test: "should not drift nodes when we cannot acquire limits" (replicas = limit)."""
    w = _world()
    pool = _static_pool(replicas=2, limits={"nodes": "2"})
    pool["spec"]["disruption"] = {"consolidateAfter": "Never"}
    w.cluster.create(pool)
    w.run_for(120)
    old = {interface.name_of(c) for c in _live(w)}
    w.cluster.patch("NodePool", "static", {"spec": {"template": {"metadata": {"labels": {"rev": "2"}}}}})
    w.run_for(600)
    assert {interface.name_of(c) for c in _live(w)} == old


def test_expired_static_nodes_are_replaced_one_for_one() -> None:
    """Expiration deletes the NodeClaim (forceful, Karpenter's expiration controller); static provisioning,
    which watches NodeClaim deletions, launches its replacement: the pool never stays short."""
    w = _world()
    pool = _static_pool(replicas=2)
    pool["spec"]["template"]["spec"]["expireAfter"] = "10m"
    w.cluster.create(pool)
    w.run_for(120)
    first = {interface.name_of(c) for c in _live(w)}
    assert len(first) == 2
    w.run_for(600)
    now = {interface.name_of(c) for c in _live(w)}
    assert len(now) == 2 and not first & now
    ctl = w.karpy.static_capacity
    assert ctl is not None and len(ctl.created) == 4
