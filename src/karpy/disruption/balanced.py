"""``consolidationPolicy: Balanced``: consolidate only when the saving outweighs the disruption.

Karpenter v1.14 (``disruption/balanced.go``, ``designs/balanced-consolidation.md``) in karpy's words.
A Balanced NodePool consolidates underutilized nodes as ``WhenEmptyOrUnderutilized`` does, but every
move (delete or replace) is scored per NodePool and made only when it is worth its disruption:

* a node's **disruption cost** is ``1`` (draining a node at all) plus, for each of its reschedulable
  pods, its eviction cost when positive (``1 + deletion cost / 2^27 + priority / 2^25``, within
  [-10, 10]); the NodePool's **totals** are the summed price of all its nodes and the summed
  disruption cost of all its nodes (every node counts, not only candidates);
* a move's score for a NodePool is ``(savings / pool cost) / (disruption / pool disruption)``, where
  savings are the move's saving (the removed nodes' price, minus the replacement's; a move across
  NodePools gives each its share in proportion to its removed nodes' price) and disruption the summed
  disruption cost of the pool's removed nodes;
* the move is approved when the score is at least ``1 / k`` with ``k = 2`` (:data:`K`), for every
  Balanced NodePool it touches (other policies' pools are not scored). No saving scores 0; no
  disruption scores infinity; a pool of no cost or no disruption approves nothing.
* a candidate whose best move (deleting it: its whole price saved, nothing launched) cannot pass is not
  tried at all (:func:`can_pass`).

Every consolidation move that reaches the score (of any policy) is noted (:func:`note`,
:func:`recorded`); :func:`outcomes` says, as Karpenter's ``balancedEvaluator`` does, which of a
method's moves count in ``karpenter_consolidation_moves_total`` (every single-node move; for a
multi-node method only the command it chose, or its last refused move when it chose none) and
``karpenter_consolidation_score`` (Balanced pools only), and which earn a ``ConsolidationApproved``
event (:func:`approved_message`): on the Node and NodeClaim of an approved single-node move, on each
approving Balanced NodePool of a multi-node one. Refusals get metrics, no event (Karpenter: their
volume would bury the approvals). Pure: prices come from the snapshot.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from karpy.api import nodepool as nodepool_mod
from karpy.api import pod as pod_mod
from karpy.api import stored
from karpy.disruption import candidates as candidates_mod
from karpy.disruption import snapshot as snapshot_mod

K = 2
"""Karpenter's ``BalancedK``: a move passes at score >= 1/2."""
PER_NODE_BASE = 1.0
"""Karpenter's ``PerNodeBaseDisruptionCost``: draining a node costs 1 before any pod."""
_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
APPROVED, REJECTED = "approved", "rejected"
"""The ``decision`` label values of Karpenter's consolidation score metrics."""
EVENT_APPROVED = "ConsolidationApproved"
"""Karpenter's event reason for a move a Balanced NodePool approved."""


@dataclass(frozen=True, slots=True)
class Totals:
    """One NodePool's summed price (US dollars per hour) and disruption cost, over all its nodes."""

    cost: float
    disruption: float


@dataclass(frozen=True, slots=True)
class Score:
    """A move's score for one NodePool (Karpenter's ``ScoreResult``)."""

    savings_fraction: float = 0.0
    disruption_fraction: float = 0.0
    k: int = K

    @property
    def score(self) -> float:
        if self.savings_fraction <= 0:
            return 0.0
        if self.disruption_fraction == 0:
            return math.inf
        return self.savings_fraction / self.disruption_fraction

    @property
    def threshold(self) -> float:
        return 1.0 / self.k

    @property
    def approved(self) -> bool:
        return self.score >= self.threshold


@dataclass(frozen=True, slots=True)
class Move:
    """One consolidation move that reached the score: its candidates, each Balanced NodePool's score
    (other policies are not scored) and whether every Balanced pool approved it."""

    candidates: tuple[candidates_mod.Candidate, ...]
    scores: Mapping[str, Score]
    approved: bool
    savings: float = 0.0
    """The move's saving per hour (Karpenter's ``EstimatedSavings``)."""
    replacements: int = 0

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.candidates)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one NodePool of one counted move reports (Karpenter's ``ApproveCommand`` for a single-node
    move, ``EmitMultiNodeEvents`` for a multi-node one): ``decision`` labels the moves counter, the
    pool's own ``score`` (None: not Balanced) the histogram; ``node`` names the single-node move's node
    (its ``ConsolidationApproved`` goes on the Node and NodeClaim), else the event goes on the NodePool."""

    nodepool: str
    policy: str
    decision: str
    score: Score | None
    node: str | None = None

    @property
    def score_decision(self) -> str:
        return APPROVED if self.score is None or self.score.approved else REJECTED

    @property
    def event(self) -> str | None:
        """The ``ConsolidationApproved`` message, when this outcome publishes one."""
        return approved_message(self.score) if self.score is not None and self.score.approved else None


def is_balanced(pool: nodepool_mod.NodePool) -> bool:
    return pool.disruption.consolidation_policy == nodepool_mod.BALANCED


def eviction_cost(p: pod_mod.Pod) -> float:
    """Karpenter's ``EvictionCost`` of one pod."""
    cost = 1.0
    raw = p.annotations.get(_DELETION_COST)
    if raw is not None:
        with contextlib.suppress(ValueError):
            value = float(raw)
            if math.isfinite(value):  # Karpenter's ParseFloat takes "NaN" too; it would poison the sums
                cost += value / 2.0**27
    if p.priority:
        cost += p.priority / 2.0**25
    return max(-10.0, min(10.0, cost))


def node_disruption_cost(pods: Sequence[pod_mod.Pod]) -> float:
    """Karpenter's ``RescheduleDisruptionCost``: 1 plus the positive eviction costs of the pods that would
    have to move (of a tuple, computed once per tuple: it and its pods are immutable; a candidate keeps
    its tuple from pass to pass)."""
    if type(pods) is tuple:
        return _COSTS.get(pods, lambda: _disruption_cost(pods))
    return _disruption_cost(pods)


def _disruption_cost(pods: Sequence[pod_mod.Pod]) -> float:
    return PER_NODE_BASE + sum(max(0.0, eviction_cost(p)) for p in pods if candidates_mod.is_reschedulable(p))


_COSTS: stored.ByIdentity[float] = stored.ByIdentity(1 << 14)
"""Disruption costs by the identity of the pod tuple (the entry keeps it alive)."""


def score_move(savings: float, disruption: float, totals: Totals, k: int = K) -> Score:
    """Karpenter's ``ScoreMove``: both sides as fractions of the pool's totals."""
    if totals.cost <= 0 or totals.disruption <= 0:
        return Score(k=k)
    return Score(savings / totals.cost, disruption / totals.disruption, k)


def totals(snap: snapshot_mod.ClusterSnapshot) -> dict[str, Totals]:
    """Every NodePool's totals over all its nodes in ``snap`` (computed once per snapshot)."""
    cached: dict[str, Totals] | None = snap.__dict__.get("_balanced_totals")
    if cached is not None:
        return cached
    cost: dict[str, float] = {}
    disruption: dict[str, float] = {}
    for info in snap.nodes:
        if info.nodepool is None:
            continue
        name = info.nodepool.name
        cost[name] = cost.get(name, 0.0) + (info.price or 0.0)
        disruption[name] = disruption.get(name, 0.0) + node_disruption_cost(info.pods)
    out = {name: Totals(cost[name], disruption[name]) for name in cost}
    snap.__dict__["_balanced_totals"] = out
    return out


def recorded(snap: snapshot_mod.ClusterSnapshot) -> list[Move]:
    """The moves noted over ``snap`` since the caller last cleared the list, in order."""
    out: list[Move] = snap.__dict__.setdefault("_balanced_records", [])
    return out


def note(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
         scores: Mapping[str, Score], approved: bool, *, savings: float = 0.0, replacements: int = 0) -> None:
    """Note a move that reached the score (:func:`recorded`)."""
    recorded(snap).append(Move(tuple(cands), dict(scores), approved, savings, replacements))


def can_pass(snap: snapshot_mod.ClusterSnapshot, c: candidates_mod.Candidate) -> bool:
    """Whether deleting ``c`` (the best any move of it can do) would pass; always for other policies."""
    if not is_balanced(c.nodepool):
        return True
    pool_totals = totals(snap).get(c.nodepool.name)
    if pool_totals is None or pool_totals.cost <= 0:
        return True
    return score_move(snap.price_of(c.name) or 0.0, node_disruption_cost(c.pods), pool_totals).approved


def approve(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
            savings: float) -> tuple[bool, dict[str, Score]]:
    """Karpenter's ``EvaluateBalancedMove``: whether every Balanced NodePool of the move approves it,
    and each one's score. ``savings``: the move's saving per hour (removed price minus replacements)."""
    if not cands:
        return False, {}
    by_pool: dict[str, list[candidates_mod.Candidate]] = {}
    for c in cands:
        by_pool.setdefault(c.nodepool.name, []).append(c)
    source = sum(snap.price_of(c.name) or 0.0 for c in cands)
    all_totals = totals(snap)
    approved = True
    scores: dict[str, Score] = {}
    for name, group in sorted(by_pool.items()):
        if not is_balanced(group[0].nodepool):
            continue
        pool_cost = sum(snap.price_of(c.name) or 0.0 for c in group)
        share = savings * (pool_cost / source) if source > 0 and len(by_pool) > 1 else savings
        result = score_move(share, sum(node_disruption_cost(c.pods) for c in group),
                            all_totals.get(name, Totals(0.0, 0.0)))
        scores[name] = result
        approved = approved and result.approved
    return approved, scores


def outcomes(moves: Sequence[Move], chosen: Sequence[str] | None, *, single: bool) -> list[Outcome]:
    """What one consolidation method's ``moves`` report. ``single``: the single-node method, where every
    move counts; otherwise only the move of the ``chosen`` command's candidates, or, when the method
    chose nothing, its last refused move (Karpenter reports the smallest failing window once, not every
    step of its binary search)."""
    if single:
        out: list[Outcome] = []
        for m in moves:
            for c in m.candidates[:1]:
                score = m.scores.get(c.nodepool.name)
                decision = REJECTED if score is not None and not score.approved else APPROVED
                out.append(Outcome(c.nodepool.name, c.nodepool.disruption.consolidation_policy, decision,
                                   score, c.name))
        return out
    if chosen is not None:
        picked = [m for m in moves if m.approved and list(m.names) == list(chosen)]
    else:
        picked = [m for m in moves if not m.approved]
    if not picked:
        return []
    move = picked[-1]
    pools: dict[str, str] = {}
    for c in move.candidates:
        pools.setdefault(c.nodepool.name, c.nodepool.disruption.consolidation_policy)
    decision = APPROVED if move.approved else REJECTED
    return [Outcome(name, policy, decision, move.scores.get(name)) for name, policy in sorted(pools.items())]


def approved_message(s: Score) -> str:
    """Karpenter's ``ConsolidationApproved`` message (Go's ``%.2f`` writes an infinite score ``+Inf``)."""
    score = "+Inf" if math.isinf(s.score) else f"{s.score:.2f}"
    return (f"score {score} >= threshold {s.threshold:.2f} (k: {s.k}, savings {s.savings_fraction * 100:.1f}%, "
            f"disruption {s.disruption_fraction * 100:.1f}%)")


def describe(scores: Mapping[str, Score]) -> str:
    """Why a move was refused, in Karpenter's event words (score, threshold, k, percentages)."""
    return "; ".join(
        f"NodePool {name}: score {s.score:.2f} below threshold {s.threshold:.2f} (k={s.k}): saves "
        f"{s.savings_fraction * 100:.1f}% of the NodePool's cost for {s.disruption_fraction * 100:.1f}% of "
        f"its disruption" for name, s in sorted(scores.items()) if not s.approved)


def savings_ratio(snap: snapshot_mod.ClusterSnapshot, c: candidates_mod.Candidate) -> float:
    """Karpenter's ``SavingsRatio``: price per unit of disruption (higher: better to disrupt)."""
    return (snap.price_of(c.name) or 0.0) / node_disruption_cost(c.pods)
