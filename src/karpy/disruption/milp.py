"""Exact re-packing for consolidation: a small MILP over instance types (SciPy's HiGHS).

:func:`milp_pack` places pods (items with resource vectors) into copies of instance types (bins
with prices) at the least total price; :func:`plan` turns a group of consolidation candidates
into replacement NodeClaims with it, for groups small enough to solve exactly. Pods with
topology, affinity, host ports or volumes stay with the scheduling core's plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from karpy.api import labels as wk
from karpy.api import nodepool as nodepool_mod
from karpy.api import pod as pod_mod
from karpy.api import quantity
from karpy.cloudprovider import instancetype
from karpy.disruption import candidates as candidates_mod
from karpy.disruption import milp_patterns
from karpy.disruption import snapshot as snapshot_mod
from karpy.provisioning import podgroups, results, scheduler, templates
from karpy.scheduling import requirement
from karpy.scheduling import requirements as reqs_mod

MILP_MAX_COPIES = 32
MILP_TIME_LIMIT = 30.0
"""Seconds HiGHS may spend on one problem: a safety net on a wall clock, far above what the node limit
allows (the pattern form's hardest problems in ``bench/design.py`` take under 3 CPU seconds), so that
a loaded machine does not cut a search short at a different point and change a decision."""
MILP_NODE_LIMIT = 2000
"""Branch-and-bound nodes HiGHS may explore on one problem (a deterministic work limit; past it the best
packing found so far, if any, is used)."""
MEMO_LIMIT = 256
"""Problems a :class:`Memo` keeps the solutions of (the oldest go first)."""


class Memo:
    """Solutions of MILP problems already solved, by the exact problem handed to HiGHS (costs,
    constraint matrix, bounds, time limit): a consolidation pass and its validation 15 s later, or
    the next pass over an unchanged group, ask the same question again. Kept by a caller across
    passes; bounded by :data:`MEMO_LIMIT`."""

    def __init__(self, limit: int = MEMO_LIMIT) -> None:
        self.limit = limit
        self._solutions: dict[bytes, Any] = {}
        self.hits = 0
        self.solved = 0

    def get(self, key: bytes) -> tuple[bool, Any]:
        if key in self._solutions:
            self.hits += 1
            return True, self._solutions[key]
        return False, None

    def put(self, key: bytes, x: Any) -> None:
        self.solved += 1
        if len(self._solutions) >= self.limit:
            del self._solutions[next(iter(self._solutions))]
        self._solutions[key] = x


TYPES_LIMIT = 20_000
"""Instance type objects a :class:`Memo` keeps the requirements of (all are dropped past it)."""


def _type_cache(snap: snapshot_mod.ClusterSnapshot) -> dict[int, Any]:
    """Per instance type object (by id, the object kept so that its id is not reused): its requirements,
    and per NodePool name whether that pool allows it. Kept on the snapshot's :class:`Memo` across
    passes when there is one (instance types are immutable: the cloud hands out the same objects until
    its catalog changes), else on the snapshot."""
    memo = snap.milp_memo
    holder = memo.__dict__ if isinstance(memo, Memo) else snap.__dict__
    cache: dict[int, Any] = holder.setdefault("_milp_types", {})
    if len(cache) > TYPES_LIMIT:
        cache.clear()
    return cache


_TypeEntry = list[Any]  # [instance type, its requirements (None until asked for), the type's memo dict]


def _type_entry(snap: snapshot_mod.ClusterSnapshot, t: instancetype.InstanceType) -> _TypeEntry:
    cache = _type_cache(snap)
    hit: _TypeEntry | None = cache.get(id(t))
    if hit is None or hit[0] is not t:
        hit = cache[id(t)] = [t, None, {}]
    return hit


def _type_requirements(snap: snapshot_mod.ClusterSnapshot, t: instancetype.InstanceType) -> reqs_mod.Requirements:
    """:func:`scheduler.instance_type_requirements` of ``t``, once per type object, when first asked for."""
    entry = _type_entry(snap, t)
    if entry[1] is None:
        entry[1] = scheduler.instance_type_requirements(t)
    return entry[1]  # type: ignore[no-any-return]


def type_memo(snap: snapshot_mod.ClusterSnapshot, t: instancetype.InstanceType) -> dict[Any, Any]:
    """A dict kept with instance type object ``t`` (see :func:`_type_cache`) for what a caller derives
    from ``t`` alone and a key it chooses (a NodePool object's verdict on it, say)."""
    return _type_entry(snap, t)[2]  # type: ignore[no-any-return]


def _pool_types(snap: snapshot_mod.ClusterSnapshot,
                pool: nodepool_mod.NodePool) -> list[tuple[instancetype.InstanceType, reqs_mod.Requirements]]:
    """The pool's instance types its requirements allow, each with the type's own requirements (any
    narrower requirements, a claim's, are empty on the others too). Whether a pool allows a type is
    kept per type object and NodePool object; the list, once per snapshot."""
    lists: dict[str, tuple[nodepool_mod.NodePool, list[tuple[instancetype.InstanceType, reqs_mod.Requirements]]]] = \
        snap.__dict__.setdefault("_milp_pool_types", {})
    hit = lists.get(pool.name)
    if hit is not None and hit[0] is pool:
        return hit[1]
    base: reqs_mod.Requirements | None = None
    allowed = []
    for t in snap.instance_types.get(pool.name, ()):
        own, memo = _type_requirements(snap, t), _type_entry(snap, t)[2]
        seen = memo.get(("milp", pool.name))
        if seen is None or seen[0] is not pool:
            if base is None:
                base = templates.nodepool_requirements(pool)
            seen = memo["milp", pool.name] = (pool, not any(r.is_empty() for r in base.intersect(own).values()))
        if seen[1]:
            allowed.append((t, own))
    lists[pool.name] = (pool, allowed)
    return allowed


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
        if o.labels and not instancetype.offering_admits(o, reqs.get):
            continue
        if best is None or o.price < best:
            best = o.price
    return best


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
              max_copies: int = MILP_MAX_COPIES, time_limit: float = MILP_TIME_LIMIT,
              memo: Memo | None = None) -> list[PackedNode] | None:
    """The cheapest set of bins (instance types with prices) holding every pod, or ``None``.

    Bin-packing as a MILP: pods of one shape (requests and accepted options) are one item kind;
    each option may be opened up to ``max_copies`` times (fewer when ``budget`` allows fewer);
    the total price is at most ``budget``. Dominated options (no cheaper, no larger, accepting no
    more) are dropped first. The solution is checked in exact integers before it is returned.
    """
    if not pods:
        return []
    # SciPy's optimizer is imported on first use: most runs never solve a MILP, and importing it
    # costs about a third of a CPU second
    from scipy import sparse

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
    copies = [0] * len(options)
    for j in kept:
        copies[j] = int(count[fits[:, j]].sum())
        price = options[j].price
        if budget is not None and price > 0:
            copies[j] = min(copies[j], math.floor(budget / price + 1e-9))
        copies[j] = min(copies[j], max_copies)
    req_l, count_l, cap_l, fits_l = req.tolist(), count.tolist(), cap.tolist(), fits.tolist()
    patterns = milp_patterns.model(req_l, count_l, cap_l, fits_l, kept, [o.price for o in options], copies,
                                   budget)
    if patterns is not None:
        if not patterns.patterns:
            return None
        n_v = len(patterns.patterns)
        matrix = sparse.coo_array((patterns.vals, (patterns.rows, patterns.cols)),
                                  shape=(len(patterns.lo), n_v)).tocsr()
        solution = _solve(b"patterns", patterns.cost, matrix, patterns.lo, patterns.hi, patterns.upper,
                          time_limit, memo)
        if solution is None:
            return None
        z = np.rint(solution).astype(np.int64).tolist()
        return _packed(pods, options, shapes, keys, req, cap, count,
                       milp_patterns.decode(patterns, z, count_l))
    bins: list[int] = []
    for j in kept:
        bins.extend([j] * copies[j])
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
    solution = _solve(b"bins", cost, matrix, lo, hi, upper, time_limit, memo)
    if solution is None:
        return None
    x = np.rint(solution[:n_x]).astype(np.int64).reshape(n_s, n_b)
    nodes = [(bins[b], [int(v) for v in x[:, b]]) for b in range(n_b) if x[:, b].any()]
    return _packed(pods, options, shapes, keys, req, cap, count, nodes)


def _solve(form: bytes, cost: Any, matrix: Any, lo: Sequence[float], hi: Sequence[float], upper: Any,
           time_limit: float, memo: Memo | None) -> Any:
    """HiGHS's solution of ``min cost @ x`` (integer ``0 <= x <= upper``, ``lo <= matrix @ x <= hi``), or
    ``None``; asked of ``memo`` first. The node limit makes the answer deterministic; the time limit is a
    safety net only (on a loaded machine it could cut a search short at a different point)."""
    from scipy import optimize

    lo_a, hi_a = np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64)
    problem = b"" if memo is None else b"|".join(
        [form, *(a.tobytes() for a in (np.array([matrix.shape[1], matrix.shape[0], time_limit, MILP_NODE_LIMIT]),
                                       cost, lo_a, hi_a, upper, matrix.indptr, matrix.indices, matrix.data))])
    found, solution = memo.get(problem) if memo is not None else (False, None)
    if not found:
        res = optimize.milp(
            cost, constraints=optimize.LinearConstraint(matrix, lo_a, hi_a),
            integrality=np.ones(len(cost)), bounds=optimize.Bounds(np.zeros(len(cost)), upper),
            options={"time_limit": time_limit, "node_limit": MILP_NODE_LIMIT, "disp": False})
        solution = None if res.x is None else np.array(res.x)
        if memo is not None:
            memo.put(problem, solution)
    return solution


def _packed(pods: Sequence[pod_mod.Pod], options: Sequence[BinOption], shapes: dict[tuple[Any, ...], list[pod_mod.Pod]],
            keys: list[tuple[Any, ...]], req: Any, cap: Any, count: Any,
            nodes: Sequence[tuple[int, Sequence[int]]]) -> list[PackedNode] | None:
    """Nodes as (option, pods per shape) given pods, checked in exact integers."""
    out: list[PackedNode] = []
    taken = [0] * len(keys)
    for j, held in nodes:
        chosen: list[pod_mod.Pod] = []
        for s, k in enumerate(held):
            chosen.extend(shapes[keys[s]][taken[s]:taken[s] + k])
            taken[s] += k
        used = (np.array(held, dtype=np.int64)[:, None] * req).sum(axis=0)
        if (used > cap[j]).any():
            return None
        out.append(PackedNode(options[j], tuple(chosen)))
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
    for t, own in _pool_types(snap, pool):
        treqs = base.intersect(own)
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


def plan(snap: snapshot_mod.ClusterSnapshot, group: Sequence[candidates_mod.Candidate],
               pool: nodepool_mod.NodePool, pods: Sequence[pod_mod.Pod],
               capacity_types: frozenset[str] | None, budget: float) -> list[results.NewNodeClaim] | None:
    """A MILP plan for ``pods``, each planned node re-checked with the scheduling core (as an
    in-flight node: labels, taints, DaemonSet overhead), as NodeClaims; None if none."""
    if not all(_is_plain(p, pool) for p in pods) or not math.isfinite(budget):
        return None
    priced = _pool_options(snap, pool, capacity_types)
    packed = milp_pack(pods, [o for o, _ in priced], budget=budget, memo=snap.milp_memo)
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
          and (capacity_types is None or o.capacity_type in capacity_types)
          and (not o.labels or instancetype.offering_admits(o, reqs.get))]
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
    for t, own in _pool_types(snap, pool):
        treqs = reqs.intersect(own)
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
