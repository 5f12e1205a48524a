"""The consolidation snapshot and the what-if removal simulation.

The builders at the top are shared with ``test_consolidation.py``: typed Nodes, NodeClaims, pods
and NodePools around hand-built instance types (``tests/unit/provisioning/builders.make_type``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from karpy.api import labels as wk
from karpy.api import meta, node, nodeclaim, nodepool, pod, quantity
from karpy.cloudprovider import instancetype
from karpy.disruption import candidates, simulation, snapshot

from ..provisioning import builders as pb

ZONE = "zone-a"
ON_DEMAND = wk.CAPACITY_TYPE_ON_DEMAND
SPOT = wk.CAPACITY_TYPE_SPOT

# -- builders ------------------------------------------------------------------------------------


def make_pool(name: str = "default", *, capacity_types: Sequence[str] = (ON_DEMAND,), budget: str = "100%",
              policy: str = nodepool.WHEN_EMPTY_OR_UNDERUTILIZED, limits: Mapping[str, str] | None = None,
              ) -> nodepool.NodePool:
    body: dict[str, Any] = {
        "template": {"spec": {
            "requirements": [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": list(capacity_types)}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
        "disruption": {"consolidationPolicy": policy, "consolidateAfter": "0s", "budgets": [{"nodes": budget}]},
    }
    if limits:
        body["limits"] = dict(limits)
    return nodepool.NodePool.from_manifest({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                            "metadata": {"name": name}, "spec": body})


def make_type(name: str, cpu: float, price: float, *, memory_gi: float = 64,
              capacity_types: Sequence[str] = (ON_DEMAND,)) -> instancetype.InstanceType:
    return pb.make_type(name, cpu=cpu, memory_gi=memory_gi, price=price, zones=(ZONE, "zone-b"),
                        capacity_types=capacity_types)


def running(name: str, node_name: str, *, cpu: str = "1", memory: str = "128Mi", owner: str = "ReplicaSet",
            priority: int | None = None, phase: str = "Running", **spec: Any) -> pod.Pod:
    p = pb.make_pod(name, cpu=cpu, memory=memory, **spec)
    refs = (meta.OwnerReference(api_version="apps/v1", kind=owner, name=f"{name}-owner", uid="u",
                                controller=True),)
    return dataclasses.replace(p, node_name=node_name, phase=phase, priority=priority,
                               metadata=dataclasses.replace(p.metadata, owner_references=refs))


def make_node(name: str, t: instancetype.InstanceType, *, pool: str = "default", capacity_type: str = ON_DEMAND,
              created: float = 0.0, deleting: bool = False, labels: Mapping[str, str] | None = None,
              ) -> tuple[node.Node, nodeclaim.NodeClaim]:
    lbls = {wk.HOSTNAME: name, wk.NODEPOOL: pool, wk.INITIALIZED: "true", wk.ZONE: ZONE,
            wk.CAPACITY_TYPE: capacity_type, **t.labels, **(labels or {})}
    md = meta.ObjectMeta(name=name, labels=lbls, creation_timestamp=created,
                         deletion_timestamp=1.0 if deleting else None)
    n = node.Node(metadata=md, capacity=dict(t.capacity), allocatable=dict(t.allocatable),
                  conditions={"Ready": "True"})
    claim = nodeclaim.NodeClaim(
        metadata=meta.ObjectMeta(name=name, labels={wk.NODEPOOL: pool}, creation_timestamp=created),
        status=nodeclaim.NodeClaimStatus(node_name=name))
    return n, claim


Entry = tuple[node.Node, nodeclaim.NodeClaim, Sequence[pod.Pod]]


def cluster(entries: Sequence[Entry], types: Sequence[instancetype.InstanceType],
            pools: Sequence[nodepool.NodePool] | None = None, **kwargs: Any,
            ) -> tuple[snapshot.ClusterSnapshot, list[candidates.Candidate]]:
    """A snapshot of ``entries`` and every entry that is a disruption candidate."""
    pools = list(pools) if pools is not None else [make_pool()]
    snap = snapshot.ClusterSnapshot.build(entries, pools, {p.name: list(types) for p in pools}, **kwargs)
    by_name = {p.name: p for p in pools}
    cands = []
    for n, claim, pods in entries:
        c = candidates.candidate(n, claim, by_name.get(n.labels[wk.NODEPOOL]), pods)
        if isinstance(c, candidates.Candidate):
            cands.append(c)
    return snap, cands


def entry(name: str, t: instancetype.InstanceType, pods: Sequence[pod.Pod], **kwargs: Any) -> Entry:
    n, claim = make_node(name, t, **kwargs)
    return n, claim, list(pods)


CATALOG = [make_type("small", 2, 0.10), make_type("medium", 4, 0.20), make_type("large", 16, 0.85)]
SMALL, MEDIUM, LARGE = CATALOG


# -- snapshot ------------------------------------------------------------------------------------


def test_a_nodes_price_is_the_price_of_the_offering_it_runs_on() -> None:
    both = make_type("both", 4, 0.20, capacity_types=(ON_DEMAND, SPOT))
    spot_type = both.with_offerings(tuple(
        dataclasses.replace(o, price=0.07) if o.capacity_type == SPOT else o for o in both.offerings))
    snap, _ = cluster([entry("od", spot_type, []), entry("sp", spot_type, [], capacity_type=SPOT)], [spot_type])
    assert snap.price_of("od") == pytest.approx(0.20)
    assert snap.price_of("sp") == pytest.approx(0.07)
    info = snap.node("sp")
    assert info is not None and info.instance_type == spot_type and info.capacity_type == SPOT


def test_an_unknown_instance_type_leaves_the_price_unknown() -> None:
    snap, _ = cluster([entry("n1", make_type("retired", 4, 0.2), [])], CATALOG)
    assert snap.price_of("n1") is None


def test_daemonset_finished_and_mirror_pods_are_not_rescheduled() -> None:
    pods = [running("web", "n1"), running("ds", "n1", owner="DaemonSet"),
            running("done", "n1", phase="Succeeded"), running("static", "n1", owner="Node")]
    snap, _ = cluster([entry("n1", MEDIUM, pods)], CATALOG)
    assert [p.name for p in snap.pods_to_reschedule(["n1"])] == ["web"]


def test_existing_nodes_leave_out_excluded_and_deleting_nodes() -> None:
    snap, _ = cluster([entry("n1", MEDIUM, []), entry("n2", MEDIUM, []), entry("gone", MEDIUM, [], deleting=True)],
                      CATALOG)
    assert [e.name for e in snap.existing_nodes(["n1"])] == ["n2"]
    assert snap.deleting_nodes() == ["gone"]


def test_budgets_count_the_snapshots_nodes_of_each_nodepool() -> None:
    entries = [entry(f"n{i}", MEDIUM, []) for i in range(15)]
    snap, _ = cluster(entries, CATALOG, [make_pool(budget="10%")])
    assert snap.allowed_disruptions(nodepool.REASON_UNDERUTILIZED) == {"default": 2}


# -- simulation ----------------------------------------------------------------------------------


def test_pods_that_fit_on_other_nodes_need_no_new_claim() -> None:
    snap, cands = cluster([entry("n1", MEDIUM, [running("a", "n1")], created=0.0),
                           entry("n2", MEDIUM, [running("b", "n2")], created=1.0)], CATALOG)
    sim = simulation.simulate_removal(snap, [cands[0]])
    assert sim.all_placed and not sim.new_claims
    assert [p.name for p in sim.placements["n2"]] == ["a"]
    assert sim.cost_before == pytest.approx(0.20) and sim.cost_after == 0.0
    assert sim.savings == pytest.approx(0.20)


def test_a_node_being_deleted_takes_no_pods() -> None:
    snap, _ = cluster([entry("n1", MEDIUM, [running("a", "n1", cpu="1500m")]),
                       entry("gone", LARGE, [], deleting=True)], CATALOG)
    sim = simulation.simulate_removal(snap, ["n1"])
    assert "gone" not in sim.placements
    assert len(sim.new_claims) == 1
    assert sim.new_claims[0].instance_types[0].name == "small"
    assert sim.cost_after == pytest.approx(0.10)


def test_claims_for_pending_pods_alone_do_not_count_against_the_removal() -> None:
    pending = pb.make_pod("pending", cpu="3")
    snap, _ = cluster([entry("n1", MEDIUM, [running("a", "n1")]), entry("n2", MEDIUM, [])], CATALOG,
                      pending_pods=[pending])
    sim = simulation.simulate_removal(snap, ["n1"])
    assert sim.all_placed
    assert not sim.new_claims
    assert "default/a" in {p.key for pods in sim.placements.values() for p in pods}


def test_a_pod_that_fits_nowhere_is_reported_unplaced() -> None:
    pinned = running("pinned", "n1", nodeSelector={"disk": "local"})
    snap, _ = cluster([entry("n1", MEDIUM, [pinned], labels={"disk": "local"}), entry("n2", LARGE, [])], CATALOG)
    sim = simulation.simulate_removal(snap, ["n1"])
    assert not sim.all_placed
    assert set(sim.unplaced) == {"default/pinned"}


def test_removed_nodes_give_their_capacity_back_to_the_nodepool_limits() -> None:
    pool = make_pool(limits={"cpu": "16"})
    snap, _ = cluster([entry("n1", LARGE, [running("a", "n1", cpu="1500m")])], CATALOG, [pool])
    assert snap.usage["default"]["cpu"] == 16 * quantity.MILLI
    sim = simulation.simulate_removal(snap, ["n1"])
    assert sim.all_placed and len(sim.new_claims) == 1


def test_a_fit_check_without_nodepools_uses_only_existing_and_planned_nodes() -> None:
    snap, _ = cluster([entry("n1", MEDIUM, [running("a", "n1", cpu="3")]), entry("n2", MEDIUM, [])], CATALOG)
    assert simulation.simulate_removal(snap, ["n1", "n2"], with_nodepools=False).unplaced.keys() == {"default/a"}
    planned = pb.existing_node("planned", cpu=4, zone=ZONE, in_flight=True)
    sim = simulation.simulate_removal(snap, ["n1", "n2"], with_nodepools=False, extra_nodes=[planned])
    assert sim.all_placed and [p.name for p in sim.placements["planned"]] == ["a"]


def test_with_preference_policy_ignore_a_what_if_run_does_not_follow_a_preferred_node_affinity() -> None:
    """Karpenter v1.14.3 ``disruption/helpers.go`` SimulateScheduling: PreferencePolicyIgnore ->
    ``scheduling.IgnorePreferences`` in consolidation's scheduling simulation too."""
    prefer_large = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [
            {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["large"]}]}}]}}
    snap, _ = cluster([entry("n1", LARGE, [running("web", "n1", affinity=prefer_large)])], CATALOG)
    respect = simulation.simulate_removal(snap, ["n1"])
    ignore = simulation.simulate_removal(dataclasses.replace(snap, ignore_preferences=True), ["n1"])
    assert [t.name for t in respect.new_claims[0].instance_types][:1] == ["large"]
    assert ignore.new_claims[0].instance_types[0].name == "small"
    assert ignore.cost_after < respect.cost_after
