"""NodePool disruption budgets: how many of a NodePool's nodes may be disrupted now, for a reason.

Karpenter v1 semantics (``concepts/disruption``, "NodePool Disruption Budgets"):

* ``nodes`` is a count (``"3"``) or a percentage (``"10%"``) of the NodePool's nodes; a percentage
  is rounded up (``10%`` of 15 nodes is 2).
* A budget with ``schedule`` (cron, UTC, or ``@daily`` etc.) and ``duration`` is active only
  inside ``[fire time, fire time + duration)``; without a schedule it is always active.
* ``reasons`` (``Empty``, ``Drifted``, ``Underutilized``) restrict a budget to those reasons;
  no reasons means every reason.
* Of the active budgets that apply to the reason, the most restrictive wins. Nodes already being
  disrupted (deleting) or not ready count against it: allowed = max(0, min(nodes) - disrupting).
* With no active budget for the reason, nothing limits disruption (all nodes are allowed).

Everything here is pure and takes the current time as an argument.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Iterable

from croniter import croniter

from karpy.api import nodepool as nodepool_mod


def budget_nodes(nodes: str, total: int) -> int:
    """The node count a budget's ``nodes`` value stands for, out of ``total`` nodes.

    ``"3"`` -> 3; ``"10%"`` -> ceil(10% of total). Raises ``ValueError`` on anything else.
    """
    text = nodes.strip()
    if text.endswith("%"):
        percent = int(text[:-1])
        if percent < 0 or percent > 100:
            raise ValueError(f"budget nodes percentage must be 0-100%, found {nodes!r}")
        return math.ceil(percent * total / 100)
    count = int(text)
    if count < 0:
        raise ValueError(f"budget nodes must not be negative, found {nodes!r}")
    return count


def is_active(budget: nodepool_mod.Budget, now: float) -> bool:
    """True when ``budget`` is in force at ``now`` (epoch seconds).

    A scheduled budget is active when the schedule fired within the last ``duration`` seconds
    (the fire time itself included, the end excluded).
    """
    if budget.schedule is None or budget.duration is None:
        return True
    window_start = now - budget.duration
    start = _dt.datetime.fromtimestamp(window_start, tz=_dt.UTC)
    fire = croniter(budget.schedule, start).get_next(float)
    return window_start < fire <= now


def active_limit(budgets: Iterable[nodepool_mod.Budget], reason: str, total: int, now: float) -> int:
    """The most restrictive node count of the budgets active at ``now`` for ``reason``.

    ``total`` when no budget applies.
    """
    limits = [budget_nodes(b.nodes, total) for b in budgets if b.applies_to(reason) and is_active(b, now)]
    return min(limits) if limits else total


def allowed_disruptions(
    pool: nodepool_mod.NodePool, reason: str, total: int, disrupting: int, now: float
) -> int:
    """How many more of ``pool``'s ``total`` nodes may start being disrupted for ``reason`` now.

    ``disrupting`` counts the pool's nodes already being deleted or not ready.
    """
    limit = active_limit(pool.disruption.budgets, reason, total, now)
    return max(0, limit - disrupting)
