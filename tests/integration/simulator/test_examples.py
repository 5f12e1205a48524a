"""Each example scenario in ``examples/`` has the outcome its comment promises."""

from __future__ import annotations

import collections
import functools
import pathlib
from typing import Any

from karpy.simulator import engine, scenario

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"


@functools.cache
def run(name: str) -> engine.Result:
    return engine.Simulation(scenario.load(EXAMPLES / f"{name}.yaml")).run()


def label(obj: dict[str, Any], key: str) -> str:
    return str(obj["metadata"].get("labels", {}).get(key, ""))


def pods_of(result: engine.Result, prefix: str) -> list[dict[str, Any]]:
    return [p for p in result.objects["pods"] if p["metadata"]["name"].startswith(prefix + "-")]


def expect_all_running(pods: list[dict[str, Any]], count: int) -> None:
    assert len(pods) == count
    assert all(p["status"].get("phase") == "Running" for p in pods), [
        (p["metadata"]["name"], p["status"].get("phase")) for p in pods]


def karpy_nodes(result: engine.Result) -> list[dict[str, Any]]:
    return [n for n in result.objects["nodes"] if label(n, "karpenter.sh/nodepool")]


def test_every_example_loads_without_errors() -> None:
    names = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
    assert names == ["aks-nap", "balanced-consolidation", "capacity-buffer", "capacity-reservation", "commitments-ri",
                     "compare-eks", "dra-pending", "drift-waves", "eks-scale-out-v1alpha5", "insufficient-capacity",
                     "node-overlay", "spot-interruption", "spot-share", "static-capacity", "topology-spread",
                     "volume-attach-limits", "whatif-source"]
    for name in names:
        assert scenario.load(EXAMPLES / f"{name}.yaml").name == name


def test_the_node_overlay_example_launches_the_type_its_overlay_makes_cheapest_and_reports_the_conflict() -> None:
    sim = engine.Simulation(scenario.load(EXAMPLES / "node-overlay.yaml"))
    result = sim.run()
    assert {label(n, "node.kubernetes.io/instance-type") for n in karpy_nodes(result)} == {"m6i.large"}
    expect_all_running(pods_of(result, "api"), 4)
    expect_all_running(pods_of(result, "builder"), 2)  # smarter-devices/fuse: only the m6i overlay adds it
    status = {c["type"]: c for c in sim.cluster.get("NodeOverlay", "prefer-m5")["status"]["conditions"]}
    assert (status["ValidationSucceeded"]["status"], status["ValidationSucceeded"]["reason"]) == ("False", "Conflict")


def test_the_eks_scale_out_example_launches_only_on_demand_r5_large() -> None:
    result = run("eks-scale-out-v1alpha5")
    assert result.metrics["simulator"]["instancesLaunched"] == 3
    assert {label(n, "node.kubernetes.io/instance-type") for n in karpy_nodes(result)} <= {"r5.large"}
    assert max(s.nodes_by_nodepool.get("default", 0) for s in result.timeline) == 3
    expect_all_running(pods_of(result, "app"), 1)


def test_the_aks_example_launches_d_family_on_demand_vms_for_all_replicas() -> None:
    result = run("aks-nap")
    nodes = karpy_nodes(result)
    assert nodes
    assert {label(n, "karpenter.azure.com/sku-family") for n in nodes} == {"D"}
    assert {label(n, "karpenter.sh/capacity-type") for n in nodes} == {"on-demand"}
    assert all(n["spec"]["providerID"].startswith("azure:///subscriptions/") for n in nodes)
    at_9m = next(s for s in result.timeline if s.t == 540.0)
    assert at_9m.pending_pods == 0
    assert at_9m.running_pods == 12
    expect_all_running(pods_of(result, "web"), 2)


def test_the_spot_example_replaces_the_interrupted_node_and_every_replica_runs_again() -> None:
    result = run("spot-interruption")
    assert any("SpotInterruption for node" in n["message"] and n["t"] == 300.0 for n in result.notes)
    sim = result.metrics["simulator"]
    assert sim["instancesTerminated"] >= 1
    assert sim["instancesLaunched"] > sim["instancesTerminated"]
    assert {label(n, "karpenter.sh/capacity-type") for n in karpy_nodes(result)} == {"spot"}
    # the notice at 5m (karpy drains the node) or the reclaim two minutes later displaces pods
    assert all(s.pending_pods == 0 for s in result.timeline if 120.0 <= s.t < 300.0)
    assert any(s.pending_pods > 0 for s in result.timeline if 300.0 <= s.t <= 480.0)
    expect_all_running(pods_of(result, "worker"), 6)


def test_the_insufficient_capacity_example_never_launches_the_exhausted_type() -> None:
    result = run("insufficient-capacity")
    types = {label(n, "node.kubernetes.io/instance-type") for n in karpy_nodes(result)}
    assert types
    assert "c5.large" not in types
    assert types <= {"c5.xlarge", "m5.large", "m5.xlarge"}
    expect_all_running(pods_of(result, "api"), 4)


def test_the_topology_spread_example_launches_a_node_in_every_zone_and_runs_every_pod() -> None:
    result = run("topology-spread")
    claims = result.objects["nodeclaims"]
    assert sorted(label(c, "topology.kubernetes.io/zone") for c in claims) == ["us-east-1a", "us-east-1b",
                                                                               "us-east-1c"]
    expect_all_running(pods_of(result, "zonal"), 6)


def test_the_topology_spread_example_puts_two_pods_in_each_zone() -> None:
    result = run("topology-spread")
    zone_of = {n["metadata"]["name"]: label(n, "topology.kubernetes.io/zone") for n in result.objects["nodes"]}
    per_zone = collections.Counter(zone_of[p["spec"]["nodeName"]] for p in pods_of(result, "zonal"))
    assert per_zone == {"us-east-1a": 2, "us-east-1b": 2, "us-east-1c": 2}


def test_the_aks_example_removes_the_vms_emptied_by_the_scale_down() -> None:
    result = run("aks-nap")
    assert len(karpy_nodes(result)) <= 1


def test_the_whatif_source_example_leaves_underused_nodes_for_consolidation_to_find() -> None:
    result = run("whatif-source")
    expect_all_running(pods_of(result, "web"), 4)
    assert len(karpy_nodes(result)) == 3  # consolidateAfter 10m: nothing consolidated by 6m
    assert not [e for e in result.events if e["reason"] == "DisruptionTerminating"]


def test_the_static_capacity_example_keeps_the_warm_pool_at_its_replicas() -> None:
    """The warm pool has 3 nodes, then 5 after the scale step, then 2; the burst pool takes the pods
    that do not fit (Karpenter v1.14 static NodePools)."""
    result = run("static-capacity")
    warm = [s.nodes_by_nodepool.get("warm", 0) for s in result.timeline]
    assert max(warm) == 5
    assert [label(n, "karpenter.sh/nodepool") for n in karpy_nodes(result)].count("warm") == 2
    assert any(label(n, "karpenter.sh/nodepool") == "burst" for n in karpy_nodes(result))
    expect_all_running(pods_of(result, "web"), 6)


def test_the_balanced_example_replaces_the_eager_node_and_keeps_the_balanced_one() -> None:
    """Replacing r6i.2xlarge by m6i.2xlarge saves 24%: WhenEmptyOrUnderutilized does it, Balanced scores
    it 0.24 < 1/2 and refuses (Karpenter v1.14 balanced.go, k = 2)."""
    result = run("balanced-consolidation")
    types = {label(n, "karpenter.sh/nodepool"): label(n, "node.kubernetes.io/instance-type")
             for n in karpy_nodes(result)}
    assert types == {"eager": "m6i.2xlarge", "balanced": "r6i.2xlarge"}
    moves = result.metrics["karpenter"]["karpenter_consolidation_moves_total"]
    # every policy's moves count; only Balanced ones are scored (Karpenter's balancedEvaluator)
    assert {(r["labels"]["policy"], r["labels"]["decision"]) for r in moves} == {
        ("Balanced", "rejected"), ("WhenEmptyOrUnderutilized", "approved")}


def test_the_dra_example_leaves_only_the_claiming_pods_pending_with_karpenters_reason() -> None:
    result = run("dra-pending")
    expect_all_running(pods_of(result, "web"), 3)
    trainers = [p for p in result.objects["pods"] if p["metadata"]["name"].startswith("trainer-")]
    assert len(trainers) == 2 and all(p["status"].get("phase") == "Pending" for p in trainers)
    failed = [e for e in result.events if e.get("reason") == "FailedScheduling" and e.get("source") == "karpenter"]
    assert failed and all("Dynamic Resource Allocation" in e["message"] for e in failed)


def test_the_drift_waves_example_replaces_nine_drifted_nodes_in_three_settled_waves_of_three() -> None:
    """karpy.io/drift-max-surge "3" and karpy.io/drift-wave-settle 2m: the replacements are launched three at
    a time, each wave two minutes or more after the previous wave's old nodes were gone (drained)."""
    result = run("drift-waves")
    claims = result.nodeclaims
    old = [c for c in claims if c["created"] < 600]
    new = [c for c in claims if c["created"] >= 600]
    assert len(old) == 9 and all(c["deleted"] is not None for c in old)
    waves: dict[float, list[dict[str, Any]]] = collections.defaultdict(list)
    for c in new:
        waves[c["created"]].append(c)
    starts = sorted(waves)
    assert [len(waves[t]) for t in starts] == [3, 3, 3]
    replaced = sorted((c for c in old), key=lambda c: c["deleted"])
    for i in range(1, 3):
        previous_gone = max(c["deleted"] for c in replaced[3 * (i - 1):3 * i])
        assert starts[i] >= previous_gone + 120, (starts[i], previous_gone)
    assert all(c["deleted"] is None for c in new)
    assert {label(n, "release") for n in karpy_nodes(result)} == {"2"}
    expect_all_running(pods_of(result, "web"), 9)
