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
    assert names == ["aks-nap", "capacity-buffer", "commitments-ri", "compare-eks",
                     "eks-scale-out-v1alpha5", "insufficient-capacity", "spot-interruption",
                     "topology-spread", "whatif-source"]
    for name in names:
        assert scenario.load(EXAMPLES / f"{name}.yaml").name == name


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
