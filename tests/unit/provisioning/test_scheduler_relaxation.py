"""Scenarios: taints, startup taints and Karpenter's preference relaxation."""

from __future__ import annotations

from typing import Any

from karpy.api import labels as wk

from . import builders as b


def _required_terms(*zones: str) -> dict[str, Any]:
    terms = [{"matchExpressions": [b.requirement(wk.ZONE, "In", z)]} for z in zones]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def test_a_nodepool_taint_the_pod_does_not_tolerate_is_named_and_a_tolerating_pod_uses_it() -> None:
    pool = b.make_nodepool(taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}])
    plain = b.make_pod("plain")
    tolerant = b.make_pod("tolerant", tolerations=[{"key": "team", "operator": "Equal", "value": "a",
                                                     "effect": "NoSchedule"}])
    res = b.solve([plain, tolerant], nodepools=[pool])
    b.expect_unschedulable(res, plain, containing=['NodePool "default"', "team=a:NoSchedule"])
    b.expect_claims(res, 1)
    assert b.claim_of(res, tolerant) is not None


def test_startup_taints_are_not_considered_for_scheduling_but_go_on_the_claim() -> None:
    pool = b.make_nodepool(startup_taints=[{"key": "cni-not-ready", "effect": "NoSchedule"}])
    p = b.make_pod("p")
    res = b.solve([p], nodepools=[pool])
    b.expect_all_placed(res, [p])
    assert [t.key for t in res.new_claims[0].startup_taints] == ["cni-not-ready"]
    assert res.new_claims[0].taints == ()


def test_a_preferred_zone_that_does_not_exist_is_relaxed_and_recorded() -> None:
    preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [b.requirement(wk.ZONE, "In", "zone-x")]}}]}}
    p = b.make_pod("p", affinity=preferred)
    res = b.solve([p])
    b.expect_all_placed(res, [p])
    assert res.relaxed[p.key] == ["preferred node affinity term (heaviest)"]


def test_a_possible_preferred_zone_is_honoured_and_nothing_is_relaxed() -> None:
    preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [b.requirement(wk.ZONE, "In", "zone-c")]}}]}}
    p = b.make_pod("p", affinity=preferred)
    res = b.solve([p])
    b.expect_all_placed(res, [p])
    assert b.claim_zones(res.new_claims[0]) == {"zone-c"}
    assert p.key not in res.relaxed


def test_the_second_required_node_affinity_term_is_used_when_the_first_is_impossible() -> None:
    p = b.make_pod("p", affinity=_required_terms("zone-x", "zone-b"))
    res = b.solve([p])
    b.expect_all_placed(res, [p])
    assert b.claim_zones(res.new_claims[0]) == {"zone-b"}
    assert res.relaxed[p.key] == ["required node affinity term (trying the next one)"]


def test_the_last_required_node_affinity_term_is_never_relaxed() -> None:
    p = b.make_pod("p", affinity=_required_terms("zone-x", "zone-y"))
    res = b.solve([p])
    b.expect_claims(res, 0)
    b.expect_unschedulable(res, p, containing=['NodePool "default"',
                                               "key topology.kubernetes.io/zone: needs In [zone-y]",
                                               "the instance types offer [zone-a zone-b zone-c]"])
    assert "zone-x" not in res.errors[p.key]


def test_a_schedule_anyway_spread_is_relaxed_when_it_cannot_be_met() -> None:
    pool = b.make_nodepool(requirements=[b.requirement(wk.ZONE, "In", "zone-a")])
    full = b.existing_node("full-b", zone="zone-b", cpu=0.1)
    pods = b.make_pods("w", 4, labels={"app": "w"},
                       topologySpreadConstraints=[b.spread(wk.ZONE, {"app": "w"}, when="ScheduleAnyway")])
    res = b.solve(pods, nodepools=[pool], existing=[full])
    b.expect_all_placed(res, pods)
    assert dict(b.zone_counts(res, pods, [full])) == {"zone-a": 3, "zone-b": 1}
    what = "ScheduleAnyway topology spread on topology.kubernetes.io/zone"
    relaxed = [k for k, v in res.relaxed.items() if what in v]
    assert len(relaxed) == 1


def test_a_do_not_schedule_spread_is_not_relaxed() -> None:
    pool = b.make_nodepool(requirements=[b.requirement(wk.ZONE, "In", "zone-a")])
    full = b.existing_node("full-b", zone="zone-b", cpu=0.1)
    pods = b.make_pods("w", 4, labels={"app": "w"}, topologySpreadConstraints=[b.spread(wk.ZONE, {"app": "w"})])
    res = b.solve(pods, nodepools=[pool], existing=[full])
    placed = [p for p in pods if b.node_of(res, p) is not None]
    assert dict(b.zone_counts(res, placed, [full])) == {"zone-a": 2, "zone-b": 1}
    (failed,) = [p for p in pods if p not in placed]
    b.expect_unschedulable(res, failed, containing=["topology spread on topology.kubernetes.io/zone (maxSkew 1"])
    assert not res.relaxed


def test_a_prefer_no_schedule_taint_is_tolerated_after_relaxation() -> None:
    pool = b.make_nodepool(taints=[{"key": "soft", "effect": "PreferNoSchedule"}])
    p = b.make_pod("p")
    res = b.solve([p], nodepools=[pool])
    b.expect_all_placed(res, [p])
    assert res.relaxed[p.key] == ["PreferNoSchedule taints"]


def test_a_nodepool_without_the_prefer_no_schedule_taint_is_preferred_over_relaxing() -> None:
    soft = b.make_nodepool("soft", weight=10, taints=[{"key": "soft", "effect": "PreferNoSchedule"}])
    clean = b.make_nodepool("clean")
    p = b.make_pod("p")
    res = b.solve([p], nodepools=[soft, clean])
    b.expect_all_placed(res, [p])
    b.expect_claims(res, 1, nodepool_name="clean")
    assert p.key not in res.relaxed


def test_preferred_pod_anti_affinity_is_relaxed_when_no_other_node_can_be_had() -> None:
    anti = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "podAffinityTerm": b.affinity_term(wk.HOSTNAME, {"app": "x"})}]}}
    pool = b.make_nodepool(limits={"cpu": "4"})
    pods = b.make_pods("x", 3, labels={"app": "x"}, affinity=anti)
    res = b.solve(pods, nodepools=[pool], types=[b.make_type("m4", cpu=4, memory_gi=16)])
    b.expect_all_placed(res, pods)
    b.expect_claims(res, 1)
    assert sum("preferred pod anti-affinity term" in v for v in res.relaxed.values()) == 2
