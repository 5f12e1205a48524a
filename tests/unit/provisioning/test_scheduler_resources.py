"""Scenarios: instance type choice, packing, pod counts, init containers, architectures,
NodePool weights, limits, DaemonSet overhead, minValues, existing and in-flight capacity."""

from __future__ import annotations

from karpy.api import labels as wk
from karpy.api import quantity
from karpy.cloudprovider import catalog

from . import builders as b

ON_DEMAND = frozenset({wk.CAPACITY_TYPE_ON_DEMAND})


def test_a_small_pod_gets_a_claim_whose_first_type_is_the_cheapest_on_demand_type_that_fits() -> None:
    aws = catalog.load("aws")
    pool = b.make_nodepool(requirements=[b.requirement(wk.CAPACITY_TYPE, "In", wk.CAPACITY_TYPE_ON_DEMAND)])
    p = b.make_pod("small", cpu="100m", memory="128Mi")
    res = b.solve([p], nodepools=[pool], types=aws)
    b.expect_all_placed(res, [p])
    b.expect_claims(res, 1)
    claim = res.new_claims[0]
    fits = [t for t in aws if all(t.allocatable.get(k, 0) >= v for k, v in p.requests.items())]
    prices = {t.name: t.cheapest_price(capacity_types=ON_DEMAND) for t in fits}
    cheapest = min(v for v in prices.values() if v is not None)
    assert claim.price == cheapest
    assert prices[claim.instance_types[0].name] == cheapest
    listed = [prices[t.name] or 0.0 for t in claim.instance_types]
    assert listed == sorted(listed), "options are not cheapest first"
    assert claim.requirements[wk.CAPACITY_TYPE].has(wk.CAPACITY_TYPE_ON_DEMAND)
    assert not claim.requirements[wk.CAPACITY_TYPE].has(wk.CAPACITY_TYPE_SPOT)


def test_small_and_large_pods_pack_together_on_one_claim() -> None:
    big = b.make_pod("big", cpu="10", memory="8Gi")
    small = b.make_pods("small", 5, cpu="500m", memory="512Mi")
    res = b.solve([big, *small])
    b.expect_all_placed(res, [big, *small])
    b.expect_claims(res, 1, types={"large"})
    assert len(res.new_claims[0].pods) == 6
    b.expect_claims_hold_their_pods(res)


def test_a_type_with_few_max_pods_forces_more_nodes() -> None:
    types = [b.make_type("four-pods", cpu=16, memory_gi=64, pods=4)]
    pods = b.make_pods("p", 10)
    res = b.solve(pods, types=types)
    b.expect_all_placed(res, pods)
    b.expect_claims(res, 3, types={"four-pods"})
    assert sorted(len(c.pods) for c in res.new_claims) == [2, 4, 4]


def test_a_large_init_container_raises_the_pods_effective_request() -> None:
    init = [{"name": "init", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]
    p = b.make_pod("p", cpu="1", memory="1Gi", initContainers=init)
    assert p.requests["cpu"] == 3000
    res = b.solve([p])
    b.expect_all_placed(res, [p])
    b.expect_claims(res, 1)
    assert "small" not in res.new_claims[0].instance_type_names(), "small has 2 cpus, the init container needs 3"
    assert res.new_claims[0].instance_types[0].name == "medium"


def test_arm64_and_amd64_pods_go_to_separate_claims_with_types_of_their_arch() -> None:
    types = [b.make_type("x86", cpu=4, memory_gi=16, arch="amd64"),
             b.make_type("graviton", cpu=4, memory_gi=16, arch="arm64", price=0.1)]
    arm = b.make_pods("arm", 2, nodeSelector={wk.ARCH: "arm64"})
    amd = b.make_pods("amd", 2, nodeSelector={wk.ARCH: "amd64"})
    res = b.solve(arm + amd, types=types)
    b.expect_all_placed(res, arm + amd)
    b.expect_claims(res, 2)
    for group, arch in ((arm, "arm64"), (amd, "amd64")):
        claim = b.claim_of(res, group[0])
        assert claim is not None
        assert {p.key for p in claim.pods} == {p.key for p in group}
        assert b.claim_values(claim, wk.ARCH) == {arch}


def test_the_heavier_nodepool_is_used_first() -> None:
    light = b.make_nodepool("light", weight=1)
    heavy = b.make_nodepool("heavy", weight=50)
    pods = b.make_pods("p", 3)
    res = b.solve(pods, nodepools=[light, heavy])
    b.expect_all_placed(res, pods)
    b.expect_claims(res, 1, nodepool_name="heavy")


def test_a_pod_incompatible_with_the_heavy_nodepool_falls_back_to_the_other() -> None:
    heavy = b.make_nodepool("heavy", weight=10, requirements=[b.requirement(wk.ARCH, "In", "arm64")])
    light = b.make_nodepool("light")
    types = [b.make_type("x86", cpu=4, memory_gi=16, arch="amd64"),
             b.make_type("graviton", cpu=4, memory_gi=16, arch="arm64")]
    anywhere = b.make_pod("anywhere")
    amd = b.make_pod("amd", nodeSelector={wk.ARCH: "amd64"})
    res = b.solve([anywhere, amd], nodepools=[light, heavy], types=types)
    b.expect_all_placed(res, [anywhere, amd])
    assert (c := b.claim_of(res, anywhere)) is not None and c.nodepool == "heavy"
    assert (c := b.claim_of(res, amd)) is not None and c.nodepool == "light"


def test_a_cpu_limit_lets_only_part_of_a_batch_get_claims_and_names_the_limit_for_the_rest() -> None:
    pool = b.make_nodepool(limits={"cpu": "8"})
    pods = b.make_pods("p", 4, cpu="3")
    res = b.solve(pods, nodepools=[pool], types=[b.make_type("m4", cpu=4, memory_gi=16)])
    b.expect_claims(res, 2)
    placed = [p for p in pods if b.node_of(res, p) is not None]
    assert len(placed) == 2
    for p in pods:
        if p not in placed:
            b.expect_unschedulable(res, p, containing=["limits (cpu 8)", "m4"])


def test_usage_already_launched_counts_against_the_limit() -> None:
    pool = b.make_nodepool(limits={"cpu": "10"})
    pods = b.make_pods("p", 3, cpu="3")
    res = b.solve(pods, nodepools=[pool], types=[b.make_type("m4", cpu=4, memory_gi=16)],
                  usage={"default": {"cpu": 4 * quantity.MILLI}})
    b.expect_claims(res, 1)
    assert len(res.errors) == 2


def test_pods_past_the_heavy_nodepools_limit_go_to_the_next_nodepool_without_relaxing_anything() -> None:
    heavy = b.make_nodepool("heavy", weight=10, limits={"cpu": "8"})
    light = b.make_nodepool("light")
    pods = b.make_pods("p", 60, cpu="3")
    res = b.solve(pods, nodepools=[heavy, light], types=[b.make_type("m4", cpu=4, memory_gi=16)])
    b.expect_all_placed(res, pods)
    assert [c.nodepool for c in res.new_claims].count("heavy") == 2
    assert not res.relaxed, f"nothing needed relaxing: {res.relaxed}"


def test_daemonset_overhead_can_make_a_pod_unschedulable_and_the_explanation_names_it() -> None:
    agent = b.daemonset_pod("agent", cpu="1500m")
    types = [b.make_type("m2", cpu=2, memory_gi=8), b.make_type("m4", cpu=4, memory_gi=16)]
    p = b.make_pod("big", cpu="3")
    res = b.solve([p], types=types, daemonsets=[agent])
    b.expect_claims(res, 0)
    b.expect_unschedulable(res, p, containing=["DaemonSet overhead (cpu 1500m", "closest is m4", "short of cpu"])


def test_daemonset_overhead_is_added_to_each_claim() -> None:
    agent = b.daemonset_pod("agent", cpu="500m", memory="256Mi")
    pods = b.make_pods("p", 3, cpu="1")
    res = b.solve(pods, types=[b.make_type("m4", cpu=4, memory_gi=16)], daemonsets=[agent])
    b.expect_all_placed(res, pods)
    b.expect_claims(res, 1)
    assert res.new_claims[0].daemon_overhead["cpu"] == 500
    assert res.new_claims[0].requests["cpu"] == 3500
    b.expect_claims_hold_their_pods(res, [agent])


def test_a_daemonset_that_selects_another_nodepool_adds_no_overhead() -> None:
    elsewhere = b.daemonset_pod("elsewhere", cpu="1500m", nodeSelector={wk.NODEPOOL: "other"})
    p = b.make_pod("big", cpu="3")
    res = b.solve([p], types=[b.make_type("m4", cpu=4, memory_gi=16)], daemonsets=[elsewhere])
    b.expect_all_placed(res, [p])
    assert res.new_claims[0].daemon_overhead == {}


def test_a_daemonset_that_does_not_tolerate_the_nodepool_taint_adds_no_overhead() -> None:
    pool = b.make_nodepool(taints=[{"key": "gpu", "effect": "NoSchedule"}])
    agent = b.daemonset_pod("agent", cpu="1500m")
    p = b.make_pod("big", cpu="3", tolerations=[{"key": "gpu", "operator": "Exists"}])
    res = b.solve([p], nodepools=[pool], types=[b.make_type("m4", cpu=4, memory_gi=16)], daemonsets=[agent])
    b.expect_all_placed(res, [p])
    assert res.new_claims[0].daemon_overhead == {}


def test_instance_family_min_values_keeps_at_least_that_many_families_in_every_claim() -> None:
    types = [b.make_type(f"{fam}.{size}", cpu=cpu, memory_gi=4 * cpu, family=fam, price=0.05 * cpu * (1 + i / 10))
             for i, fam in enumerate("abcde") for size, cpu in (("large", 2), ("xlarge", 4))]
    pool = b.make_nodepool(requirements=[b.requirement(wk.AWS_INSTANCE_FAMILY, "Exists", min_values=3)])
    for count in (3, 100):
        pods = b.make_pods("p", count, cpu="1")
        res = b.solve(pods, nodepools=[pool], types=types)
        b.expect_all_placed(res, pods)
        for c in res.new_claims:
            assert len(b.claim_values(c, wk.AWS_INSTANCE_FAMILY)) >= 3, b.describe(res)
        b.expect_claims_hold_their_pods(res)


def test_a_heavier_nodepool_with_min_values_still_wins_over_a_lighter_one() -> None:
    types = [b.make_type(f"{fam}.large", cpu=2, memory_gi=8, family=fam) for fam in "abc"]
    heavy = b.make_nodepool("heavy", weight=10,
                            requirements=[b.requirement(wk.AWS_INSTANCE_FAMILY, "Exists", min_values=2)])
    light = b.make_nodepool("light")
    pods = b.make_pods("p", 4)
    res = b.solve(pods, nodepools=[light, heavy], types=types)
    b.expect_all_placed(res, pods)
    assert {c.nodepool for c in res.new_claims} == {"heavy"}


def test_existing_nodes_are_filled_before_new_claims() -> None:
    nodes = [b.existing_node("n1", cpu=2, memory_gi=8)]
    pods = b.make_pods("p", 5, cpu="500m")
    res = b.solve(pods, existing=nodes)
    b.expect_all_placed(res, pods)
    assert len(res.existing["n1"]) == 4
    b.expect_claims(res, 1)
    assert len(res.new_claims[0].pods) == 1
    b.expect_not_overcommitted(res, nodes)


def test_a_cordoned_node_takes_no_new_pods() -> None:
    nodes = [b.existing_node("cordoned", schedulable=False)]
    pods = b.make_pods("p", 2)
    res = b.solve(pods, existing=nodes)
    b.expect_all_placed(res, pods)
    assert "cordoned" not in res.existing
    b.expect_claims(res, 1)


def test_an_in_flight_node_absorbs_pods_and_its_unregistered_and_not_ready_taints_are_ignored() -> None:
    taints = [b.taint(wk.TAINT_UNREGISTERED), b.taint(wk.TAINT_NOT_READY)]
    nodes = [b.existing_node("launching", cpu=4, in_flight=True, taints=taints)]
    pods = b.make_pods("p", 5, cpu="500m")
    res = b.solve(pods, existing=nodes)
    b.expect_all_placed(res, pods)
    assert len(res.existing["launching"]) == 5
    b.expect_claims(res, 0)


def test_a_registered_node_with_the_unregistered_taint_is_not_used() -> None:
    nodes = [b.existing_node("stuck", cpu=4, taints=[b.taint(wk.TAINT_UNREGISTERED)])]
    pods = b.make_pods("p", 2)
    res = b.solve(pods, existing=nodes)
    b.expect_all_placed(res, pods)
    assert "stuck" not in res.existing
    b.expect_claims(res, 1)


def test_an_in_flight_node_reserves_room_for_the_daemonsets_that_will_run_on_it() -> None:
    agent = b.daemonset_pod("agent", cpu="1")
    nodes = [b.existing_node("launching", cpu=4, in_flight=True)]
    pods = b.make_pods("p", 4, cpu="1")
    res = b.solve(pods, existing=nodes, daemonsets=[agent])
    b.expect_all_placed(res, pods)
    assert len(res.existing["launching"]) == 3
    b.expect_claims(res, 1)
