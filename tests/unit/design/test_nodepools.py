"""A design applied to the input's NodePool: what each variable writes, and what stays."""

from __future__ import annotations

from typing import Any

from karpy.api import nodepool as nodepool_mod
from karpy.design import inputs, nodepools, space
from karpy.simulator import scenario
from support import design_workload


def _target(variables: str) -> tuple[nodepools.Target, scenario.Scenario]:
    sp = space.parse("apiVersion: karpy.io/v1alpha1\nkind: DesignSpace\nmetadata: {name: s}\nspec:\n"
                     "  variables:\n" + variables)
    scn = inputs.load([("tiny.yaml", design_workload.SCENARIO)], trace=("t.csv", design_workload.TRACE_CSV),
                      until=1200)
    return nodepools.resolve(sp, scn), scn


def _reqs(pool: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [(r["key"], r["operator"], r["values"]) for r in pool["spec"]["template"]["spec"]["requirements"]]


def test_a_design_replaces_the_base_requirement_in_place_and_keeps_the_constants() -> None:
    target, _ = _target("    instanceCategory: [[m], [c]]\n    instanceGeneration: [6]\n"
                        "    consolidateAfter: [30s]\n    budgets: ['20%']\n    expireAfter: [24h]\n")
    [pool] = nodepools.apply({"instanceCategory": ["m"], "instanceGeneration": 6, "consolidateAfter": "30s",
                              "budgets": "20%", "expireAfter": "24h"}, target)
    assert _reqs(pool) == [
        ("karpenter.sh/capacity-type", "In", ["on-demand"]),
        ("karpenter.k8s.aws/instance-category", "In", ["m"]),
        ("karpenter.k8s.aws/instance-size", "In", ["large", "xlarge", "2xlarge"]),
        ("karpenter.k8s.aws/instance-generation", "Gt", ["5"])]
    assert pool["spec"]["disruption"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                          "consolidateAfter": "30s", "budgets": [{"nodes": "20%"}]}
    assert pool["spec"]["template"]["spec"]["expireAfter"] == "24h"
    assert pool["metadata"] == {"name": "general"}
    assert _reqs(target.base)[1] == ("karpenter.k8s.aws/instance-category", "In", ["c", "m"])  # not changed


def test_a_spot_share_splits_the_pool_with_a_cpu_limit_of_that_share_of_the_peak() -> None:
    target, _ = _target("    spotShare: [0, 0.5, 1]\n")
    # peak: web 10 x 1 CPU + worker 2 x 2 CPU = 14 cores (at 5m)
    assert target.peak_cpu[""] == 14.0
    spot, od = nodepools.apply({"spotShare": 0.5}, target)
    assert spot["metadata"]["name"] == "general-spot" and spot["spec"]["limits"] == {"cpu": "7"}
    assert spot["spec"]["weight"] == 1 and "weight" not in od["spec"]
    assert ("karpenter.sh/capacity-type", "In", ["spot"]) in _reqs(spot)
    assert ("karpenter.sh/capacity-type", "In", ["on-demand"]) in _reqs(od)
    [only_od] = nodepools.apply({"spotShare": 0.0}, target)
    [only_spot] = nodepools.apply({"spotShare": 1.0}, target)
    assert _reqs(only_od)[0][2] == ["on-demand"] and _reqs(only_spot)[0][2] == ["spot"]
    assert only_spot["metadata"]["name"] == "general"


def test_a_split_by_workload_label_gives_a_pool_per_value_and_pins_the_labelled_workloads() -> None:
    target, scn = _target("    split: [none, tier]\n")
    pools = nodepools.apply({"split": "tier"}, target)
    assert [p["metadata"]["name"] for p in pools] == ["general", "general-front"]
    front = pools[1]
    assert ("tier", "In", ["front"]) in _reqs(front)
    assert front["spec"]["template"]["metadata"]["labels"] == {"tier": "front"}
    designed = nodepools.scenario_with(scn, target, pools, {"split": "tier"})
    deployments = {o["metadata"]["name"]: o for o in designed.objects if o["kind"] == "Deployment"}
    assert deployments["web"]["spec"]["template"]["spec"]["nodeSelector"] == {"tier": "front"}
    assert "nodeSelector" not in deployments["worker"]["spec"]["template"]["spec"]
    assert sorted(o["metadata"]["name"] for o in designed.objects if o["kind"] == "NodePool") == \
        ["general", "general-front"]
    assert [p["metadata"]["name"] for p in nodepools.apply({"split": "none"}, target)] == ["general"]


def test_a_balanced_design_is_a_nodepool_with_consolidation_policy_balanced() -> None:
    target, _ = _target("    consolidationPolicy: [WhenEmptyOrUnderutilized, Balanced]\n")
    [pool] = nodepools.apply({"consolidationPolicy": "Balanced"}, target)
    assert pool["spec"]["disruption"]["consolidationPolicy"] == "Balanced"
    assert nodepool_mod.NodePool.from_manifest(pool).disruption.consolidation_policy == nodepool_mod.BALANCED
