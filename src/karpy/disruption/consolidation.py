"""Consolidation decisions: which nodes to delete or replace with cheaper ones, and why not.

The pure decision core of Karpenter v1's consolidation (``concepts/disruption``) plus karpy's
many-to-many re-pack. Every method takes a :class:`karpy.disruption.snapshot.ClusterSnapshot`,
candidates (:class:`karpy.disruption.candidates.Candidate`) and the operator settings, runs
what-if simulations (:mod:`karpy.disruption.simulation`) and returns a :class:`Command` or
``None``. No I/O: the caller validates after a delay, pre-spins replacements, taints and deletes.

Rules (Karpenter's, in karpy's words):

* Candidates are ordered by disruption cost, cheapest to disrupt first: the sum over their
  reschedulable pods of ``1 + deletion cost / 2^27 + priority / 2^25`` (each clamped to
  [-10, 10]), times the fraction of the node's ``expireAfter`` lifetime left; ties go to the
  older node, then by name. Only NodePools with ``consolidationPolicy: WhenEmptyOrUnderutilized``
  and a ``consolidateAfter`` (not ``Never``) consolidate underutilized nodes, within the NodePool
  disruption budgets for ``Underutilized`` (:meth:`ClusterSnapshot.allowed_disruptions`).
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
small sets a MILP over instance types (:func:`milp_pack`, HiGHS via SciPy) may improve the plan,
which is re-checked with the scheduler before it is used). :func:`evaluate` decides for one given
set of candidates (for re-validation after the delay).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, sparse

from karpy import settings as settings_mod
from karpy.api import labels as wk
from karpy.api import nodepool as nodepool_mod
from karpy.api import pod as pod_mod
from karpy.api import quantity
from karpy.cloudprovider import instancetype
from karpy.disruption import candidates as candidates_mod
from karpy.disruption import simulation
from karpy.disruption import snapshot as snapshot_mod
from karpy.provisioning import podgroups, results, scheduler, templates
from karpy.scheduling import requirement
from karpy.scheduling import requirements as reqs_mod

REASON_UNDERUTILIZED = nodepool_mod.REASON_UNDERUTILIZED
REASON_EMPTY = nodepool_mod.REASON_EMPTY
REASON_DRIFTED = nodepool_mod.REASON_DRIFTED
REASON_EXPIRED = "Expired"
DELETE = "Delete"
REPLACE = "Replace"

MAX_MULTI_CANDIDATES = 100
MIN_SPOT_FLEXIBILITY = 15
MILP_MAX_CANDIDATES = 8
MILP_MAX_PODS = 200
MILP_MAX_COPIES = 32
MILP_TIME_LIMIT = 5.0
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
CANT_REPLACE = "Can't replace with a cheaper node"

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


def pod_disruption_cost(p: pod_mod.Pod) -> float:
    """How much evicting ``p`` hurts: 1, plus its deletion cost and priority, scaled down."""
    cost = 1.0
    with contextlib.suppress(ValueError):
        cost += int(p.annotations.get(DELETION_COST_ANNOTATION, "0")) / 2.0**27
    cost += (p.priority or 0) / 2.0**25
    return max(-10.0, min(10.0, cost))


def lifetime_remaining(c: candidates_mod.Candidate, now: float) -> float:
    """The fraction of the node's ``expireAfter`` lifetime left (1 without expiry or age)."""
    expire = c.nodeclaim.spec.expire_after
    created = c.nodeclaim.metadata.creation_timestamp or c.node.metadata.creation_timestamp
    if expire is None or expire <= 0 or created is None:
        return 1.0
    return max(0.0, min(1.0, (expire - (now - created)) / expire))


def disruption_cost(c: candidates_mod.Candidate, now: float) -> float:
    pods = [p for p in c.pods if candidates_mod.is_reschedulable(p)]
    return sum(pod_disruption_cost(p) for p in pods) * lifetime_remaining(c, now)


def order_candidates(snap: snapshot_mod.ClusterSnapshot,
                     cands: Sequence[candidates_mod.Candidate]) -> list[candidates_mod.Candidate]:
    """Cheapest to disrupt first; ties: older node first, then by name."""
    def key(c: candidates_mod.Candidate) -> tuple[float, float, str]:
        created = c.node.metadata.creation_timestamp
        return disruption_cost(c, snap.now), created if created is not None else math.inf, c.name
    return sorted(cands, key=key)


def consolidates_underutilized(pool: nodepool_mod.NodePool) -> bool:
    d = pool.disruption
    return d.consolidation_policy == nodepool_mod.WHEN_EMPTY_OR_UNDERUTILIZED and d.consolidate_after is not None


def _eligible(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
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


def option_price(t: instancetype.InstanceType, reqs: reqs_mod.Requirements,
                 capacity_types: frozenset[str] | None = None) -> float | None:
    """The cheapest available offering of ``t`` allowed by ``reqs`` (zone, capacity type)."""
    zone_req = reqs.get(wk.ZONE)
    ct_req = reqs.get(wk.CAPACITY_TYPE)
    best: float | None = None
    for o in t.offerings:
        if not o.available:
            continue
        if zone_req is not None and not zone_req.has(o.zone):
            continue
        if ct_req is not None and not ct_req.has(o.capacity_type):
            continue
        if capacity_types is not None and o.capacity_type not in capacity_types:
            continue
        if best is None or o.price < best:
            best = o.price
    return best


def _narrow(claim: results.NewNodeClaim, ceiling: float,
            capacity_types: frozenset[str] | None) -> results.NewNodeClaim | None:
    """``claim`` with only the options priced at most ``ceiling`` (cheapest first), or None."""
    priced = []
    for t in claim.instance_types:
        price = option_price(t, claim.requirements, capacity_types)
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
             settings: Settings, *, reason: str = REASON_UNDERUTILIZED) -> Command | Refusal:
    """Can ``cands`` be removed together, deleted or replaced by at most one cheaper node?

    For ``Drifted`` and ``Expired`` the price rules do not apply: the pods' new NodeClaims (any
    number) become the replacements.
    """
    sim = simulation.simulate_removal(snap, cands)
    return decide(snap, cands, sim, settings, reason=reason)


def decide(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
           sim: simulation.SimulationResult, settings: Settings, *,
           reason: str = REASON_UNDERUTILIZED) -> Command | Refusal:
    """The decision for ``cands`` given their removal simulation ``sim``."""
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


def single_node(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
                settings: Settings, *, allowed: Mapping[str, int] | None = None,
                reasons: dict[str, str] | None = None) -> Command | None:
    """The first candidate, cheapest to disrupt first, that can be deleted or replaced.

    ``allowed`` is the budget per NodePool (default: the snapshot's); ``reasons`` collects why
    each candidate tried was not consolidated.
    """
    budget = allowed if allowed is not None else snap.allowed_disruptions(REASON_UNDERUTILIZED)
    for c in _eligible(snap, cands, REASON_UNDERUTILIZED):
        if budget.get(c.nodepool.name, 0) <= 0:
            if reasons is not None:
                reasons[c.name] = "No allowed disruptions due to blocking budget"
            continue
        out = evaluate(snap, [c], settings)
        if isinstance(out, Command):
            return out
        if reasons is not None:
            reasons[c.name] = out.explanation
    return None


def multi_node(snap: snapshot_mod.ClusterSnapshot, cands: Sequence[candidates_mod.Candidate],
               settings: Settings, *, allowed: Mapping[str, int] | None = None) -> Command | None:
    """The longest prefix (2 or more, in disruption-cost order) removable with at most one new,
    cheaper node, found by binary search; ``None`` when no prefix of 2 or more works."""
    budget = allowed if allowed is not None else snap.allowed_disruptions(REASON_UNDERUTILIZED)
    ordered = _within_budget(_eligible(snap, cands, REASON_UNDERUTILIZED), budget, MAX_MULTI_CANDIDATES)
    best: Command | None = None
    lo, hi = 2, len(ordered)
    while lo <= hi:
        mid = (lo + hi) // 2
        out = evaluate(snap, ordered[:mid], settings)
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
    for pool_name, group in sorted(by_pool.items()):
        if len(group) < 2:
            continue
        out = repack(snap, group, settings, use_milp=use_milp)
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
    if (use_milp and len(group) <= MILP_MAX_CANDIDATES and len(sim.pods) <= MILP_MAX_PODS
            and sim.new_claims):
        cost = sum(c.price for c in plan) if plan is not None else math.inf
        better = _milp_plan(snap, group, pool, sim.pods, capacity_types, min(cost, target))
        if better is not None and sum(c.price for c in better) < cost - 1e-9:
            plan = better
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
        return Command(REASON_UNDERUTILIZED, DELETE, list(group), [], savings,
                       f"Delete {_names(group)}: their {len(sim.pods)} pods fit on other nodes")
    kinds = ", ".join(c.instance_types[0].name for c in final)
    return Command(REASON_UNDERUTILIZED, REPLACE, list(group), final, savings,
                   f"Re-pack {len(group)} nodes ({_names(group)}, ${before:.4f}/h) onto {len(final)} new "
                   f"nodes ({kinds}, ${after:.4f}/h), saving ${savings:.4f}/h")


# ---------------------------------------------------------------------------------------- MILP


@dataclass(frozen=True)
class BinOption:
    """An instance type the MILP may open bins of: price, room for pods, which pods it accepts."""

    instance_type: instancetype.InstanceType
    price: float
    capacity: quantity.ResourceList
    """Allocatable minus the DaemonSet overhead."""
    accepts: Callable[[pod_mod.Pod], bool] | None = None


@dataclass(frozen=True)
class PackedNode:
    option: BinOption
    pods: tuple[pod_mod.Pod, ...]


def milp_pack(pods: Sequence[pod_mod.Pod], options: Sequence[BinOption], *, budget: float | None = None,
              max_copies: int = MILP_MAX_COPIES, time_limit: float = MILP_TIME_LIMIT) -> list[PackedNode] | None:
    """The cheapest set of bins (instance types with prices) holding every pod, or ``None``.

    Bin-packing as a MILP: pods of one shape (requests and accepted options) are one item kind;
    each option may be opened up to ``max_copies`` times (fewer when ``budget`` allows fewer);
    the total price is at most ``budget``. Dominated options (no cheaper, no larger, accepting no
    more) are dropped first. The solution is checked in exact integers before it is returned.
    """
    if not pods:
        return []
    accepts = [[o.accepts is None or o.accepts(p) for o in options] for p in pods]
    shapes: dict[tuple[Any, ...], list[pod_mod.Pod]] = {}
    shape_ok: dict[tuple[Any, ...], list[bool]] = {}
    for p, ok in zip(pods, accepts, strict=True):
        key = (tuple(sorted(p.requests.items())), tuple(ok))
        shapes.setdefault(key, []).append(p)
        shape_ok[key] = ok
    keys = list(shapes)
    dims = sorted({d for p in pods for d in p.requests})
    req = np.array([[dict(k[0]).get(d, 0) for d in dims] for k in keys], dtype=np.int64)
    count = np.array([len(shapes[k]) for k in keys], dtype=np.int64)
    if not options:
        return None
    cap = np.array([[o.capacity.get(d, 0) for d in dims] for o in options], dtype=np.int64)
    cap = cap.reshape(len(options), len(dims))
    fits = np.array([[shape_ok[k][j] and bool((req[s] <= cap[j]).all()) for j in range(len(options))]
                     for s, k in enumerate(keys)], dtype=np.bool_).reshape(len(keys), len(options))
    if not fits.any(axis=1).all():
        return None
    kept = _undominated(options, cap, fits, budget)
    bins: list[int] = []
    for j in kept:
        copies = int(count[fits[:, j]].sum())
        price = options[j].price
        if budget is not None and price > 0:
            copies = min(copies, math.floor(budget / price + 1e-9))
        bins.extend([j] * min(copies, max_copies))
    if not bins:
        return None
    n_s, n_b, n_d = len(keys), len(bins), len(dims)
    n_x = n_s * n_b
    scale = np.maximum(cap.max(axis=0), 1).astype(np.float64)
    cost = np.concatenate([np.zeros(n_x), np.array([options[j].price for j in bins])])
    upper = np.concatenate([np.array([count[s] if fits[s, bins[b]] else 0 for s in range(n_s) for b in range(n_b)],
                                     dtype=np.float64), np.ones(n_b)])
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []
    r = 0
    for s in range(n_s):  # every pod of each shape placed
        for b in range(n_b):
            rows.append(r)
            cols.append(s * n_b + b)
            vals.append(1.0)
        lo.append(float(count[s]))
        hi.append(float(count[s]))
        r += 1
    for b in range(n_b):  # capacity, only when the bin is open
        for d in range(n_d):
            for s in range(n_s):
                if req[s, d] and fits[s, bins[b]]:
                    rows.append(r)
                    cols.append(s * n_b + b)
                    vals.append(req[s, d] / scale[d])
            rows.append(r)
            cols.append(n_x + b)
            vals.append(-cap[bins[b], d] / scale[d])
            lo.append(-np.inf)
            hi.append(0.0)
            r += 1
    for b in range(1, n_b):  # copies of a type open in order (symmetry)
        if bins[b] == bins[b - 1]:
            rows.extend([r, r])
            cols.extend([n_x + b, n_x + b - 1])
            vals.extend([1.0, -1.0])
            lo.append(-np.inf)
            hi.append(0.0)
            r += 1
    if budget is not None:
        for b in range(n_b):
            rows.append(r)
            cols.append(n_x + b)
            vals.append(options[bins[b]].price)
        lo.append(-np.inf)
        hi.append(budget + 1e-9)
        r += 1
    matrix = sparse.coo_array((vals, (rows, cols)), shape=(r, n_x + n_b)).tocsr()
    res = optimize.milp(
        cost, constraints=optimize.LinearConstraint(matrix, np.array(lo), np.array(hi)),
        integrality=np.ones(n_x + n_b), bounds=optimize.Bounds(np.zeros(n_x + n_b), upper),
        options={"time_limit": time_limit, "disp": False})
    if res.x is None:
        return None
    x = np.rint(res.x[:n_x]).astype(np.int64).reshape(n_s, n_b)
    out: list[PackedNode] = []
    taken = [0] * n_s
    for b in range(n_b):
        if not x[:, b].any():
            continue
        chosen: list[pod_mod.Pod] = []
        for s in range(n_s):
            k = int(x[s, b])
            chosen.extend(shapes[keys[s]][taken[s]:taken[s] + k])
            taken[s] += k
        used = (x[:, b][:, None] * req).sum(axis=0)
        if (used > cap[bins[b]]).any():
            return None
        out.append(PackedNode(options[bins[b]], tuple(chosen)))
    if taken != [int(c) for c in count]:
        return None
    return out


def _undominated(options: Sequence[BinOption], cap: Any, fits: Any, budget: float | None) -> list[int]:
    """Options worth opening: useful, within budget, not dominated by a cheaper-or-equal larger one."""
    useful = [j for j in range(len(options)) if fits[:, j].any()
              and (budget is None or options[j].price <= budget + 1e-9)]
    kept = []
    for j in useful:
        dominated = False
        for i in useful:
            if i == j:
                continue
            better_or_equal = (options[i].price <= options[j].price and (cap[i] >= cap[j]).all()
                               and (fits[:, i] >= fits[:, j]).all())
            strictly = (options[i].price < options[j].price or (cap[i] > cap[j]).any()
                        or (fits[:, i] > fits[:, j]).any() or i < j)
            if better_or_equal and strictly:
                dominated = True
                break
        if not dominated:
            kept.append(j)
    return kept


def _is_plain(p: pod_mod.Pod, pool: nodepool_mod.NodePool) -> bool:
    """No topology, host ports or volumes, and tolerates the NodePool: the MILP models it exactly."""
    if p.topology_spread_constraints or p.pod_affinity is not None or p.pod_anti_affinity is not None:
        return False
    if p.host_ports() or p.pvc_names:
        return False
    return scheduler.tolerated(p.tolerations, pool.template.spec.taints, prefer_ok=True) is None


def _daemon_overhead(snap: snapshot_mod.ClusterSnapshot, reqs: reqs_mod.Requirements,
                     pool: nodepool_mod.NodePool) -> quantity.ResourceList:
    out: quantity.ResourceList = {}
    for d in snap.daemonsets:
        if scheduler.daemon_fits(d, reqs, pool.template.spec.taints, node=False):
            out = quantity.add(out, d.requests)
    return out


def _pool_options(snap: snapshot_mod.ClusterSnapshot, pool: nodepool_mod.NodePool,
                  capacity_types: frozenset[str] | None) -> list[tuple[BinOption, reqs_mod.Requirements]]:
    base = templates.nodepool_requirements(pool)
    out = []
    for t in snap.instance_types.get(pool.name, ()):
        treqs = base.intersect(scheduler.instance_type_requirements(t))
        if any(r.is_empty() for r in treqs.values()):
            continue
        price = option_price(t, treqs, capacity_types)
        if price is None:
            continue
        overhead = _daemon_overhead(snap, treqs, pool)
        room = {k: v - overhead.get(k, 0) for k, v in t.allocatable.items()}
        if any(v < 0 for v in room.values()):
            continue

        def accepts(p: pod_mod.Pod, treqs: reqs_mod.Requirements = treqs) -> bool:
            return treqs.compatible(podgroups.make_group([p]).strict_requirements()) is None

        out.append((BinOption(t, price, room, accepts), treqs))
    return out


def _milp_plan(snap: snapshot_mod.ClusterSnapshot, group: Sequence[candidates_mod.Candidate],
               pool: nodepool_mod.NodePool, pods: Sequence[pod_mod.Pod],
               capacity_types: frozenset[str] | None, budget: float) -> list[results.NewNodeClaim] | None:
    """A MILP plan for ``pods``, each planned node re-checked with the scheduling core (as an
    in-flight node: labels, taints, DaemonSet overhead), as NodeClaims; None if none."""
    if not all(_is_plain(p, pool) for p in pods) or not math.isfinite(budget):
        return None
    priced = _pool_options(snap, pool, capacity_types)
    packed = milp_pack(pods, [o for o, _ in priced], budget=budget)
    if not packed:
        return None
    if not _within_limits(snap, group, pool, [n.option.instance_type for n in packed]):
        return None
    treqs_of = {o.instance_type.name: r for o, r in priced}
    bins: list[results.ExistingNode] = []
    for i, n in enumerate(packed):
        name = f"{pool.name}-repack-{i}"
        reqs = treqs_of[n.option.instance_type.name]
        for p in n.pods:
            reqs = reqs.intersect(podgroups.make_group([p]).strict_requirements())
        offer = _cheapest_offering(n.option.instance_type, reqs, capacity_types)
        if offer is None:
            return None
        node_labels = {**n.option.instance_type.labels, **pool.template.labels, wk.NODEPOOL: pool.name,
                       wk.ZONE: offer.zone, wk.CAPACITY_TYPE: offer.capacity_type, wk.HOSTNAME: name}
        bins.append(results.ExistingNode(name=name, labels=node_labels, taints=tuple(pool.template.spec.taints),
                                         allocatable=dict(n.option.instance_type.allocatable), pods=[],
                                         nodepool=pool.name, in_flight=True))
    claims = []
    for b, n in zip(bins, packed, strict=True):
        # Plain pods have no topology between bins: each bin is checked on its own, so the
        # scheduler's first-fit order cannot miss a packing the MILP found.
        check = scheduler.Scheduler((), {}, [b], snap.daemonsets).solve(list(n.pods))
        if check.errors or check.new_claims:
            return None
        claim = _claim_for(snap, pool, n.pods, n.option.price, capacity_types, b.name)
        if claim is None:
            return None
        claims.append(claim)
    return claims


def _cheapest_offering(t: instancetype.InstanceType, reqs: reqs_mod.Requirements,
                       capacity_types: frozenset[str] | None) -> instancetype.Offering | None:
    zone_req = reqs.get(wk.ZONE)
    ct_req = reqs.get(wk.CAPACITY_TYPE)
    ok = [o for o in t.offerings if o.available
          and (zone_req is None or zone_req.has(o.zone)) and (ct_req is None or ct_req.has(o.capacity_type))
          and (capacity_types is None or o.capacity_type in capacity_types)]
    return min(ok, key=lambda o: (o.price, o.zone, o.capacity_type)) if ok else None


def _within_limits(snap: snapshot_mod.ClusterSnapshot, group: Sequence[candidates_mod.Candidate],
                   pool: nodepool_mod.NodePool, types: Sequence[instancetype.InstanceType]) -> bool:
    if not pool.limits:
        return True
    usage = snap.usage_without([c.name for c in group]).get(pool.name, {})
    for t in types:
        usage = quantity.add(usage, t.capacity)
    return all(usage.get(k, 0) <= v for k, v in pool.limits.items())


def _claim_for(snap: snapshot_mod.ClusterSnapshot, pool: nodepool_mod.NodePool, pods: Sequence[pod_mod.Pod],
               ceiling: float, capacity_types: frozenset[str] | None,
               hostname: str) -> results.NewNodeClaim | None:
    """A NodeClaim of ``pool`` for ``pods``: every type that holds them priced at most ``ceiling``."""
    reqs = templates.nodepool_requirements(pool)
    for p in pods:
        reqs = reqs.intersect(podgroups.make_group([p]).strict_requirements())
    if capacity_types is not None:
        reqs = reqs.add(requirement.Requirement.new(wk.CAPACITY_TYPE, "In", sorted(capacity_types)))
    used: quantity.ResourceList = {}
    for p in pods:
        used = quantity.add(used, p.requests)
    options = []
    for t in snap.instance_types.get(pool.name, ()):
        treqs = reqs.intersect(scheduler.instance_type_requirements(t))
        if any(r.is_empty() for r in treqs.values()):
            continue
        price = option_price(t, treqs, capacity_types)
        if price is None or price > ceiling + 1e-12:
            continue
        overhead = _daemon_overhead(snap, treqs, pool)
        need = quantity.add(used, overhead)
        if all(t.allocatable.get(k, 0) >= v for k, v in need.items()):
            options.append((price, t.name, t, overhead))
    if not options:
        return None
    options.sort(key=lambda o: (o[0], o[1]))
    types = [o[2] for o in options]
    overhead0 = options[0][3]
    return results.NewNodeClaim(
        nodepool=pool.name,
        requirements=reqs.add(requirement.Requirement.new(wk.INSTANCE_TYPE, "In", [t.name for t in types])),
        instance_types=types, pods=list(pods), requests=quantity.add(used, overhead0),
        daemon_overhead=overhead0, labels={**pool.template.labels, wk.NODEPOOL: pool.name},
        taints=tuple(pool.template.spec.taints), startup_taints=tuple(pool.template.spec.startup_taints),
        price=options[0][0], hostname=hostname)
