"""Emptiness: which candidates have been empty long enough to be removed, within budgets.

Karpenter v1 (``concepts/disruption``, Consolidation): a node whose NodePool has
any ``consolidationPolicy`` (``WhenEmpty``, ``WhenEmptyOrUnderutilized``, ``Balanced``) and
``consolidateAfter`` other than ``Never``, and that is not static (``spec.replicas``), is removed
once it has had no pods but DaemonSet pods (and finished pods)
for ``consolidateAfter``. The clock starts at the last pod event on the node (a non-daemon pod
scheduled to or leaving it); a node that never had one starts when it was initialized.

Pure: the caller passes the time, the per-node "empty since" and the budget allowances.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from karpy.api import nodeclaim, nodepool
from karpy.disruption import candidates as candidates_mod

REASON = nodepool.REASON_EMPTY


def emptiness_enabled(pool: nodepool.NodePool) -> bool:
    """Whether ``pool``'s empty nodes are removed: any policy with a ``consolidateAfter``; never a static
    NodePool's (``spec.replicas``: Karpenter's emptiness skips them, the replicas are kept)."""
    d = pool.disruption
    return d.consolidate_after is not None and d.consolidation_policy in nodepool.ADMITTED_POLICIES \
        and not pool.is_static


def empty_since(claim: nodeclaim.NodeClaim, tracked: float | None) -> float | None:
    """When the node last saw a pod event: the NodeClaim's ``status.lastPodEventTime``, else
    ``tracked`` (karpy's own record), else when it was initialized, else when it was created."""
    if claim.status.last_pod_event_time is not None:
        return claim.status.last_pod_event_time
    if tracked is not None:
        return tracked
    init = claim.condition(nodeclaim.INITIALIZED)
    if init is not None and init.is_true and init.last_transition_time is not None:
        return init.last_transition_time
    return claim.metadata.creation_timestamp


def is_consolidatable(c: candidates_mod.Candidate, since: float | None, now: float) -> bool:
    """``c`` is empty, its pool allows emptiness, and it has been empty for ``consolidateAfter``."""
    if not emptiness_enabled(c.nodepool) or not candidates_mod.is_empty(c.pods):
        return False
    after = c.nodepool.disruption.consolidate_after
    assert after is not None
    return since is None or now - since >= after


def select(
    eligible: Iterable[tuple[candidates_mod.Candidate, float | None]], allowed: Mapping[str, int]
) -> tuple[list[candidates_mod.Candidate], list[candidates_mod.Candidate]]:
    """Split eligible ``(candidate, empty since)`` into (to disrupt, blocked by budget).

    Oldest emptiness first, at most ``allowed[pool]`` per NodePool.
    """
    left = dict(allowed)
    chosen: list[candidates_mod.Candidate] = []
    blocked: list[candidates_mod.Candidate] = []
    ordered = sorted(eligible, key=lambda cs: (cs[1] if cs[1] is not None else float("-inf"), cs[0].name))
    for c, _ in ordered:
        pool = c.nodepool.name
        if left.get(pool, 0) > 0:
            left[pool] = left.get(pool, 0) - 1
            chosen.append(c)
        else:
            blocked.append(c)
    return chosen, blocked
