"""Scenarios: topology spread (zones, hostnames, minDomains), pod affinity and anti-affinity
(including the inverse rule for running pods) and host ports."""

from __future__ import annotations

from typing import Any

from karpy.api import labels as wk
from karpy.api import pod

from . import builders as b

WEB = {"app": "web"}


def _required(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def _host_port_pod(name: str, port: int, *, node_name: str | None = None) -> pod.Pod:
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "100m"}},
                                            "ports": [{"containerPort": 80, "hostPort": port}]}]}
    if node_name:
        spec["nodeName"] = node_name
    return pod.Pod.from_manifest({"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": name, "namespace": "default"}, "spec": spec})


def test_nine_pods_spread_over_three_zones_land_three_per_zone_on_single_zone_claims() -> None:
    pods = b.make_pods("web", 9, labels=WEB, topologySpreadConstraints=[b.spread(wk.ZONE, WEB)])
    res = b.solve(pods)
    b.expect_all_placed(res, pods)
    counts = b.expect_zone_skew(res, pods, max_skew=1)
    assert dict(counts) == {"zone-a": 3, "zone-b": 3, "zone-c": 3}
    for c in res.new_claims:
        assert c.requirements[wk.ZONE].values == frozenset(b.claim_zones(c))


def test_a_zone_spread_counts_the_pods_already_running() -> None:
    running = [b.make_pod(f"old-{i}", labels=WEB, node_name="node-a") for i in range(3)]
    nodes = [b.existing_node("node-a", zone="zone-a", cpu=0.3, running=running)]
    pods = b.make_pods("web", 4, labels=WEB, topologySpreadConstraints=[b.spread(wk.ZONE, WEB)])
    res = b.solve(pods, existing=nodes)
    b.expect_all_placed(res, pods)
    assert dict(b.zone_counts(res, pods, nodes)) == {"zone-b": 2, "zone-c": 2}


def test_a_hostname_spread_puts_at_most_max_skew_pods_on_each_node() -> None:
    pods = b.make_pods("web", 7, labels=WEB, topologySpreadConstraints=[b.spread(wk.HOSTNAME, WEB, max_skew=2)])
    res = b.solve(pods)
    b.expect_all_placed(res, pods)
    assert sorted(len(c.pods) for c in res.new_claims) == [1, 2, 2, 2]


def test_a_hostname_spread_fills_an_existing_node_only_up_to_max_skew() -> None:
    nodes = [b.existing_node("roomy", cpu=16, memory_gi=64)]
    pods = b.make_pods("web", 4, labels=WEB, topologySpreadConstraints=[b.spread(wk.HOSTNAME, WEB)])
    res = b.solve(pods, existing=nodes)
    b.expect_all_placed(res, pods)
    assert len(res.existing["roomy"]) == 1
    assert [len(c.pods) for c in res.new_claims] == [1, 1, 1]


def test_min_domains_above_the_reachable_zones_caps_each_zone_at_max_skew() -> None:
    pool = b.make_nodepool(requirements=[b.requirement(wk.ZONE, "In", "zone-a", "zone-b")])
    pods = b.make_pods("web", 6, labels=WEB, topologySpreadConstraints=[b.spread(wk.ZONE, WEB, min_domains=3)])
    res = b.solve(pods, nodepools=[pool])
    placed = [p for p in pods if b.node_of(res, p) is not None]
    assert dict(b.zone_counts(res, placed)) == {"zone-a": 1, "zone-b": 1}
    for p in pods:
        if p not in placed:
            b.expect_unschedulable(res, p, containing=["topology spread", "minDomains 3"])


def test_min_domains_met_by_the_reachable_zones_does_not_limit_the_spread() -> None:
    pods = b.make_pods("web", 6, labels=WEB, topologySpreadConstraints=[b.spread(wk.ZONE, WEB, min_domains=3)])
    res = b.solve(pods)
    b.expect_all_placed(res, pods)
    assert dict(b.zone_counts(res, pods)) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}


def test_a_zone_no_type_large_enough_is_offered_in_stops_the_spread_within_max_skew() -> None:
    types = [b.make_type("small", cpu=2, memory_gi=4),
             b.make_type("big", cpu=16, memory_gi=64, zones=("zone-a", "zone-b"))]
    pods = b.make_pods("web", 9, cpu="6", labels=WEB, topologySpreadConstraints=[b.spread(wk.ZONE, WEB)])
    res = b.solve(pods, types=types)
    placed = [p for p in pods if b.node_of(res, p) is not None]
    assert dict(b.zone_counts(res, placed)) == {"zone-a": 1, "zone-b": 1}
    assert len(res.errors) == 7


def test_zonal_self_affinity_puts_every_pod_in_one_zone() -> None:
    affinity = _required("podAffinity", b.affinity_term(wk.ZONE, {"app": "db"}))
    pods = b.make_pods("db", 6, cpu="3", labels={"app": "db"}, affinity=affinity)
    res = b.solve(pods)
    b.expect_all_placed(res, pods)
    assert len(b.zone_counts(res, pods)) == 1


def test_pod_affinity_follows_a_running_pod_into_its_zone() -> None:
    db = b.make_pod("db", labels={"app": "db"}, node_name="node-b")
    nodes = [b.existing_node("node-b", zone="zone-b", cpu=0.5, running=[db])]
    affinity = _required("podAffinity", b.affinity_term(wk.ZONE, {"app": "db"}))
    pods = b.make_pods("client", 3, cpu="1", affinity=affinity)
    res = b.solve(pods, existing=nodes)
    b.expect_all_placed(res, pods)
    assert dict(b.zone_counts(res, pods, nodes)) == {"zone-b": 3}


def test_hostname_anti_affinity_puts_one_pod_per_node() -> None:
    anti = _required("podAntiAffinity", b.affinity_term(wk.HOSTNAME, {"app": "x"}))
    running = b.make_pod("old", labels={"app": "x"}, affinity=anti, node_name="n1")
    nodes = [b.existing_node("n1", running=[running]), b.existing_node("n2")]
    pods = b.make_pods("x", 3, labels={"app": "x"}, affinity=anti)
    res = b.solve(pods, existing=nodes)
    b.expect_all_placed(res, pods)
    assert "n1" not in res.existing
    assert len(res.existing["n2"]) == 1
    assert [len(c.pods) for c in res.new_claims] == [1, 1]


def test_zonal_anti_affinity_allows_one_pod_per_zone() -> None:
    anti = _required("podAntiAffinity", b.affinity_term(wk.ZONE, {"app": "z"}))
    pods = b.make_pods("z", 4, labels={"app": "z"}, affinity=anti)
    res = b.solve(pods)
    placed = [p for p in pods if b.node_of(res, p) is not None]
    assert dict(b.zone_counts(res, placed)) == {"zone-a": 1, "zone-b": 1, "zone-c": 1}
    (failed,) = [p for p in pods if p not in placed]
    b.expect_unschedulable(res, failed, containing=["pod anti-affinity on topology.kubernetes.io/zone"])


def test_a_running_pods_anti_affinity_keeps_matching_new_pods_off_its_node() -> None:
    guard = b.make_pod("guard", labels={"app": "guard"}, node_name="node-a",
                       affinity=_required("podAntiAffinity", b.affinity_term(wk.HOSTNAME, WEB)))
    nodes = [b.existing_node("node-a", running=[guard]), b.existing_node("node-b")]
    pods = b.make_pods("web", 3, labels=WEB)
    others = b.make_pods("other", 2)
    res = b.solve(pods + others, existing=nodes)
    b.expect_all_placed(res, pods + others)
    assert all(b.node_of(res, p) != "node-a" for p in pods)
    assert all(b.node_of(res, p) == "node-a" for p in others), "pods the guard does not select may join it"


def test_a_running_pods_zonal_anti_affinity_keeps_matching_new_pods_out_of_its_zone() -> None:
    guard = b.make_pod("guard", labels={"app": "guard"}, node_name="node-a",
                       affinity=_required("podAntiAffinity", b.affinity_term(wk.ZONE, WEB)))
    nodes = [b.existing_node("node-a", zone="zone-a", running=[guard]), b.existing_node("node-a2", zone="zone-a")]
    pods = b.make_pods("web", 3, labels=WEB)
    res = b.solve(pods, existing=nodes)
    b.expect_all_placed(res, pods)
    assert "zone-a" not in b.zone_counts(res, pods, nodes)


def test_two_pods_with_the_same_host_port_never_share_a_node() -> None:
    pods = [_host_port_pod(f"hp-{i}", 8080) for i in range(3)]
    res = b.solve(pods)
    b.expect_all_placed(res, pods)
    assert len({b.node_of(res, p) for p in pods}) == 3


def test_an_existing_node_whose_host_port_is_taken_is_skipped() -> None:
    running = _host_port_pod("old", 8080, node_name="node-a")
    nodes = [b.existing_node("node-a", running=[running]), b.existing_node("node-b")]
    p = _host_port_pod("new", 8080)
    other_port = _host_port_pod("other", 9090)
    res = b.solve([p, other_port], existing=nodes)
    b.expect_all_placed(res, [p, other_port])
    assert b.node_of(res, p) == "node-b"
    assert b.node_of(res, other_port) == "node-a"


def test_a_zone_spread_honours_the_pods_node_affinity_when_counting_domains() -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [b.requirement(wk.ZONE, "In", "zone-a", "zone-b")]}]}}}
    pods = b.make_pods("web", 4, labels=WEB, affinity=affinity, topologySpreadConstraints=[b.spread(wk.ZONE, WEB)])
    res = b.solve(pods)
    b.expect_all_placed(res, pods)
    assert dict(b.zone_counts(res, pods)) == {"zone-a": 2, "zone-b": 2}


def test_a_zone_only_an_existing_node_offers_takes_part_in_the_spread() -> None:
    nodes = [b.existing_node("node-d", zone="zone-d", cpu=16, memory_gi=64)]
    pods = b.make_pods("web", 6, labels=WEB, topologySpreadConstraints=[b.spread(wk.ZONE, WEB)])
    res = b.solve(pods, existing=nodes)
    b.expect_all_placed(res, pods)
    counts = b.expect_zone_skew(res, pods, max_skew=1, zones=("zone-a", "zone-b", "zone-c", "zone-d"),
                                existing=nodes)
    assert counts["zone-d"] >= 1


def _pinned_pods(*, anti: dict[str, Any] | None = None, labels: dict[str, str] | None = None) -> list[pod.Pod]:
    extra: dict[str, Any] = {"affinity": anti} if anti else {}
    return [b.make_pod(f"pinned-{z}", cpu="2", labels=labels, nodeSelector={wk.ZONE: z}, **extra)
            for z in b.ZONES]


def test_a_pod_anti_affine_to_pending_pods_pinned_to_every_zone_is_not_placed() -> None:
    """Karpenter's "should not violate pod anti-affinity on zone": larger pinned pods first."""
    anti = _required("podAntiAffinity", b.affinity_term(wk.ZONE, {"security": "s2"}))
    pinned = _pinned_pods(labels={"security": "s2"})
    loner = b.make_pod("loner", affinity=anti)
    res = b.solve([*pinned, loner])
    for p in pinned:
        assert b.node_of(res, p) is not None, b.describe(res)
    assert sorted(b.zone_counts(res, pinned)) == list(b.ZONES)
    b.expect_unschedulable(res, loner, containing=["pod anti-affinity on topology.kubernetes.io/zone"])


def test_pods_pinned_to_every_zone_with_anti_affinity_keep_a_matching_pending_pod_out() -> None:
    """Karpenter's "(inverse)" case: the pinned pods own the term, the loner matches it."""
    anti = _required("podAntiAffinity", b.affinity_term(wk.ZONE, {"security": "s2"}))
    pinned = _pinned_pods(anti=anti)
    loner = b.make_pod("loner", labels={"security": "s2"})
    res = b.solve([*pinned, loner])
    for p in pinned:
        assert b.node_of(res, p) is not None, b.describe(res)
    assert b.node_of(res, loner) is None, b.describe(res)


def test_an_anti_affine_pod_is_not_placed_while_a_matching_pod_may_land_in_any_zone() -> None:
    """Karpenter's "(other schedules first)": a claim that may still launch in any zone blocks them all."""
    anti = _required("podAntiAffinity", b.affinity_term(wk.ZONE, {"security": "s2"}))
    other = b.make_pod("other", cpu="2", labels={"security": "s2"})
    loner = b.make_pod("loner", affinity=anti)
    res = b.solve([other, loner])
    assert b.node_of(res, other) is not None, b.describe(res)
    assert b.node_of(res, loner) is None, b.describe(res)


def _daemon_with_port(port: int) -> pod.Pod:
    return b.daemonset_pod("node-agent", containers=[
        {"name": "agent", "resources": {"requests": {"cpu": "100m"}},
         "ports": [{"containerPort": port, "hostPort": port}]}])


def test_a_pod_needing_a_host_port_a_daemonset_holds_on_every_node_gets_no_claim() -> None:
    p = _host_port_pod("exporter", 9100)
    res = b.solve([p], daemonsets=[_daemon_with_port(9100)])
    assert not res.new_claims, b.describe(res)
    b.expect_unschedulable(res, p, containing=["host port 9100/TCP", "DaemonSet kube-system/node-agent"])


def test_an_in_flight_node_counts_the_host_ports_of_the_daemonsets_that_will_run_there() -> None:
    node_ = b.existing_node("in-flight", in_flight=True)
    p = _host_port_pod("exporter", 9100)
    res = b.solve([p], existing=[node_], daemonsets=[_daemon_with_port(9100)])
    assert b.node_of(res, p) is None, b.describe(res)


def test_a_pod_needing_another_host_port_than_the_daemonset_gets_a_claim() -> None:
    p = _host_port_pod("exporter", 9200)
    res = b.solve([p], daemonsets=[_daemon_with_port(9100)])
    b.expect_all_placed(res, [p])


def test_a_pod_with_hostname_affinity_joins_a_pending_pods_new_claim_in_the_same_run() -> None:
    """Karpenter's "should schedule a pod with affinity to a pod in the same batch", both size orders."""
    follow = _required("podAffinity", b.affinity_term(wk.HOSTNAME, {"app": "leader"}))
    for leader_cpu, follower_cpu in (("1", "500m"), ("500m", "2")):
        leader = b.make_pod("leader", cpu=leader_cpu, labels={"app": "leader"})
        followers = b.make_pods("follower", 2, cpu=follower_cpu, affinity=follow)
        res = b.solve([leader, *followers])
        b.expect_all_placed(res, [leader, *followers])
        assert len(res.new_claims) == 1, b.describe(res)
        assert {b.node_of(res, p) for p in followers} == {b.node_of(res, leader)}


def test_a_pod_with_affinity_to_a_pod_nobody_runs_still_fails_with_a_reason() -> None:
    follow = _required("podAffinity", b.affinity_term(wk.HOSTNAME, {"app": "ghost"}))
    p = b.make_pod("follower", affinity=follow)
    res = b.solve([p, b.make_pod("other")])
    b.expect_unschedulable(res, p, containing=["pod affinity on kubernetes.io/hostname"])
