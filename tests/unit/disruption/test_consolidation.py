"""Consolidation decisions: delete, replace, multi-node, spot-to-spot, many-to-many and the MILP."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from karpy import settings as settings_mod
from karpy.api import labels as wk
from karpy.api import nodeclaim, pod
from karpy.cloudprovider import instancetype
from karpy.disruption import balanced, candidates, consolidation, milp, prefilter, simulation, snapshot
from karpy.provisioning import results, scheduler

from ..provisioning import builders as pb
from .test_simulation import CATALOG, LARGE, MEDIUM, SMALL, SPOT, cluster, entry, make_pool, make_type, running

Cluster = tuple[snapshot.ClusterSnapshot, list[candidates.Candidate]]
DEFAULTS = settings_mod.Settings()
SPOT_ON = settings_mod.Settings(spot_to_spot_consolidation=True)


def expect_command(cmd: consolidation.Command | None, method: str, names: list[str]) -> consolidation.Command:
    assert cmd is not None, "expected a consolidation command"
    assert cmd.method == method, cmd.explanation
    assert sorted(cmd.names) == sorted(names), cmd.explanation
    assert cmd.explanation
    return cmd


# -- single node -------------------------------------------------------------------------------------


def test_a_node_whose_pods_fit_on_other_nodes_is_deleted() -> None:
    snap, cands = cluster([entry("n1", MEDIUM, [running("a", "n1")], created=0.0),
                           entry("n2", MEDIUM, [running("b", "n2")], created=5.0)], CATALOG)
    cmd = expect_command(consolidation.single_node(snap, cands, DEFAULTS), "Delete", ["n1"])
    assert cmd.replacements == []
    assert cmd.savings_per_hour == pytest.approx(0.20)
    assert cmd.reason == "Underutilized"


def test_the_node_with_fewer_and_lower_priority_pods_goes_first() -> None:
    busy = [running(f"b{i}", "busy") for i in range(2)]
    important = [running("vip", "vip", priority=1_000_000_000)]
    snap, cands = cluster([entry("busy", MEDIUM, busy, created=0.0), entry("vip", MEDIUM, important, created=0.0),
                           entry("light", MEDIUM, [running("l", "light")], created=9.0),
                           entry("spare", LARGE, [])], CATALOG)
    ordered = [c.name for c in consolidation.order_candidates(snap, cands)]
    assert ordered == ["spare", "light", "busy", "vip"]
    cmd = consolidation.single_node(snap, [c for c in cands if c.name != "spare"], DEFAULTS)
    expect_command(cmd, "Delete", ["light"])


def test_candidates_are_tried_by_savings_ratio_so_a_dear_node_with_more_pods_can_go_first() -> None:
    """Karpenter v1.14 orders consolidation candidates by price per unit of disruption, highest first
    (``consolidation.go`` ``sortCandidates``; ``balanced_scoring_test.go`` "should sort non-Balanced
    candidates by savings ratio descending"): a large node holding three pods ($0.85/h over 4) goes before
    a small one holding one ($0.10/h over 2), where the older cheapest-to-disrupt order put it last."""
    busy = [running(f"b{i}", "big", cpu="200m") for i in range(3)]
    snap, cands = cluster([entry("big", LARGE, busy, created=0.0),
                           entry("small", SMALL, [running("s", "small", cpu="500m")], created=0.0)], CATALOG)
    assert [c.name for c in consolidation.order_candidates(snap, cands)] == ["big", "small"]
    expect_command(consolidation.single_node(snap, cands, DEFAULTS), "Delete", ["big"])


def test_of_two_nodes_of_one_price_the_one_with_fewer_pods_is_consolidated_first() -> None:
    """Karpenter's ``consolidation_test.go`` "should consolidate the node with best savings ratio first":
    two pods on the older node, one on the newer: the newer has the better ratio and goes."""
    snap, cands = cluster([entry("n1", MEDIUM, [running("a", "n1"), running("b", "n1")], created=0.0),
                           entry("n2", MEDIUM, [running("c", "n2")], created=5.0)], CATALOG)
    expect_command(consolidation.single_node(snap, cands, DEFAULTS), "Delete", ["n2"])


def test_drifted_candidates_go_in_the_order_they_drifted() -> None:
    """Karpenter v1.14 ``drift.go`` ``ComputeCommands``: sorted by the Drifted condition's
    lastTransitionTime, oldest first, whatever their pods."""
    _, cands = cluster([entry("early", MEDIUM, [running("a", "early"), running("b", "early")], created=0.0),
                        entry("late", MEDIUM, [], created=0.0)], CATALOG)
    when = {"early": 100.0, "late": 50.0}
    drifted = [dataclasses.replace(c, nodeclaim=dataclasses.replace(c.nodeclaim, status=dataclasses.replace(
        c.nodeclaim.status, conditions=(nodeclaim.Condition(nodeclaim.DRIFTED, last_transition_time=when[c.name]),))))
        for c in cands]
    assert [c.name for c in candidates.order_drifted(drifted)] == ["late", "early"]


def test_a_node_whose_pods_need_a_smaller_type_is_replaced_with_that_type() -> None:
    snap, cands = cluster([entry("n1", LARGE, [running("a", "n1", cpu="1500m")])], CATALOG)
    cmd = expect_command(consolidation.single_node(snap, cands, DEFAULTS), "Replace", ["n1"])
    (claim,) = cmd.replacements
    assert claim.instance_types[0].name == "small"
    assert "large" not in claim.instance_type_names()
    assert all((t.cheapest_price() or 1.0) < 0.85 for t in claim.instance_types)
    assert cmd.savings_per_hour == pytest.approx(0.75)


def test_a_node_is_not_replaced_when_no_cheaper_type_holds_its_pods() -> None:
    snap, cands = cluster([entry("n1", SMALL, [running("a", "n1", cpu="1500m")])], CATALOG)
    reasons: dict[str, str] = {}
    assert consolidation.single_node(snap, cands, DEFAULTS, reasons=reasons) is None
    assert reasons == {"n1": "Can't replace with a cheaper node"}


def test_a_replacement_saving_less_than_the_threshold_is_refused() -> None:
    types = [make_type("old", 4, 0.200), make_type("new", 4, 0.199)]
    snap, cands = cluster([entry("n1", types[0], [running("a", "n1", cpu="3")])], types)
    reasons: dict[str, str] = {}
    assert consolidation.single_node(snap, cands, DEFAULTS, reasons=reasons) is None
    assert "saves less than 1%" in reasons["n1"]
    lenient = settings_mod.Settings(consolidation_min_saving=0.0)
    expect_command(consolidation.single_node(snap, cands, lenient), "Replace", ["n1"])


def test_a_consolidation_that_would_leave_a_running_pod_pending_is_refused() -> None:
    pinned = running("pinned", "n1", nodeSelector={"disk": "local"})
    snap, cands = cluster([entry("n1", MEDIUM, [pinned], labels={"disk": "local"}),
                           entry("n2", LARGE, [running("x", "n2")])], CATALOG)
    n1 = [c for c in cands if c.name == "n1"]
    reasons: dict[str, str] = {}
    assert consolidation.single_node(snap, n1, DEFAULTS, reasons=reasons) is None
    assert "would leave pod default/pinned pending" in reasons["n1"]
    assert isinstance(consolidation.evaluate(snap, n1, DEFAULTS), consolidation.Refusal)


def test_a_budget_of_zero_blocks_single_node_consolidation() -> None:
    snap, cands = cluster([entry("n1", MEDIUM, [running("a", "n1")]), entry("n2", MEDIUM, [])], CATALOG)
    reasons: dict[str, str] = {}
    assert consolidation.single_node(snap, cands, DEFAULTS, allowed={"default": 0}, reasons=reasons) is None
    assert reasons["n1"] == "No allowed disruptions due to blocking budget"


def test_a_when_empty_nodepool_does_not_consolidate_underutilized_nodes() -> None:
    pool = make_pool(policy="WhenEmpty")
    snap, cands = cluster([entry("n1", LARGE, [running("a", "n1")])], CATALOG, [pool])
    assert consolidation.single_node(snap, cands, DEFAULTS) is None


# -- spot ----------------------------------------------------------------------------------------------


def spot_cluster(cheaper: int, *, on_demand_cheaper: bool = False) -> Cluster:
    big = make_type("big", 8, 0.40, capacity_types=(SPOT,))
    smalls = [make_type(f"s{i}", 2, 0.05 + 0.001 * i, capacity_types=(SPOT,)) for i in range(cheaper)]
    types = [big, *smalls]
    if on_demand_cheaper:
        types.append(make_type("od-small", 2, 0.05))
    pool = make_pool(capacity_types=(SPOT, wk.CAPACITY_TYPE_ON_DEMAND))
    return cluster([entry("n1", big, [running("a", "n1")], capacity_type=SPOT)], types, [pool])


def test_spot_to_spot_replacement_is_off_by_default() -> None:
    snap, cands = spot_cluster(20)
    reasons: dict[str, str] = {}
    assert consolidation.single_node(snap, cands, DEFAULTS, reasons=reasons) is None
    assert "spot-to-spot consolidation is disabled" in reasons["n1"]


def test_spot_to_spot_needs_fifteen_cheaper_spot_types() -> None:
    snap, cands = spot_cluster(5)
    reasons: dict[str, str] = {}
    assert consolidation.single_node(snap, cands, SPOT_ON, reasons=reasons) is None
    assert "needs 15 cheaper spot instance types, found 5" in reasons["n1"]


def test_spot_to_spot_replaces_with_enough_cheaper_spot_types() -> None:
    snap, cands = spot_cluster(20)
    cmd = expect_command(consolidation.single_node(snap, cands, SPOT_ON), "Replace", ["n1"])
    (claim,) = cmd.replacements
    assert len(claim.instance_types) == 20
    assert claim.requirements[wk.CAPACITY_TYPE].has(SPOT)
    assert not claim.requirements[wk.CAPACITY_TYPE].has(wk.CAPACITY_TYPE_ON_DEMAND)


def test_a_spot_node_is_never_replaced_by_on_demand() -> None:
    snap, cands = spot_cluster(0, on_demand_cheaper=True)
    reasons: dict[str, str] = {}
    assert consolidation.single_node(snap, cands, SPOT_ON, reasons=reasons) is None
    assert reasons["n1"].startswith("Can't replace with a cheaper node")


# -- multi node ----------------------------------------------------------------------------------------


def test_three_underutilized_nodes_are_merged_into_one() -> None:
    old = make_type("old", 2, 0.30)
    types = [old, make_type("m8", 8, 0.50)]
    entries = [entry(f"n{i}", old, [running(f"p{i}", f"n{i}", cpu="1500m")], created=float(i)) for i in range(3)]
    snap, cands = cluster(entries, types)
    assert consolidation.single_node(snap, cands, DEFAULTS) is None
    cmd = expect_command(consolidation.multi_node(snap, cands, DEFAULTS), "Replace", ["n0", "n1", "n2"])
    (claim,) = cmd.replacements
    assert claim.instance_types[0].name == "m8"
    assert len(claim.pods) == 3
    assert cmd.savings_per_hour == pytest.approx(0.40)


def test_two_nodes_are_not_merged_into_one_node_of_their_own_type() -> None:
    spare = entry("spare", LARGE, [running(f"x{i}", "spare") for i in range(14)])
    n1 = entry("n1", MEDIUM, [running(f"a{i}", "n1") for i in range(3)], created=0.0)
    n2 = entry("n2", MEDIUM, [running(f"b{i}", "n2") for i in range(3)], created=1.0)
    snap, cands = cluster([spare, n1, n2], CATALOG)
    pair = [c for c in cands if c.name in ("n1", "n2")]
    out = consolidation.evaluate(snap, pair, DEFAULTS)
    assert isinstance(out, consolidation.Refusal)
    assert out.explanation.startswith("Can't replace with a cheaper node")
    assert consolidation.multi_node(snap, pair, DEFAULTS) is None
    expect_command(consolidation.single_node(snap, pair, DEFAULTS), "Delete", ["n1"])


def test_multi_node_respects_the_budget() -> None:
    old = make_type("old", 2, 0.30)
    types = [old, make_type("m8", 8, 0.50)]
    entries = [entry(f"n{i}", old, [running(f"p{i}", f"n{i}", cpu="1500m")], created=float(i)) for i in range(3)]
    snap, cands = cluster(entries, types)
    assert consolidation.multi_node(snap, cands, DEFAULTS, allowed={"default": 1}) is None


# -- many to many ---------------------------------------------------------------------------------------


def repack_cluster(c_price: float) -> Cluster:
    """Three 10-cpu nodes ($1.00) each running two 4-cpu pods: no pair fits one cheaper node, but
    the six pods fit two 12-cpu nodes."""
    a = make_type("a", 10, 1.00)
    types = [a, make_type("c", 12, c_price), make_type("d", 16, 2.10), make_type("e", 24, 3.10)]
    entries = [entry(f"n{i}", a, [running(f"p{i}-{j}", f"n{i}", cpu="4") for j in range(2)], created=float(i))
               for i in range(3)]
    return cluster(entries, types)


def test_many_to_many_finds_a_saving_multi_node_cannot() -> None:
    snap, cands = repack_cluster(1.40)
    assert consolidation.single_node(snap, cands, DEFAULTS) is None
    assert consolidation.multi_node(snap, cands, DEFAULTS) is None
    cmd = expect_command(consolidation.many_to_many(snap, cands, DEFAULTS),
                         "Replace", ["n0", "n1", "n2"])
    assert [c.instance_types[0].name for c in cmd.replacements] == ["c", "c"]
    assert sorted(len(c.pods) for c in cmd.replacements) == [3, 3]
    assert cmd.savings_per_hour == pytest.approx(0.20)
    assert all(c.price <= 1.40 + 0.06 for c in cmd.replacements)


def test_many_to_many_respects_the_minimum_saving() -> None:
    snap, cands = repack_cluster(1.496)
    reasons: dict[str, str] = {}
    assert consolidation.many_to_many(snap, cands, DEFAULTS, reasons=reasons) is None
    assert "saving less than 1%" in reasons["default"]
    snap, cands = repack_cluster(1.40)
    strict = settings_mod.Settings(consolidation_min_saving=0.10)
    assert consolidation.many_to_many(snap, cands, strict) is None


def test_many_to_many_new_claims_hold_every_pod() -> None:
    snap, cands = repack_cluster(1.40)
    cmd = consolidation.many_to_many(snap, cands, DEFAULTS)
    assert cmd is not None
    moved = sorted(p.key for c in cmd.replacements for p in c.pods)
    assert moved == sorted(f"default/p{i}-{j}" for i in range(3) for j in range(2))
    pb.expect_claims_hold_their_pods(results.Results(new_claims=list(cmd.replacements)))


# -- MILP ------------------------------------------------------------------------------------------------


def bin_options(types: list[instancetype.InstanceType]) -> list[milp.BinOption]:
    return [milp.BinOption(t, t.cheapest_price() or 0.0, dict(t.allocatable))
            for t in types]


def as_nodes(packed: list[milp.PackedNode]) -> list[results.ExistingNode]:
    out = []
    for i, n in enumerate(packed):
        t = n.option.instance_type
        out.append(results.ExistingNode(
            name=f"bin-{i}", labels={**t.labels, wk.HOSTNAME: f"bin-{i}", wk.ZONE: "zone-a"}, taints=(),
            allocatable=dict(t.allocatable)))
    return out


MIXED = [*pb.make_pods("big", 3, cpu="3", memory="2Gi"), *pb.make_pods("mid", 5, cpu="1500m", memory="8Gi"),
         *pb.make_pods("tiny", 7, cpu="250m", memory="512Mi")]
MILP_TYPES = [pb.make_type("s", cpu=2, memory_gi=8, price=0.10), pb.make_type("m", cpu=4, memory_gi=16, price=0.19),
              pb.make_type("l", cpu=8, memory_gi=32, price=0.40), pb.make_type("r", cpu=4, memory_gi=32, price=0.24)]


def test_the_scheduler_places_every_pod_of_a_milp_plan_on_its_planned_node() -> None:
    packed = milp.milp_pack(MIXED, bin_options(MILP_TYPES))
    assert packed is not None
    assert sorted(p.key for n in packed for p in n.pods) == sorted(p.key for p in MIXED)
    for n, bin_node in zip(packed, as_nodes(packed), strict=True):
        res = scheduler.Scheduler([], {}, [bin_node]).solve(list(n.pods))
        pb.expect_all_placed(res, list(n.pods))
        assert not res.new_claims


def test_the_milp_is_never_dearer_than_the_scheduler_and_agrees_when_nothing_fits() -> None:
    packed = milp.milp_pack(MIXED, bin_options(MILP_TYPES))
    assert packed is not None
    milp_cost = sum(n.option.price for n in packed)
    res = pb.solve(MIXED, types=MILP_TYPES)
    pb.expect_all_placed(res, MIXED)
    assert milp_cost <= res.cost() + 1e-9
    assert milp.milp_pack(MIXED, bin_options(MILP_TYPES), budget=milp_cost - 0.01) is None
    huge = pb.make_pods("huge", 1, cpu="12")
    assert milp.milp_pack(huge, bin_options(MILP_TYPES)) is None
    assert pb.solve(huge, types=MILP_TYPES).errors


def test_a_milp_plan_the_scheduler_would_not_carry_out_gives_way_to_the_schedulers_plan() -> None:
    # the MILP packs the mixed pods of four 8-cpu nodes onto $0.97 of nodes, but placed first fit (as the
    # kube-scheduler will, once those nodes are up) they do not go where it planned: the scheduler's own
    # $1.07 plan is proposed (before: the MILP's, and the pods' next re-pack five minutes later)
    node_type = MILP_TYPES[2]
    names = [f"n{i}" for i in range(4)]
    pods: dict[str, list[pod.Pod]] = {n: [] for n in names}
    for i, p in enumerate(MIXED):
        where = names[i % 4]
        pods[where].append(running(p.name, where, cpu=str(p.requests["cpu"]) + "m",
                                   memory=str(p.requests["memory"] // 1000)))
    snap, cands = cluster([entry(n, node_type, pods[n], created=float(i))
                           for i, n in enumerate(names)], MILP_TYPES)
    plain = consolidation.many_to_many(snap, cands, DEFAULTS, use_milp=False)
    improved = consolidation.many_to_many(snap, cands, DEFAULTS)
    assert plain is not None and improved is not None
    packed = milp.plan(snap, cands, cands[0].nodepool, [p for c in cands for p in c.pods], None, 1.60)
    assert packed is not None and sum(c.price for c in packed) == pytest.approx(0.97)
    assert not simulation.carried_out(snap, cands, packed)
    assert improved.savings_per_hour == plain.savings_per_hour == pytest.approx(1.60 - 1.07)
    assert simulation.carried_out(snap, cands, improved.replacements)
    assert sorted(p.key for c in improved.replacements for p in c.pods) == sorted(p.key for p in MIXED)
    pb.expect_claims_hold_their_pods(results.Results(new_claims=list(improved.replacements)))


def test_one_pass_of_the_three_methods_computes_the_snapshot_s_free_capacity_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    computed: list[object] = []
    real = prefilter.free_capacity

    def counting(snap: snapshot.ClusterSnapshot) -> prefilter.Room:
        computed.append(snap)
        return real(snap)

    monkeypatch.setattr(prefilter, "free_capacity", counting)
    snap, cands = repack_cluster(1.40)
    assert consolidation.single_node(snap, cands, DEFAULTS) is None
    assert consolidation.multi_node(snap, cands, DEFAULTS) is None
    assert consolidation.many_to_many(snap, cands, DEFAULTS) is not None
    assert computed == [snap]
    fresh, fresh_cands = repack_cluster(1.40)  # a new snapshot (a new pass) computes its own
    assert consolidation.single_node(fresh, fresh_cands, DEFAULTS) is None
    assert computed == [snap, fresh]


def test_one_pass_of_the_three_methods_orders_the_candidates_once(monkeypatch: pytest.MonkeyPatch) -> None:
    ordered: list[int] = []
    real = consolidation.order_candidates

    def counting(snap: snapshot.ClusterSnapshot, cands: list[candidates.Candidate]) -> list[candidates.Candidate]:
        ordered.append(len(cands))
        return real(snap, cands)

    monkeypatch.setattr(consolidation, "order_candidates", counting)
    snap, cands = repack_cluster(1.40)
    first = consolidation.single_node(snap, cands, DEFAULTS)
    multi = consolidation.multi_node(snap, cands, DEFAULTS)
    repack = consolidation.many_to_many(snap, cands, DEFAULTS)
    assert (first, multi) == (None, None) and repack is not None
    assert ordered == [len(cands)]
    assert consolidation.single_node(snap, cands[:1], DEFAULTS) is None  # other candidates: ordered anew
    assert ordered == [len(cands), 1]
    fresh, fresh_cands = repack_cluster(1.40)  # a new snapshot (a new pass): the same answers
    assert consolidation.many_to_many(fresh, fresh_cands, DEFAULTS) == repack
    assert ordered == [len(cands), 1, len(cands)]


def test_a_pod_s_disruption_cost_reads_its_deletion_cost_and_priority_and_ignores_a_bad_annotation() -> None:
    plain = running("plain", "n0")
    assert balanced.eviction_cost(plain) == 1.0

    def annotated(value: str, priority: int | None = None) -> pod.Pod:
        p = running("a", "n0", priority=priority)
        md = dataclasses.replace(p.metadata, annotations={consolidation.DELETION_COST_ANNOTATION: value})
        return dataclasses.replace(p, metadata=md)

    assert balanced.eviction_cost(annotated(str(2**27))) == 2.0
    assert balanced.eviction_cost(annotated("not-a-number")) == 1.0
    assert balanced.eviction_cost(annotated("0", priority=2**25)) == 2.0
    assert balanced.eviction_cost(annotated(str(-(2**31)))) == -10.0  # clamped
    assert balanced.eviction_cost(running("p", "n0", priority=-(2**25))) == 0.0
    assert balanced.eviction_cost(annotated("NaN")) == 1.0


def test_a_single_node_pass_stopped_by_its_simulation_bound_says_it_timed_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Karpenter's single-node consolidation timeout (``consolidation_timeouts_total{single}``)."""
    monkeypatch.setattr(consolidation, "MAX_SINGLE_NODE_SIMULATIONS", 1)
    types = [make_type("old", 4, 0.200), make_type("new", 4, 0.199)]  # each simulation saves too little
    snap, cands = cluster([entry(f"n{i}", types[0], [running(f"a{i}", f"n{i}", cpu="3")]) for i in range(3)],
                          types)
    reasons: dict[str, str] = {}
    assert consolidation.single_node(snap, cands, DEFAULTS, reasons=reasons) is None
    assert reasons[consolidation.TIMED_OUT] == "stopped after 1 simulations"
    assert len(reasons) == 2  # one candidate simulated, then the bound


def test_many_to_many_keeps_room_for_a_capacity_buffers_virtual_pods() -> None:
    """Found on the real cluster: the MILP re-packed the candidates' real pods alone, so a re-pack that
    removed the node holding a CapacityBuffer's room dropped the room it had to launch again (and again).
    Three 10-cpu nodes with two 4-cpu pods each and an empty one holding two 4-cpu virtual pods: the six
    real pods fit two 12-cpu nodes ($2.80 < $4.00), all eight need three ($4.20): no saving."""
    a = make_type("a", 10, 1.00)
    types = [a, make_type("c", 12, 1.40)]
    entries = [entry(f"n{i}", a, [running(f"p{i}-{j}", f"n{i}", cpu="4") for j in range(2)], created=float(i))
               for i in range(3)] + [entry("room", a, [], created=3.0)]
    virtual = [dataclasses.replace(p, metadata=dataclasses.replace(
        p.metadata, annotations={**p.metadata.annotations, "karpenter.sh/capacity-buffer-fake-pod": "true"}))
        for p in pb.make_pods("capacity-buffer-room", 2, cpu="4")]
    snap, cands = cluster(entries, types, pending_pods=virtual)
    cmd = consolidation.many_to_many(snap, cands, DEFAULTS)
    assert cmd is None or {p.key for p in virtual} <= {p.key for c in cmd.replacements for p in c.pods}, \
        cmd.explanation
    snap, cands = cluster(entries, types)  # without the buffer the re-pack saves $1.20/h
    expect_command(consolidation.many_to_many(snap, cands, DEFAULTS), "Replace", ["n0", "n1", "n2", "room"])


def packed_cluster(n: int = 4) -> Cluster:
    """``n`` nodes of one 3.9-CPU type, each full with three 1-CPU pods (a fourth never fits): a re-pack
    needs as many nodes again whatever it does, though their CPUs alone would fit on fewer."""
    full = make_type("full", 3.9, 0.20)
    return cluster([entry(f"n{i}", full, [running(f"p{i}-{j}", f"n{i}", cpu="1") for j in range(3)],
                          created=float(i)) for i in range(n)], [full])


def test_many_to_many_refuses_without_a_simulation_when_whole_pods_need_as_many_nodes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    snap, cands = packed_cluster()
    free = consolidation._room(snap)
    assert prefilter._per_node_bound(snap, cands[0].nodepool, [(1000, 128 * 2**20, 1000)] * 12) == \
        pytest.approx(4 * 0.20)
    refused = "Can't replace with a cheaper node set: pods that fit no other node need new nodes costing at " \
        "least $0.8000/h against $0.8000/h, saving less than 1%"
    assert prefilter.hopeless(snap, cands, free, one_node=False, min_saving=0.01) == refused
    assert prefilter.hopeless(snap, cands, free, one_node=False) is None  # a re-pack at the same price may do
    reasons: dict[str, str] = {}
    assert consolidation.repack(snap, cands, DEFAULTS) == consolidation.Refusal(
        tuple(c.name for c in cands),
        "Can't replace with a cheaper node set: re-packing 4 nodes costs $0.8000/h against $0.8000/h, saving less "
        "than 1%")  # what the simulation would have said
    simulations: list[int] = []
    real = consolidation.repack

    def counted(*args: Any, **kwargs: Any) -> consolidation.Command | consolidation.Refusal:
        simulations.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(consolidation, "repack", counted)
    assert consolidation.many_to_many(snap, cands, DEFAULTS, reasons=reasons) is None
    assert simulations == [] and reasons == {"default": refused}


def _uniform_cluster(rng: random.Random) -> Cluster:
    """2 to 5 nodes of three types priced about alike per CPU, holding pods of one size, mostly full."""
    sizes = sorted(rng.sample([1.9, 2.9, 3.9, 5.9, 7.9, 11.9], 3))
    types = [make_type(f"t{i}", cpu, round(cpu * 0.05 * rng.uniform(0.97, 1.03), 4)) for i, cpu in enumerate(sizes)]
    shape = rng.choice([500, 1000, 1500, 2000, 3000])
    one = rng.choice(types) if rng.random() < 0.6 else None
    entries = []
    for i in range(rng.randint(2, 5)):
        t = one or rng.choice(types)
        fits = int(t.allocatable["cpu"]) // shape
        count = fits if rng.random() < 0.7 else rng.randint(0, fits)
        entries.append(entry(f"n{i}", t, [running(f"p{i}-{j}", f"n{i}", cpu=f"{shape}m") for j in range(count)],
                             created=float(i)))
    return cluster(entries, types)


def test_the_per_node_bound_never_refuses_a_re_pack_the_simulation_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random clusters of one NodePool: whenever many-to-many's simulation finds a command, the
    prefilter did not call the group hopeless; and the per-node bound refuses groups the resource
    bound alone let through."""
    rng = random.Random(11)
    made = refused = 0
    bound = prefilter._per_node_bound
    for _ in range(200):
        snap, cands = _uniform_cluster(rng)
        group = consolidation._eligible(snap, cands, consolidation.REASON_UNDERUTILIZED)
        if len(group) < 2:
            continue
        out = consolidation.repack(snap, group, DEFAULTS)  # with the MILP's plans too
        verdict = prefilter.hopeless(snap, group, consolidation._room(snap), one_node=False,
                                     min_saving=DEFAULTS.consolidation_min_saving)
        if isinstance(out, consolidation.Command):
            made += 1
            assert verdict is None, out.explanation
        elif verdict is not None:
            monkeypatch.setattr(prefilter, "_per_node_bound", lambda *_: 0.0)
            refused += prefilter.hopeless(snap, group, consolidation._room(snap), one_node=False,
                                          min_saving=DEFAULTS.consolidation_min_saving) is None
            monkeypatch.setattr(prefilter, "_per_node_bound", bound)
    assert made >= 50 and refused >= 10
