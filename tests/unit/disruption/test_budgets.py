"""Budget arithmetic: counts, percentages, schedules, reasons, the most restrictive wins."""

from __future__ import annotations

import datetime as dt

import pytest

from karpy.api import meta, nodepool
from karpy.disruption import budgets

MIDNIGHT = dt.datetime(2026, 1, 5, tzinfo=dt.UTC).timestamp()


def pool(*bs: nodepool.Budget) -> nodepool.NodePool:
    return nodepool.NodePool(metadata=meta.ObjectMeta(name="default"),
                             disruption=nodepool.Disruption(budgets=bs))


def test_a_count_budget_is_the_count_whatever_the_pool_size() -> None:
    assert budgets.budget_nodes("3", 100) == 3
    assert budgets.budget_nodes("0", 5) == 0


def test_a_percentage_budget_is_rounded_up() -> None:
    assert budgets.budget_nodes("10%", 15) == 2
    assert budgets.budget_nodes("10%", 10) == 1
    assert budgets.budget_nodes("10%", 1) == 1
    assert budgets.budget_nodes("100%", 7) == 7
    assert budgets.budget_nodes("10%", 0) == 0


def test_a_malformed_budget_is_rejected() -> None:
    with pytest.raises(ValueError):
        budgets.budget_nodes("-1", 3)
    with pytest.raises(ValueError):
        budgets.budget_nodes("150%", 3)


def test_the_default_budget_allows_ten_percent_rounded_up() -> None:
    assert budgets.allowed_disruptions(pool(nodepool.Budget()), "Empty", 25, 0, MIDNIGHT) == 3


def test_nodes_already_disrupting_count_against_the_budget() -> None:
    p = pool(nodepool.Budget(nodes="3"))
    assert budgets.allowed_disruptions(p, "Empty", 10, 1, MIDNIGHT) == 2
    assert budgets.allowed_disruptions(p, "Empty", 10, 5, MIDNIGHT) == 0


def test_the_most_restrictive_active_budget_wins() -> None:
    p = pool(nodepool.Budget(nodes="50%"), nodepool.Budget(nodes="2"))
    assert budgets.allowed_disruptions(p, "Empty", 10, 0, MIDNIGHT) == 2


def test_a_budget_for_other_reasons_does_not_limit_this_reason() -> None:
    p = pool(nodepool.Budget(nodes="0", reasons=("Drifted",)), nodepool.Budget(nodes="4"))
    assert budgets.allowed_disruptions(p, "Empty", 10, 0, MIDNIGHT) == 4
    assert budgets.allowed_disruptions(p, "Drifted", 10, 0, MIDNIGHT) == 0


def test_without_an_applicable_budget_every_node_may_go() -> None:
    p = pool(nodepool.Budget(nodes="0", reasons=("Underutilized",)))
    assert budgets.allowed_disruptions(p, "Empty", 6, 0, MIDNIGHT) == 6


def test_a_scheduled_budget_is_active_only_inside_its_window() -> None:
    b = nodepool.Budget(nodes="0", schedule="@daily", duration=600.0)
    assert budgets.is_active(b, MIDNIGHT)
    assert budgets.is_active(b, MIDNIGHT + 599)
    assert not budgets.is_active(b, MIDNIGHT + 600)
    assert not budgets.is_active(b, MIDNIGHT - 1)
    p = pool(b, nodepool.Budget(nodes="5"))
    assert budgets.allowed_disruptions(p, "Empty", 10, 0, MIDNIGHT + 60) == 0
    assert budgets.allowed_disruptions(p, "Empty", 10, 0, MIDNIGHT + 3600) == 5


def test_a_cron_schedule_with_hours_opens_its_window_at_the_given_hour() -> None:
    b = nodepool.Budget(nodes="0", schedule="0 9 * * 1-5", duration=8 * 3600.0)
    monday_noon = MIDNIGHT + 12 * 3600  # 2026-01-05 is a Monday
    assert budgets.is_active(b, monday_noon)
    assert not budgets.is_active(b, MIDNIGHT + 18 * 3600)
