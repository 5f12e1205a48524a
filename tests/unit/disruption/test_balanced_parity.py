"""``consolidationPolicy: Balanced`` case by case against Karpenter v1.14.3's own tests.

Expectations from ``pkg/controllers/disruption/balanced_test.go`` (the RFC pool: ten nodes, $58.08 a
day, disruption 90), ``balanced_scoring_test.go`` (totals over every node, cross-pool moves, every
Balanced pool must approve), ``balanced_adversarial_test.go`` (a lone node's delete scores 1) and
``balanced_integration_test.go`` (an oversized node replaced, three underutilized nodes, budgets of 0%,
mixed policies); the reporting rules (which moves count in ``karpenter_consolidation_moves_total``,
which publish ``ConsolidationApproved`` and with what message) from ``balanced.go`` and
``events/events.go``.
"""

from __future__ import annotations

import math

import pytest

from karpy import settings as settings_mod
from karpy.api import nodepool
from karpy.disruption import balanced, candidates, consolidation

from .test_simulation import cluster, entry, make_pool, make_type, running

DEFAULTS = settings_mod.Settings()
RFC = balanced.Totals(58.08, 90.0)
M7I = make_type("m7i.xlarge", 4, 4.84)


@pytest.mark.parametrize(("savings", "disruption", "totals", "k", "approved"), [
    (7.26, 4.0, RFC, 2, True),                         # an oversized node replaced (m7i.2xlarge -> large)
    (4.84, 5.0, RFC, 2, True),                         # a spare node deleted
    (2.42, 9.0, RFC, 2, False),                        # a marginal move
    (0.0, 11.0, RFC, 2, False),                        # a well-packed node, no saving
    (2.42, 9.0, balanced.Totals(48.40, 90.0), 2, True),  # the same move in a uniform pool
    (4.84, 5.0, balanced.Totals(58.08, 117.0), 2, True),   # a light node of a heterogeneous pool
    (4.84, 32.0, balanced.Totals(58.08, 117.0), 2, False),  # a heavy node of the same pool
    (7.26, 4.0, balanced.Totals(580.80, 900.0), 2, True),   # ten times the pool, same score
    (2.42, 9.0, RFC, 3, True),                         # k = 3 takes the marginal move
    (2.42, 9.0, RFC, 1, False),                        # k = 1 does not
    (4.84, 4.0, balanced.Totals(48.40, 90.0), 2, True),   # on-demand pool
    (1.45, 4.0, balanced.Totals(14.50, 90.0), 2, True),   # spot pool, the same fractions
])
def test_a_move_is_scored_as_karpenters_rfc_examples(savings: float, disruption: float, totals: balanced.Totals,
                                                     k: int, approved: bool) -> None:
    result = balanced.score_move(savings, disruption, totals, k)
    expected = (savings / totals.cost) / (disruption / totals.disruption)
    assert result.score == pytest.approx(expected, abs=0.02)
    assert result.savings_fraction == pytest.approx(savings / totals.cost)
    assert result.approved is approved


def test_the_score_is_the_same_for_a_pool_ten_times_larger() -> None:
    small = balanced.score_move(7.26, 4.0, RFC)
    large = balanced.score_move(7.26, 4.0, balanced.Totals(580.80, 900.0))
    assert small.score == pytest.approx(large.score, abs=0.01)


def test_zero_disruption_scores_infinity_and_zero_saving_or_zero_pool_cost_is_refused() -> None:
    assert math.isinf(balanced.score_move(4.84, 0.0, RFC).score) and balanced.score_move(4.84, 0.0, RFC).approved
    assert not balanced.score_move(0.0, 0.0, RFC).approved
    assert not balanced.score_move(4.84, 5.0, balanced.Totals(0.0, 90.0)).approved


def test_a_pools_totals_count_every_node_one_plus_one_per_pod() -> None:
    pool = make_pool(policy=nodepool.BALANCED)
    snap, _ = cluster([entry(f"n{i}", M7I, [running(f"p{i}", f"n{i}")]) for i in range(5)], [M7I], [pool])
    totals = balanced.totals(snap)["default"]
    assert totals.cost == pytest.approx(5 * 4.84)
    assert totals.disruption == pytest.approx(10.0)


def test_deleting_the_only_node_of_a_pool_scores_one_and_is_approved() -> None:
    pool = make_pool(policy=nodepool.BALANCED)
    snap, cands = cluster([entry("only", M7I, [running("p", "only")])], [M7I], [pool])
    approved, scores = balanced.approve(snap, cands, 4.84)
    assert approved
    assert scores["default"].savings_fraction == pytest.approx(1.0)
    assert scores["default"].score == pytest.approx(1.0)


def test_a_move_is_refused_when_one_balanced_pool_refuses_though_the_other_approves() -> None:
    """Pool a: ten equal nodes, one pod each (deleting one scores 1). Pool b: a node holding 20 pods
    beside two light ones: deleting it saves a third of b's cost for 21/25 of its disruption (0.40)."""
    tiny = make_type("tiny", 64, 1.0)
    entries = [entry(f"a{i}", M7I, [running(f"ap{i}", f"a{i}")], pool="a") for i in range(10)]
    entries += [entry("b0", tiny, [running(f"h{i}", "b0", cpu="100m") for i in range(20)], pool="b"),
                entry("b1", tiny, [running("l1", "b1")], pool="b"), entry("b2", tiny, [running("l2", "b2")], pool="b")]
    snap, cands = cluster(entries, [M7I, tiny], [make_pool("a", policy=nodepool.BALANCED),
                                                 make_pool("b", policy=nodepool.BALANCED)])
    by_name = {c.name: c for c in cands}
    approved, scores = balanced.approve(snap, [by_name["a0"], by_name["b0"]], 4.84 + 1.0)
    assert scores["a"].approved and scores["a"].score == pytest.approx(1.0)
    assert not scores["b"].approved and scores["b"].score == pytest.approx((1 / 3) / (21 / 25))
    assert not approved


def test_a_lightly_loaded_balanced_pool_share_of_a_cross_pool_delete_is_borderline_approved() -> None:
    """Karpenter's AllPoolsMustApprove numbers: b's heavy node (20 pods) of two: 0.5 / (21/23) = 0.548."""
    tiny = make_type("tiny", 64, 1.0)
    entries = [entry(f"a{i}", M7I, [running(f"ap{i}", f"a{i}")], pool="a") for i in range(10)]
    entries += [entry("b0", tiny, [running(f"h{i}", "b0", cpu="100m") for i in range(20)], pool="b"),
                entry("b1", tiny, [running("l1", "b1")], pool="b")]
    snap, cands = cluster(entries, [M7I, tiny], [make_pool("a", policy=nodepool.BALANCED),
                                                 make_pool("b", policy=nodepool.BALANCED)])
    by_name = {c.name: c for c in cands}
    approved, scores = balanced.approve(snap, [by_name["a0"], by_name["b0"]], 4.84 + 1.0)
    assert approved and scores["b"].score == pytest.approx(0.5 / (21 / 23))


# -- moves in the consolidation methods ------------------------------------------------------------


def test_an_oversized_node_with_one_small_pod_is_replaced_and_approved_with_karpenters_message() -> None:
    big = make_type("big", 32, 4.0)
    small = make_type("small", 2, 0.5)
    pool = make_pool(policy=nodepool.BALANCED)
    snap, cands = cluster([entry("n", big, [running("p", "n", cpu="500m")])], [big, small], [pool])
    cmd = consolidation.single_node(snap, cands, DEFAULTS)
    assert cmd is not None and cmd.method == consolidation.REPLACE
    found = balanced.outcomes(balanced.recorded(snap), cmd.names, single=True)
    assert [(o.nodepool, o.policy, o.decision, o.node) for o in found] == [
        ("default", nodepool.BALANCED, balanced.APPROVED, "n")]
    assert found[0].event == "score 0.88 >= threshold 0.50 (k: 2, savings 87.5%, disruption 100.0%)"


def test_three_underutilized_balanced_nodes_are_consolidated_together_and_the_nodepool_gets_the_event() -> None:
    big = make_type("big", 32, 4.0)
    pool = make_pool(policy=nodepool.BALANCED)
    snap, cands = cluster([entry(f"n{i}", big, [running(f"p{i}", f"n{i}")]) for i in range(3)], [big], [pool])
    cmd = consolidation.multi_node(snap, cands, DEFAULTS)
    assert cmd is not None and len(cmd.candidates) >= 2
    found = balanced.outcomes(balanced.recorded(snap), cmd.names, single=False)
    assert [(o.nodepool, o.decision, o.node) for o in found] == [("default", balanced.APPROVED, None)]
    assert found[0].event is not None and "k: 2" in found[0].event and ">= threshold 0.50" in found[0].event


def test_a_budget_of_zero_gives_no_move_and_no_approval() -> None:
    big = make_type("big", 32, 4.0)
    small = make_type("small", 2, 0.5)
    pool = make_pool(policy=nodepool.BALANCED, budget="0%")
    snap, cands = cluster([entry("n", big, [running("p", "n", cpu="500m")])], [big, small], [pool])
    assert consolidation.single_node(snap, cands, DEFAULTS) is None
    assert balanced.outcomes(balanced.recorded(snap), None, single=True) == []


def test_a_refused_single_node_move_is_counted_rejected_and_publishes_no_event() -> None:
    big = make_type("big", 64, 1.0)
    tiny = make_type("tiny", 64, 0.6)
    pool = make_pool(policy=nodepool.BALANCED)
    snap, cands = cluster([entry("n", big, [running(f"p{i}", "n", cpu="100m") for i in range(3)])],
                          [big, tiny], [pool])
    assert consolidation.single_node(snap, cands, DEFAULTS) is None  # saves 40% of the pool for all of it
    found = balanced.outcomes(balanced.recorded(snap), None, single=True)
    assert [(o.decision, o.score_decision, o.event) for o in found] == [(balanced.REJECTED, balanced.REJECTED, None)]
    assert found[0].score is not None and found[0].score.score == pytest.approx(0.4)


def test_other_policies_moves_are_counted_approved_but_never_scored_nor_announced() -> None:
    big = make_type("big", 32, 4.0)
    small = make_type("small", 2, 0.5)
    snap, cands = cluster([entry("n", big, [running("p", "n", cpu="500m")])], [big, small], [make_pool()])
    cmd = consolidation.single_node(snap, cands, DEFAULTS)
    assert cmd is not None
    found = balanced.outcomes(balanced.recorded(snap), cmd.names, single=True)
    assert [(o.policy, o.decision, o.score, o.event) for o in found] == [
        (nodepool.WHEN_EMPTY_OR_UNDERUTILIZED, balanced.APPROVED, None, None)]


# -- which moves report ------------------------------------------------------------------------------


def _move(snap_cands: list[candidates.Candidate], names: tuple[str, ...],
          scores: dict[str, balanced.Score]) -> balanced.Move:
    by_name = {c.name: c for c in snap_cands}
    return balanced.Move(tuple(by_name[n] for n in names), scores, all(s.approved for s in scores.values()))


def test_a_multi_node_method_that_chose_nothing_reports_only_its_last_refused_window() -> None:
    pool = make_pool(policy=nodepool.BALANCED)
    _, cands = cluster([entry(f"n{i}", M7I, [running(f"p{i}", f"n{i}")]) for i in range(4)], [M7I], [pool])
    low = balanced.Score(0.1, 0.5)
    lower = balanced.Score(0.05, 0.5)
    moves = [_move(cands, ("n0", "n1", "n2"), {"default": low}), _move(cands, ("n0", "n1"), {"default": lower})]
    found = balanced.outcomes(moves, None, single=False)
    assert [(o.decision, o.score) for o in found] == [(balanced.REJECTED, lower)]
    assert found[0].event is None


def test_a_multi_node_move_across_pools_announces_only_the_scored_pools_that_approve() -> None:
    _, cands = cluster([entry("a0", M7I, [], pool="a"), entry("b0", M7I, [], pool="b")], [M7I],
                       [make_pool("a", policy=nodepool.BALANCED), make_pool("b")])
    move = _move(cands, ("a0", "b0"), {"a": balanced.Score(0.10, 0.05)})
    found = balanced.outcomes([move], ["a0", "b0"], single=False)
    assert [(o.nodepool, o.policy, o.decision, o.event is not None) for o in found] == [
        ("a", nodepool.BALANCED, balanced.APPROVED, True),
        ("b", nodepool.WHEN_EMPTY_OR_UNDERUTILIZED, balanced.APPROVED, False)]
    assert found[0].event == "score 2.00 >= threshold 0.50 (k: 2, savings 10.0%, disruption 5.0%)"


def test_an_infinite_score_is_written_as_go_writes_it() -> None:
    assert balanced.approved_message(balanced.Score(0.1, 0.0)) == (
        "score +Inf >= threshold 0.50 (k: 2, savings 10.0%, disruption 0.0%)")
