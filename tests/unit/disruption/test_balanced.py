"""``consolidationPolicy: Balanced``: the score of a move, and consolidation refusing moves below it.

Expectations from Karpenter v1.14's ``pkg/controllers/disruption/balanced_scoring_test.go`` (ScoreMove
table with totals 100/100, "should approve a delete command for a single Balanced NodePool", "should
attribute savings proportionally in cross-NodePool scenarios", "should skip non-Balanced pools and approve
unconditionally", "should reject when command has zero candidates", Candidate.SavingsRatio, "should sort
Balanced candidates by savings ratio (highest first)") and ``designs/balanced-consolidation.md`` (k = 2).
"""

from __future__ import annotations

import math

import pytest

from karpy import settings as settings_mod
from karpy.api import nodepool
from karpy.disruption import balanced, consolidation

from .test_simulation import MEDIUM, cluster, entry, make_pool, make_type, running

DEFAULTS = settings_mod.Settings()
M7I = make_type("m7i.xlarge", 4, 4.84)
TOTALS = balanced.Totals(100.0, 100.0)


@pytest.mark.parametrize(("savings", "disruption", "score", "approved"), [
    (20.0, 5.0, 4.0, True),      # high savings, low disruption
    (10.0, 10.0, 1.0, True),     # equal fractions
    (5.0, 50.0, 0.10, False),    # low savings, high disruption
    (10.0, 0.0, math.inf, True),  # zero disruption cost
    (0.0, 10.0, 0.0, False),     # zero savings
    (-5.0, 10.0, 0.0, False),    # negative savings
])
def test_a_move_is_scored_as_karpenters_score_move_table(savings: float, disruption: float, score: float,
                                                          approved: bool) -> None:
    result = balanced.score_move(savings, disruption, TOTALS)
    assert result.score == pytest.approx(score, abs=0.01)
    assert result.approved is approved
    assert result.threshold == 0.5 and balanced.K == 2


def test_a_pool_of_no_cost_approves_nothing() -> None:
    assert not balanced.score_move(1.0, 1.0, balanced.Totals(0.0, 5.0)).approved


def test_the_savings_ratio_is_price_per_unit_of_disruption() -> None:
    pool = make_pool(policy=nodepool.BALANCED)
    snap, cands = cluster([entry("empty", M7I, []),
                           entry("three", M7I, [running(f"p{i}", "three") for i in range(3)])], [M7I], [pool])
    by_name = {c.name: c for c in cands}
    assert balanced.savings_ratio(snap, by_name["empty"]) == pytest.approx(4.84)
    assert balanced.savings_ratio(snap, by_name["three"]) == pytest.approx(1.21)


def test_deleting_one_of_ten_equal_nodes_scores_one_and_is_approved() -> None:
    pool = make_pool(policy=nodepool.BALANCED)
    snap, cands = cluster([entry(f"n{i}", M7I, [running(f"p{i}", f"n{i}")]) for i in range(10)], [M7I], [pool])
    approved, scores = balanced.approve(snap, cands[:1], snap.price_of("n0") or 0.0)
    assert approved
    assert scores["default"].score == pytest.approx(1.0, abs=0.05)


def test_a_cross_pool_move_gives_the_balanced_pool_its_share_of_the_saving() -> None:
    bal = make_pool("bal", policy=nodepool.BALANCED)
    other = make_pool("other")
    entries = [entry(f"b{i}", M7I, [running(f"bp{i}", f"b{i}")], pool="bal") for i in range(5)]
    entries += [entry(f"o{i}", M7I, [running(f"op{i}", f"o{i}")], pool="other") for i in range(5)]
    snap, cands = cluster(entries, [M7I], [bal, other])
    by_name = {c.name: c for c in cands}
    approved, scores = balanced.approve(snap, [by_name["b0"], by_name["o0"]], 2 * 4.84)
    assert approved and set(scores) == {"bal"}  # the other policy is not scored
    assert scores["bal"].score == pytest.approx(1.0, abs=0.05)


def test_a_move_of_no_candidate_is_refused_and_other_policies_are_not_scored() -> None:
    snap, cands = cluster([entry("n1", M7I, [])], [M7I], [make_pool()])
    assert balanced.approve(snap, [], 1.0) == (False, {})
    assert balanced.approve(snap, cands, 4.84) == (True, {})


def test_balanced_candidates_are_ordered_by_savings_ratio_highest_first() -> None:
    pool = make_pool(policy=nodepool.BALANCED)
    snap, cands = cluster([entry("b", M7I, [running(f"b{i}", "b") for i in range(9)]),
                           entry("a", M7I, []),
                           entry("c", M7I, [running(f"c{i}", "c") for i in range(3)])], [M7I], [pool])
    assert [c.name for c in consolidation.order_candidates(snap, cands)] == ["a", "c", "b"]


def test_a_balanced_pool_refuses_to_move_a_busy_node_whose_saving_is_small_against_its_disruption() -> None:
    """A small node holding most of the pool's pods: deleting it saves 1/11 of the cost for 21/23 of the
    disruption (score ~0.10 < 0.5); WhenEmptyOrUnderutilized deletes it."""
    big = make_type("big", 64, 1.0)
    tiny = make_type("tiny", 64, 0.1)
    pods = [running(f"p{i}", "busy", cpu="100m") for i in range(20)]
    entries = [entry("busy", tiny, pods), entry("spare", big, [running("q", "spare", cpu="100m")])]
    for policy, deleted in ((nodepool.BALANCED, False), (nodepool.WHEN_EMPTY_OR_UNDERUTILIZED, True)):
        pool = make_pool(policy=policy)
        snap, cands = cluster(entries, [big, tiny], [pool])
        reasons: dict[str, str] = {}
        cmd = consolidation.single_node(snap, [c for c in cands if c.name == "busy"], DEFAULTS, reasons=reasons)
        assert (cmd is not None) is deleted, reasons
        if not deleted:
            assert "Balanced" in reasons["busy"]


def test_a_balanced_pool_deletes_a_node_whose_saving_outweighs_its_disruption() -> None:
    """Two equal nodes with one pod each: deleting one saves half the cost for a half of the disruption
    (score 1 >= 0.5)."""
    pool = make_pool(policy=nodepool.BALANCED)
    snap, cands = cluster([entry("n1", MEDIUM, [running("a", "n1")], created=0.0),
                           entry("n2", MEDIUM, [running("b", "n2")], created=5.0)], [MEDIUM], [pool])
    cmd = consolidation.single_node(snap, cands, DEFAULTS)
    assert cmd is not None and cmd.method == "Delete"
    records = balanced.recorded(snap)
    assert records and records[-1].approved and records[-1].scores["default"].score == pytest.approx(1.0)


def test_a_multi_node_move_a_balanced_pool_scores_too_low_is_refused() -> None:
    """Removing three busy small nodes into one spare: the saving (3 x 0.1 of 1.3) is worth far less than
    moving 30 of the pool's 31 pods (score ~0.24): refused; WhenEmptyOrUnderutilized takes it."""
    big = make_type("big", 64, 1.0)
    tiny = make_type("tiny", 64, 0.1)
    entries = [entry(f"t{j}", tiny, [running(f"p{j}{i}", f"t{j}", cpu="100m") for i in range(10)])
               for j in range(3)]
    entries.append(entry("spare", big, [running("q", "spare", cpu="100m")]))
    for policy, moved in ((nodepool.BALANCED, False), (nodepool.WHEN_EMPTY_OR_UNDERUTILIZED, True)):
        snap, cands = cluster(entries, [big, tiny], [make_pool(policy=policy)])
        cmd = consolidation.multi_node(snap, [c for c in cands if c.name != "spare"], DEFAULTS)
        assert (cmd is not None) is moved
