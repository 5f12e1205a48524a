"""When a consolidation command may be computed, and whether a queued one still holds.

Consolidation (:mod:`karpy.disruption.controller`) proposes a command, waits
``settings.consolidation_validation_delay`` and then validates it here before it is executed:

* :func:`unsettled` says why consolidation must wait (None when it need not): a NodeClaim still
  launching or a node still initializing that the orchestrator does not protect as a replacement, or
  pending pods nominated to nodes. Read from cluster state only; no snapshot is built.
* :func:`validate` gives the command to execute now or the reason the queued :class:`Pending` command
  no longer holds: the cluster must be settled, every candidate must still be a candidate of the same
  NodeClaim past ``consolidateAfter``, the budgets must still allow them all, and a fresh simulation must
  give a command as good (a deletion stays a deletion; a replacement needs no more nodes and costs no more).

Neither changes the cluster: the controller executes, logs and records what they decide. A failure is a
:class:`Rejection`: its message, and Karpenter's validation failure reason (``budget``, ``scheduling`` or
``churn``, ``getValidationFailureReason``) for the ``ConsolidationRejected`` event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from karpy import settings as settings_mod
from karpy.controllers import state
from karpy.disruption import candidates, claim_tracker, consolidation, node_rows, observation, orchestrator
from karpy.disruption import snapshot as snapshot_mod

BUDGET, SCHEDULING, CHURN = "budget", "scheduling", "churn"
"""Karpenter's validation failure reasons: a budget (or a nomination) no longer allows the candidates;
a fresh simulation gives another result; the candidates changed (karpy: or capacity is launching)."""


class Rejection(str):
    """Why a queued command no longer holds (the string itself) and its failure ``kind``."""

    kind: str

    def __new__(cls, message: str, kind: str) -> Rejection:
        out = super().__new__(cls, message)
        out.kind = kind
        return out


@dataclass
class Pending:
    """A consolidation command waiting for its validation."""

    command: consolidation.Command
    consolidation_type: str
    validate_at: float


def unsettled(obs: observation.Observation, cluster_state: state.ClusterState,
              orch: orchestrator.Orchestrator, tracker: claim_tracker.ClaimTracker,
              rows: node_rows.NodeRows) -> str | None:
    """Why consolidation should wait (capacity is being launched for pending pods), else None.

    The what-if simulation treats in-flight capacity as free; while the provisioner's
    NodeClaims are launching for pending pods, that capacity is spoken for. Read from what the
    tracker and the rows keep (``rows``: the observer's rows, read for ``obs``).
    """
    protected = orch.protected_claims()
    for name in tracker.launching():
        if name not in rows.rows and name not in protected:
            return f"NodeClaim {name} is launching"
    for name in sorted(rows.initializing):
        node_claim = rows.rows[name].claim
        if node_claim is not None and node_claim.name not in protected:
            return f"node {name} is initializing"
    if obs.nominated and cluster_state.pending_pod_count():
        return "pending pods are nominated to " + ", ".join(sorted(obs.nominated))
    return None


def validate(pending: Pending, obs: observation.Observation, *, unsettled: str | None,
             observer: observation.Observer,
             snapshot: Callable[[observation.Observation], snapshot_mod.ClusterSnapshot],
             settings: settings_mod.Settings) -> consolidation.Command | str:
    """The command to execute now, or why ``pending`` no longer holds.

    ``unsettled``: :func:`unsettled` of ``obs``; ``snapshot`` builds the consolidation snapshot of ``obs``.
    """
    cmd = pending.command
    if unsettled is not None:
        return Rejection(unsettled, BUDGET if unsettled.startswith("pending pods are nominated") else CHURN)
    fresh_cands: list[candidates.Candidate] = []
    for c in cmd.candidates:
        cur = obs.candidates.get(c.name)
        if cur is None:
            return Rejection(f"node {c.name} is no longer a candidate ({obs.why_not.get(c.name, 'gone')})", CHURN)
        if cur.nodeclaim.name != c.nodeclaim.name:
            return Rejection(f"node {c.name} belongs to another NodeClaim now", CHURN)
        if not observer.past_consolidate_after(cur, obs):
            return Rejection(f"node {c.name} had a pod event within consolidateAfter", CHURN)
        fresh_cands.append(cur)
    snap = snapshot(obs)
    allowed = snap.allowed_disruptions(cmd.reason)
    wanted: dict[str, int] = {}
    for c in fresh_cands:
        wanted[c.nodepool.name] = wanted.get(c.nodepool.name, 0) + 1
    for pool_name, count in sorted(wanted.items()):
        if allowed.get(pool_name, 0) < count:
            return Rejection(f"the disruption budget of NodePool {pool_name} no longer allows {count} nodes", BUDGET)
    fresh: consolidation.Command | consolidation.Refusal
    if pending.consolidation_type == "many":
        fresh = consolidation.repack(snap, fresh_cands, settings)
    else:
        fresh = consolidation.evaluate(snap, fresh_cands, settings, reason=cmd.reason)
    if isinstance(fresh, consolidation.Refusal):
        return Rejection(fresh.explanation, SCHEDULING)
    if cmd.method == consolidation.DELETE and fresh.method != consolidation.DELETE:
        return Rejection("the candidates' pods no longer fit without a replacement", SCHEDULING)
    if fresh.method == consolidation.REPLACE:
        before = sum(r.price for r in cmd.replacements)
        after = sum(r.price for r in fresh.replacements)
        if len(fresh.replacements) > len(cmd.replacements) or after > before + 1e-9:
            return Rejection(f"the replacement now costs ${after:.4f}/h instead of ${before:.4f}/h", SCHEDULING)
    return fresh
