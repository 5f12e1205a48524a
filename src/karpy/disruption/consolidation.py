"""Consolidation decisions: which nodes to delete or replace with cheaper ones, and why not.

The pure decision core of Karpenter v1's consolidation (``concepts/disruption``) plus karpy's
many-to-many re-pack. Every method takes a :class:`karpy.disruption.snapshot.ClusterSnapshot`,
candidates (:class:`karpy.disruption.candidates.Candidate`) and the operator settings, runs
what-if simulations (:mod:`karpy.disruption.simulation`) and returns a :class:`Command` or
``None``. No I/O: the caller validates after a delay, pre-spins replacements, taints and deletes.

Rules (Karpenter's, in karpy's words):

* Candidates are ordered as Karpenter v1.14 orders them, by savings ratio, highest first: the
  node's price over its disruption, 1 plus the sum over its reschedulable pods of
  ``1 + deletion cost / 2^27 + priority / 2^25`` (each clamped to [-10, 10], negatives counted as 0);
  ties go to the older node, then by name. Drifted candidates go in the order they drifted.
  Only NodePools with ``consolidationPolicy: WhenEmptyOrUnderutilized`` or ``Balanced``
  and a ``consolidateAfter`` (not ``Never``), never a static one (``spec.replicas``), consolidate
  underutilized nodes, within the NodePool disruption budgets for ``Underutilized``
  (:meth:`ClusterSnapshot.allowed_disruptions`).
* ``Balanced``: a move (delete or replace) is made only when its saving outweighs its disruption
  (:mod:`karpy.disruption.balanced`: score >= 1/2 for every Balanced NodePool it touches).
* Never when a removed node's pod would fit nowhere.
* Delete when every pod fits on the rest of the cluster without a new node.
* Replace when the pods need exactly one new node whose instance-type options, kept only when
  priced at most ``(1 - min saving)`` of the removed nodes' price, are not empty. Candidates that
  are all spot are replaced only by spot, only with ``spot_to_spot_consolidation`` on, and for a
  single node only with at least :data:`MIN_SPOT_FLEXIBILITY` cheaper spot options (the
  ``spot_to_spot_min_flexibility`` setting when present). Several nodes are never replaced by a
  node of the instance type of one of them unless it is cheaper than that one (it would be a
  deletion with extra disruption).
* ``settings.consolidation_min_saving`` is read as a fraction of the removed nodes' price
  (default 0.01: a replacement must save at least 1%). Deleting always saves the whole price.

Methods: :func:`single_node` (first candidate, in order, that can go), :func:`multi_node`
(binary search for the longest prefix, at most :data:`MAX_MULTI_CANDIDATES`, that can be deleted
or replaced by one cheaper node), :func:`many_to_many` (karpy: per NodePool, re-pack every
candidate's pods onto a cheaper *set* of new nodes; the scheduling core's packer proposes, and for
small sets a MILP over instance types (:func:`milp.milp_pack`, HiGHS via SciPy) may improve the plan,
which is re-checked with the scheduler before it is used, and kept only if the scheduler, placing the pods
with the plan's nodes up, carries it out: :func:`simulation.carried_out`). :func:`evaluate` decides for one set.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from karpy import settings as settings_mod
from karpy.api import capacitybuffer
from karpy.api import labels as wk
from karpy.api import nodepool as nodepool_mod
from karpy.disruption import balanced, milp, prefilter, simulation
from karpy.disruption import candidates as candidates_mod
from karpy.disruption import snapshot as snapshot_mod
from karpy.provisioning import results
from karpy.scheduling import requirement

REASON_UNDERUTILIZED = nodepool_mod.REASON_UNDERUTILIZED
REASON_EMPTY = nodepool_mod.REASON_EMPTY
REASON_DRIFTED = nodepool_mod.REASON_DRIFTED
REASON_EXPIRED = "Expired"
DELETE = "Delete"
REPLACE = "Replace"

MAX_MULTI_CANDIDATES = 100
MAX_SINGLE_NODE_SIMULATIONS = 25
"""Removal simulations one single-node pass may run (Karpenter bounds the pass by a timeout; a
count keeps karpy deterministic). Candidates are tried in :func:`order_candidates`' order."""
TIMED_OUT = "(timed out)"
"""Key single-node consolidation adds to ``reasons`` when the simulation bound stopped its pass
(Karpenter's single-node timeout: ``karpenter_voluntary_disruption_consolidation_timeouts_total``)."""
MIN_SPOT_FLEXIBILITY = 15
MILP_MAX_CANDIDATES = 8
MILP_MAX_PODS = 200
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
CANT_REPLACE = prefilter.REFUSED

Settings = settings_mod.Settings


@dataclass(frozen=True)
class Command:
    """Remove ``candidates``, launching ``replacements`` first (none for a deletion)."""

    reason: str
    method: str
    candidates: list[candidates_mod.Candidate]
    replacements: list[results.NewNodeClaim]
    savings_per_hour: float
    explanation: str

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.candidates]


@dataclass(frozen=True)
class Refusal:
    """Why ``candidates`` are not consolidated together (for ``Unconsolidatable`` events)."""

    candidates: tuple[str, ...]
    explanation: str


# ------------------------------------------------------------------------------ ordering, budgets


def order_candidates(snap: snapshot_mod.ClusterSnapshot,
                     cands: Sequence[candidates_mod.Candidate]) -> list[candidates_mod.Candidate]:
    """Karpenter v1.14's consolidation order: highest savings ratio first (the node's price per unit of
    disruption, :func:`balanced.savings_ratio`: 1 plus the positive eviction costs of the pods that would
    move), whatever the policy (``consolidation.go`` ``sortCandidates``); ties: older node first, then
    by name. Computed once per snapshot: the methods of one pass order the same candidates."""
    keys: dict[str, tuple[float, float, str]] = snap.__dict__.setdefault("_consolidation_keys", {})

    def key(c: candidates_mod.Candidate) -> tuple[float, float, str]:
        found = keys.get(c.name)
        if found is None:
            created = c.node.metadata.creation_timestamp
            found = keys[c.name] = (-balanced.savings_ratio(snap, c), created if created is not None else math.inf,
                                    c.name)
        return found
    return sorted(cands, key=key)


def _room(snap: snapshot_mod.ClusterSnapshot) -> prefilter.Room:
    """The snapshot's free capacity (:func:`prefilter.free_capacity`), once per snapshot: the
    single-node, multi-node and many-to-many methods of one pass share it (none changes it)."""
    room: prefilter.Room | None = snap.__dict__.get("_room")
    if room is None:
        room = snap.__dict__["_room"] = prefilter.free_capacity(snap)
    return room


UNDERUTILIZED_POLICIES = (nodepool_mod.WHEN_EMPTY_OR_UNDERUTILIZED, nodepool_mod.BALANCED)


def consolidates_underutilized(pool: nodepool_mod.NodePool) -> bool:
    """``WhenEmptyOrUnderutilized`` or ``Balanced`` with a ``consolidateAfter``; never a static NodePool
    (Karpenter: "Disable consolidation for static NodePool")."""
    d = pool.disruption
    return d.consolidation_policy in UNDERUTILIZED_POLICIES and d.consolidate_after is not None \
        and not pool.is_static


def _eligible(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
              reason: str) -> list[candidates_mod.Candidate]:
    """``cands`` the snapshot does not see deleting (and, for ``Underutilized``, of a NodePool that
    consolidates so), in :func:`order_candidates`' order; once per snapshot, reason and candidates
    (the single-node, multi-node and many-to-many methods of one pass ask the same)."""
    memo: dict[tuple[str, tuple[int, ...]], tuple[Sequence[candidates_mod.Candidate], list[candidates_mod.Candidate]]] \
        = snap.__dict__.setdefault("_eligible", {})
    key = (reason, tuple(map(id, cands)))
    hit = memo.get(key)
    if hit is None:  # the candidates are kept with the answer: their ids cannot be reused meanwhile
        hit = memo[key] = (list(cands), _eligible_now(snap, cands, reason))
    return list(hit[1])


def _eligible_now(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
                  reason: str) -> list[candidates_mod.Candidate]:
    out = []
    for c in cands:
        info = snap.node(c.name)
        if info is None or info.deleting:
            continue
        if reason == REASON_UNDERUTILIZED and not consolidates_underutilized(c.nodepool):
            continue
        out.append(c)
    return order_candidates(snap, out)


def _within_budget(ordered: Sequence[candidates_mod.Candidate], allowed: Mapping[str, int],
                   limit: int | None = None) -> list[candidates_mod.Candidate]:
    left = dict(allowed)
    out = []
    for c in ordered:
        pool = c.nodepool.name
        if left.get(pool, 0) <= 0:
            continue
        left[pool] = left.get(pool, 0) - 1
        out.append(c)
        if limit is not None and len(out) >= limit:
            break
    return out


# ----------------------------------------------------------------------------------- pricing


def _narrow(claim: results.NewNodeClaim, ceiling: float,
            capacity_types: frozenset[str] | None) -> results.NewNodeClaim | None:
    """``claim`` with only the options priced at most ``ceiling`` (cheapest first), or None."""
    priced = []
    for t in claim.instance_types:
        price = milp.option_price(t, claim.requirements, capacity_types)
        if price is not None and price <= ceiling + 1e-12:
            priced.append((price, t.name, t))
    if not priced:
        return None
    priced.sort(key=lambda x: (x[0], x[1]))
    types = [t for _, _, t in priced]
    extra = [requirement.Requirement.new(wk.INSTANCE_TYPE, "In", [t.name for t in types])]
    if capacity_types is not None:
        extra.append(requirement.Requirement.new(wk.CAPACITY_TYPE, "In", sorted(capacity_types)))
    return dataclasses.replace(claim, instance_types=types, requirements=claim.requirements.add(*extra),
                               price=priced[0][0])


def _all_spot(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate]) -> bool:
    infos = [snap.node(c.name) for c in cands]
    return bool(infos) and all(i is not None and i.capacity_type == wk.CAPACITY_TYPE_SPOT for i in infos)


def _min_saving(settings: Settings) -> float:
    return max(0.0, float(settings.consolidation_min_saving))


def _spot_flexibility(settings: Settings) -> int:
    return settings.spot_to_spot_min_flexibility


def _names(cands: Sequence[candidates_mod.Candidate]) -> str:
    return ", ".join(c.name for c in cands)


# ---------------------------------------------------------------------------------- deciding


def evaluate(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
             settings: Settings, *, reason: str = REASON_UNDERUTILIZED,
             held: frozenset[str] = frozenset()) -> Command | Refusal:
    """Can ``cands`` be removed together, deleted or replaced by at most one cheaper node?

    For ``Drifted`` and ``Expired`` the price rules do not apply: the pods' new NodeClaims (any
    number) become the replacements. ``held``: pods that stay until the drain's grace period
    (:func:`simulation.simulate_removal`).
    """
    sim = simulation.simulate_removal(snap, cands, held=held)
    return decide(snap, cands, sim, settings, reason=reason)


def decide(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
           sim: simulation.SimulationResult, settings: Settings, *,
           reason: str = REASON_UNDERUTILIZED) -> Command | Refusal:
    """The decision for ``cands`` given their removal simulation ``sim``; a consolidation move of a
    ``Balanced`` NodePool must also pass its score (:func:`balanced.approve`)."""
    out = _decide(snap, cands, sim, settings, reason)
    if isinstance(out, Command) and reason == REASON_UNDERUTILIZED:
        return _balanced(snap, out)
    return out


def _balanced(snap: snapshot_mod.ClusterSnapshot, cmd: Command) -> Command | Refusal:
    """``cmd``, or its refusal when a Balanced NodePool it touches scores it below the threshold; the
    move is noted either way (:func:`balanced.note`, for the metrics and events)."""
    approved: bool = True
    scores: dict[str, balanced.Score] = {}
    if any(balanced.is_balanced(c.nodepool) for c in cmd.candidates):
        approved, scores = balanced.approve(snap, cmd.candidates, cmd.savings_per_hour)
    balanced.note(snap, cmd.candidates, scores, approved, savings=cmd.savings_per_hour,
                  replacements=len(cmd.replacements))
    if approved:
        return cmd
    return Refusal(tuple(cmd.names), f"{CANT_REPLACE if cmd.method == REPLACE else 'Cannot delete'}: "
                                     f"consolidationPolicy Balanced: {balanced.describe(scores)}")


def _decide(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
            sim: simulation.SimulationResult, settings: Settings, reason: str) -> Command | Refusal:
    names = tuple(c.name for c in cands)
    if not sim.all_placed:
        key = sorted(sim.unplaced)[0]
        return Refusal(names, f"Removing {_names(cands)} would leave pod {key} pending: {sim.unplaced[key]}")
    if not sim.new_claims:
        return Command(reason, DELETE, list(cands), [], sim.cost_before,
                       f"Delete {_names(cands)}: its {len(sim.pods)} pods fit on other nodes")
    if reason in (REASON_DRIFTED, REASON_EXPIRED):
        return Command(reason, REPLACE, list(cands), list(sim.new_claims), sim.savings,
                       f"Replace {_names(cands)} with {len(sim.new_claims)} new nodes")
    if len(sim.new_claims) > 1:
        return Refusal(names, f"{CANT_REPLACE}: the pods would need {len(sim.new_claims)} new nodes")
    if sim.unknown_prices:
        return Refusal(names, f"{CANT_REPLACE}: the price of {', '.join(sim.unknown_prices)} is unknown")
    return _replace_one(snap, cands, sim.new_claims[0], sim.cost_before, settings, reason)


def _replace_one(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
                 claim: results.NewNodeClaim, before: float, settings: Settings,
                 reason: str) -> Command | Refusal:
    names = tuple(c.name for c in cands)
    capacity_types: frozenset[str] | None = None
    spot = _all_spot(snap, cands)
    if spot:
        if not settings.spot_to_spot_consolidation:
            return Refusal(names, f"{CANT_REPLACE}: spot-to-spot consolidation is disabled")
        capacity_types = frozenset({wk.CAPACITY_TYPE_SPOT})
    cheaper = _narrow(claim, before - 1e-9, capacity_types)
    if cheaper is None:
        return Refusal(names, CANT_REPLACE)
    if len(cands) > 1:
        same = [info.price for c in cands if (info := snap.node(c.name)) is not None
                and info.instance_type is not None and info.price is not None
                and info.instance_type.name in cheaper.instance_type_names()]
        if same:
            narrowed = _narrow(cheaper, min(same) - 1e-9, capacity_types)
            if narrowed is None:
                return Refusal(names, f"{CANT_REPLACE}: only the instance type of a removed node fits")
            cheaper = narrowed
    worthwhile = _narrow(cheaper, before * (1.0 - _min_saving(settings)), capacity_types)
    if worthwhile is None:
        return Refusal(names, f"{CANT_REPLACE}: the cheapest option saves less than "
                              f"{_min_saving(settings):.0%} of ${before:.4f}/h")
    if spot and len(cands) == 1:
        need = _spot_flexibility(settings)
        if len(worthwhile.instance_types) < need:
            return Refusal(names, f"{CANT_REPLACE}: spot-to-spot consolidation needs {need} cheaper spot "
                                  f"instance types, found {len(worthwhile.instance_types)}")
    savings = before - worthwhile.price
    return Command(reason, REPLACE, list(cands), [worthwhile], savings,
                   f"Replace {_names(cands)} (${before:.4f}/h) with one "
                   f"{worthwhile.instance_types[0].name} (${worthwhile.price:.4f}/h), saving ${savings:.4f}/h")


# ----------------------------------------------------------------------------------- methods


def drifted_empty(snap: snapshot_mod.ClusterSnapshot, ordered: Sequence[candidates_mod.Candidate],
                  allowed: Mapping[str, int]) -> tuple[Command | None, set[str]]:
    """Drift's first move: delete the empty drifted candidates together, within the ``Drifted``
    budgets, in their order; returns the command (None: no empty one fits a budget) and the NodePools
    whose budget turned one away."""
    left = dict(allowed)
    empty: list[candidates_mod.Candidate] = []
    blocked: set[str] = set()
    for c in ordered:
        if not candidates_mod.is_empty(c.pods):
            continue
        if left.get(c.nodepool.name, 0) > 0:
            left[c.nodepool.name] -= 1
            empty.append(c)
        else:
            blocked.add(c.nodepool.name)
    if not empty:
        return None, blocked
    return Command(REASON_DRIFTED, DELETE, empty, [], sum(snap.price_of(c.name) or 0.0 for c in empty),
                   f"Delete drifted empty nodes {', '.join(c.name for c in empty)}"), blocked


def single_node(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
                settings: Settings, *, allowed: Mapping[str, int] | None = None,
                reasons: dict[str, str] | None = None) -> Command | None:
    """The first candidate, in :func:`order_candidates`' order, that can be deleted or replaced.

    ``allowed`` is the budget per NodePool (default: the snapshot's); ``reasons`` collects why
    each candidate tried was not consolidated.
    """
    budget = allowed if allowed is not None else snap.allowed_disruptions(REASON_UNDERUTILIZED)
    free = _room(snap)
    simulations = 0
    for c in _eligible(snap, cands, REASON_UNDERUTILIZED):
        if simulations >= MAX_SINGLE_NODE_SIMULATIONS:
            if reasons is not None:
                reasons[TIMED_OUT] = f"stopped after {simulations} simulations"
            break  # like Karpenter's single-node timeout: the rest wait for the next loop
        if budget.get(c.nodepool.name, 0) <= 0:
            if reasons is not None:
                reasons[c.name] = "No allowed disruptions due to blocking budget"
            continue
        if not balanced.can_pass(snap, c):
            if reasons is not None:
                reasons[c.name] = ("consolidationPolicy Balanced: even deleting the node saves too little for "
                                   "the disruption")
            continue
        quick = prefilter.hopeless(snap, [c], free)
        if quick is not None:
            if reasons is not None:
                reasons[c.name] = quick
            continue
        simulations += 1
        out = evaluate(snap, [c], settings)
        if isinstance(out, Command):
            return out
        if reasons is not None:
            reasons[c.name] = out.explanation
    return None


def multi_node(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
               settings: Settings, *, allowed: Mapping[str, int] | None = None) -> Command | None:
    """The longest prefix (2 or more, in :func:`order_candidates`' order) removable with at most one new,
    cheaper node, found by binary search; ``None`` when no prefix of 2 or more works."""
    budget = allowed if allowed is not None else snap.allowed_disruptions(REASON_UNDERUTILIZED)
    ordered = _within_budget(_eligible(snap, cands, REASON_UNDERUTILIZED), budget, MAX_MULTI_CANDIDATES)
    best: Command | None = None
    free = _room(snap)
    lo, hi = 2, len(ordered)
    while lo <= hi:
        mid = (lo + hi) // 2
        quick = prefilter.hopeless(snap, ordered[:mid], free)
        out = Refusal(tuple(c.name for c in ordered[:mid]), quick) if quick is not None else \
            evaluate(snap, ordered[:mid], settings)
        if isinstance(out, Command):
            best = out
            lo = mid + 1
        else:
            hi = mid - 1
    return best


def many_to_many(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
                 settings: Settings, *, allowed: Mapping[str, int] | None = None,
                 reasons: dict[str, str] | None = None, use_milp: bool = True) -> Command | None:
    """karpy's re-pack: per NodePool, move every candidate's pods onto a cheaper set of new nodes.

    Returns the NodePool command with the largest saving; ``reasons`` gets each refused NodePool's
    explanation. ``use_milp`` False keeps the scheduling core's plan only.
    """
    budget = allowed if allowed is not None else snap.allowed_disruptions(REASON_UNDERUTILIZED)
    ordered = _within_budget(_eligible(snap, cands, REASON_UNDERUTILIZED), budget)
    by_pool: dict[str, list[candidates_mod.Candidate]] = {}
    for c in ordered:
        group = by_pool.setdefault(c.nodepool.name, [])
        if len(group) < MAX_MULTI_CANDIDATES:
            group.append(c)
    best: Command | None = None
    free = _room(snap)
    for pool_name, group in sorted(by_pool.items()):
        if len(group) < 2:
            continue
        quick = prefilter.hopeless(snap, group, free, one_node=False, min_saving=_min_saving(settings))
        out = Refusal(tuple(c.name for c in group), quick) if quick is not None else \
            repack(snap, group, settings, use_milp=use_milp)
        if isinstance(out, Refusal):
            if reasons is not None:
                reasons[pool_name] = out.explanation
            continue
        if best is None or out.savings_per_hour > best.savings_per_hour:
            best = out
    return best


def repack(snap: snapshot_mod.ClusterSnapshot, group: Sequence[candidates_mod.Candidate],
           settings: Settings, *, use_milp: bool = True) -> Command | Refusal:
    """Replace all of ``group`` (one NodePool) by the cheapest set of new nodes found."""
    names = tuple(c.name for c in group)
    sim = simulation.simulate_removal(snap, group)
    if not sim.all_placed:
        key = sorted(sim.unplaced)[0]
        return Refusal(names, f"Removing {_names(group)} would leave pod {key} pending: {sim.unplaced[key]}")
    if sim.unknown_prices:
        return Refusal(names, f"{CANT_REPLACE}: the price of {', '.join(sim.unknown_prices)} is unknown")
    capacity_types: frozenset[str] | None = None
    if _all_spot(snap, group):
        if not settings.spot_to_spot_consolidation and sim.new_claims:
            return Refusal(names, f"{CANT_REPLACE}: spot-to-spot consolidation is disabled")
        capacity_types = frozenset({wk.CAPACITY_TYPE_SPOT})
    before = sim.cost_before
    target = before * (1.0 - _min_saving(settings))
    plan: list[results.NewNodeClaim] | None = None
    repriced = [_narrow(c, math.inf, capacity_types) for c in sim.new_claims]
    if all(c is not None for c in repriced):
        plan = [c for c in repriced if c is not None]
    pool = group[0].nodepool
    # a CapacityBuffer's virtual pods the removal displaces need room in the plan too (a plan of the real
    # pods alone would drop it); room in another pool's claims is left to the scheduling core's plan
    virtual = [p for c in sim.new_claims for p in c.pods if capacitybuffer.is_virtual(p)]
    in_pool = all(c.nodepool == pool.name for c in sim.new_claims if any(capacitybuffer.is_virtual(p) for p in c.pods))
    checked = False  # whether the scheduler carries the plan out (simulation.carried_out): else, churn
    if (use_milp and len(group) <= MILP_MAX_CANDIDATES and len(sim.pods) + len(virtual) <= MILP_MAX_PODS
            and sim.new_claims and in_pool):
        cost = sum(c.price for c in plan) if plan is not None else math.inf
        better = milp.plan(snap, group, pool, [*sim.pods, *virtual], capacity_types, min(cost, target))
        if better is not None and sum(c.price for c in better) < cost - 1e-9 \
                and simulation.carried_out(snap, group, better):
            plan, checked = better, True
    if plan is None:
        return Refusal(names, f"{CANT_REPLACE}: no replacement offering fits the capacity type")
    after = sum(c.price for c in plan)
    if after > target + 1e-12:
        return Refusal(names, f"{CANT_REPLACE} set: re-packing {len(group)} nodes costs ${after:.4f}/h "
                              f"against ${before:.4f}/h, saving less than {_min_saving(settings):.0%}")
    slack = (target - after) / len(plan) if plan else 0.0
    narrowed = [_narrow(c, c.price + slack, capacity_types) for c in plan]
    final = [c for c in narrowed if c is not None]
    savings = before - after
    if not final:
        return _balanced(snap, Command(REASON_UNDERUTILIZED, DELETE, list(group), [], savings,
                                       f"Delete {_names(group)}: their {len(sim.pods)} pods fit on other nodes"))
    if not checked and not simulation.carried_out(snap, group, final):  # the pods would land elsewhere
        return Refusal(names, f"{CANT_REPLACE} set: the scheduler would not place the pods as re-packed")
    kinds = ", ".join(c.instance_types[0].name for c in final)
    return _balanced(snap, Command(
        REASON_UNDERUTILIZED, REPLACE, list(group), final, savings,
        f"Re-pack {len(group)} nodes ({_names(group)}, ${before:.4f}/h) onto {len(final)} new "
        f"nodes ({kinds}, ${after:.4f}/h), saving ${savings:.4f}/h"))


# ---------------------------------------------------------------------------------------- MILP
