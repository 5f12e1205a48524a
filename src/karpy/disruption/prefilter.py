"""Cheap necessary conditions checked before a consolidation's removal simulation.

A what-if scheduling run (:func:`karpy.disruption.simulation.simulate_removal`) costs a full
scheduling pass; these checks cost a few NumPy operations per candidate group and only ever say
"hopeless" when the simulation could not succeed either:

* :func:`free_capacity` is every schedulable node's free (cpu, memory, pods) once the pending pods
  are placed first-fit, computed once per pass (:class:`Room`);
* :func:`hopeless` returns :data:`REFUSED` when what of a group's pods cannot fit the other nodes'
  free room (first-fit, largest first, constraints ignored: they can only make placement harder)
  fits no instance type of the group's NodePool cheaper than the group (one new node), or, for a
  set of new nodes, when a price lower bound is not below the group's price: the cheapest price
  per unit of the scarcest resource, or, for the pods that fit no other node even alone, the
  cheapest price per pod a node can hold (pods are not divisible: three 1-CPU pods per 3.9-CPU
  node cost a node per three pods, not per 3.9 CPUs). ``None`` means: run the simulation.

Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from karpy.api import nodepool as nodepool_mod
from karpy.cloudprovider import instancetype
from karpy.disruption import candidates as candidates_mod
from karpy.disruption import milp
from karpy.disruption import snapshot as snapshot_mod
from karpy.provisioning import templates
from karpy.scheduling import requirements as reqs_mod

REFUSED = "Can't replace with a cheaper node"
"""The refusal a hopeless group gets (the consolidation methods' ``CANT_REPLACE``)."""


DIMS = ("cpu", "memory", "pods")


@dataclass
class Room:
    """Free capacity (cpu, memory, pods) of every schedulable node once the pending pods have been
    placed first-fit, computed once per pass; rows by node name. Read-only once built: the rows
    each request fits (:meth:`fitting`) are cached for the whole pass."""

    index: dict[str, int]
    matrix: Any
    _fits: dict[tuple[int, ...], list[int]] = field(default_factory=dict, repr=False)
    _rows: list[list[int]] | None = field(default=None, repr=False)

    def fitting(self, r: tuple[int, ...]) -> list[int]:
        """The rows (ascending) whose free room holds ``r`` in every dimension; one vector
        comparison per distinct request and pass."""
        hit = self._fits.get(r)
        if hit is None:
            if len(self.matrix):
                hit = np.flatnonzero((self.matrix >= np.array(r, dtype=np.int64)).all(axis=1)).tolist()
            else:
                hit = []
            self._fits[r] = hit
        return hit

    def rows(self) -> list[list[int]]:
        """The matrix as Python lists (for the per-group placements, which touch a few rows)."""
        if self._rows is None:
            self._rows = self.matrix.tolist()
        return self._rows


def free_capacity(snap: snapshot_mod.ClusterSnapshot) -> Room:
    """The :class:`Room` of ``snap``."""
    names: list[str] = []
    rows: list[list[int]] = []
    for n in snap.nodes:
        if n.deleting or n.node.unschedulable:
            continue
        names.append(n.name)
        rows.append(_free(n))
    matrix = np.array(rows, dtype=np.int64).reshape(len(rows), len(DIMS))
    for p in snap.pending_pods:  # pending pods are placed in the same simulation: they go first
        _first_fit(matrix, np.array([p.requests.get(d, 0) for d in DIMS], dtype=np.int64))
    return Room({name: i for i, name in enumerate(names)}, matrix)


def _free(info: snapshot_mod.NodeInfo) -> list[int]:
    """The node's free (cpu, memory, pods): allocatable less its pods' requests; once per NodeInfo
    (immutable, and kept by the next snapshot while the node is unchanged)."""
    hit: list[int] | None = info.__dict__.get("_prefilter_free")
    if hit is None:
        e = info.existing_node()
        hit = [e.allocatable.get(d, 0) for d in DIMS]
        for p in e.pods:
            for j, d in enumerate(DIMS):
                hit[j] -= p.requests.get(d, 0)
        info.__dict__["_prefilter_free"] = hit
    return hit


def _requests(info: snapshot_mod.NodeInfo) -> tuple[tuple[int, ...], ...]:
    """The requests (cpu, memory, pods) of the node's reschedulable pods, largest first (cpu, then
    memory; ties in pod order); once per NodeInfo."""
    hit: tuple[tuple[int, ...], ...] | None = info.__dict__.get("_prefilter_requests")
    if hit is None:
        hit = info.__dict__["_prefilter_requests"] = tuple(sorted(
            (tuple(p.requests.get(d, 0) for d in DIMS) for p in info.reschedulable_pods()), key=_largest_first))
    return hit


def _largest_first(r: tuple[int, ...]) -> tuple[int, int]:
    return -r[0], -r[1]


def _first_fit(room: Any, r: Any) -> bool:
    fits = np.flatnonzero((room >= r).all(axis=1)) if len(room) else np.zeros(0, dtype=np.int64)
    if len(fits):
        room[fits[0]] -= r
        return True
    return False


def _unplaceable(snap: snapshot_mod.ClusterSnapshot, group: Sequence[candidates_mod.Candidate],
                 free: Room) -> Any:
    """What of ``group``'s pods does not fit the other nodes' free room (cpu, memory, pods), when
    everything goes first-fit, largest first, ignoring constraints (which can only make placement
    harder); see :func:`_placement`."""
    return np.array(_placement(snap, group, free)[0], dtype=np.int64)


def _placement(snap: snapshot_mod.ClusterSnapshot, group: Sequence[candidates_mod.Candidate],
               free: Room) -> tuple[list[int], list[tuple[int, ...]]]:
    """What of ``group``'s pods the other nodes' free room leaves unplaced, summed (cpu, memory,
    pods), and the requests of the pods that fit no other node's free room even alone (they need
    a new node whatever the placement).

    Room only ever shrinks during the placement, so a pod's first fit is the first row of
    :meth:`Room.fitting` that is neither a removed node nor a row this group already filled
    too far: the cost is the group's pods times the rows it touched, not the cluster's size."""
    removed = {i for c in group if (i := free.index.get(c.name)) is not None}  # they take nothing
    infos = [info for c in group if (info := snap.node(c.name)) is not None]
    if len(infos) == 1:
        reqs: Sequence[tuple[int, ...]] = _requests(infos[0])
    else:  # each node's requests sorted already: a stable sort of the runs gives the order of one sort of all
        reqs = sorted((r for info in infos for r in _requests(info)), key=_largest_first)
    rows = free.rows()
    used: dict[int, list[int]] = {}
    rest = [0] * len(DIMS)
    alone: list[tuple[int, ...]] = []
    for r in reqs:
        room = False
        for i in free.fitting(r):
            if i in removed:
                continue
            room = True
            left = used.get(i)
            if left is None:
                used[i] = [a - b for a, b in zip(rows[i], r, strict=True)]
                break
            if all(a >= b for a, b in zip(left, r, strict=True)):
                for j, b in enumerate(r):
                    left[j] -= b
                break
        else:
            for j, b in enumerate(r):
                rest[j] += b
            if not room:
                alone.append(r)
    return rest, alone


def _per_node_bound(snap: snapshot_mod.ClusterSnapshot, pool: nodepool_mod.NodePool,
                    alone: Sequence[tuple[int, ...]]) -> float:
    """A lower bound on the price of new nodes of ``pool`` holding pods ``alone`` (requests): a node
    of type t holds at most k_t of them (the most of the smallest that fit its allocatable in every
    dimension), so their nodes cost at least ``len(alone) * min(price_t / k_t)``. 0 when no type holds
    even one (the simulation says what then)."""
    if not alone:
        return 0.0
    allocs, prices = _pool_arrays(snap, pool)
    if not len(prices):
        return 0.0
    sums = np.cumsum(np.sort(np.array(alone, dtype=np.int64), axis=0), axis=0)
    most = np.full(len(prices), len(alone), dtype=np.int64)
    for j in range(len(DIMS)):
        most = np.minimum(most, np.searchsorted(sums[:, j], allocs[:, j], side="right"))
    held = most > 0
    if not held.any():
        return 0.0
    return float(len(alone) * np.min(prices[held] / most[held]))


def _pool_arrays(snap: snapshot_mod.ClusterSnapshot, pool: nodepool_mod.NodePool) -> tuple[Any, Any]:
    """:func:`_pool_types` as arrays: allocatable (types x :data:`DIMS`) and prices; cached on the snapshot."""
    cache: dict[str, tuple[Any, Any]] = snap.__dict__.setdefault("_pool_arrays", {})
    hit = cache.get(pool.name)
    if hit is None:
        types = _pool_types(snap, pool)
        allocs = np.array([[t.allocatable.get(d, 0) for d in DIMS] for t, _ in types],
                          dtype=np.int64).reshape(len(types), len(DIMS))
        hit = cache[pool.name] = (allocs, np.array([price for _, price in types], dtype=np.float64))
    return hit


def _pool_types(snap: snapshot_mod.ClusterSnapshot, pool: nodepool_mod.NodePool
                ) -> list[tuple[instancetype.InstanceType, float]]:
    """The instance types ``pool``'s own requirements allow, each with its cheapest offering those
    requirements allow (zone, capacity type); cached on the snapshot."""
    cache: dict[str, list[tuple[instancetype.InstanceType, float]]] = snap.__dict__.setdefault("_pool_types", {})
    hit = cache.get(pool.name)
    if hit is None:
        reqs: reqs_mod.Requirements | None = None
        hit = []
        for t in snap.instance_types.get(pool.name, ()):
            memo = milp.type_memo(snap, t)  # kept across passes with the type object: types are immutable
            seen = memo.get(("prefilter", pool.name))
            if seen is None or seen[0] is not pool:
                if reqs is None:
                    reqs = templates.nodepool_requirements(pool)
                price = milp.option_price(t, reqs) if templates._type_compatible(reqs, t) else None
                seen = memo["prefilter", pool.name] = (pool, price)
            if seen[1] is not None:
                hit.append((t, seen[1]))
        cache[pool.name] = hit
    return hit


def _group_price(snap: snapshot_mod.ClusterSnapshot, group: Sequence[candidates_mod.Candidate]) -> float | None:
    total = 0.0
    for c in group:
        info = snap.node(c.name)
        if info is None or info.price is None:
            return None
        total += info.price
    return total


def hopeless(snap: snapshot_mod.ClusterSnapshot, group: Sequence[candidates_mod.Candidate],
              free: Room, *, one_node: bool = True, min_saving: float = 0.0) -> str | None:
    """``REFUSED`` when a cheap necessary condition already fails, else None.

    What cannot fit the rest of the cluster (see :func:`_placement`) must fit one instance type
    of the group's NodePool cheaper than the group (``one_node``), or a set of new nodes whose
    price lower bound (the cheapest price per unit of the scarcest resource, or per pod a node
    holds of those that fit no other node, :func:`_per_node_bound`, is at most the group's price less
    ``min_saving``, the fraction a re-pack must save) is below it. Only then is the costly removal
    simulation worth running.
    """
    before = _group_price(snap, group)
    if before is None or not group:
        return None
    rest, alone = _placement(snap, group, free)
    if not any(rest):
        return None  # a delete may be possible
    types = _pool_types(snap, group[0].nodepool)
    if one_node:
        for t, price in types:
            if price < before and all(t.allocatable.get(d, 0) >= rest[j] for j, d in enumerate(DIMS)):
                return None
        return REFUSED
    least = _per_node_bound(snap, group[0].nodepool, alone)
    if least > before * (1.0 - min_saving) + 1e-9:  # the pods alone need nodes costing more than a re-pack may
        return (f"{REFUSED} set: pods that fit no other node need new nodes costing at least ${least:.4f}/h "
                f"against ${before:.4f}/h, saving less than {min_saving:.0%}")
    bound = 0.0
    for j, d in enumerate(DIMS):
        if rest[j] <= 0:
            continue
        unit = [price / t.allocatable[d] for t, price in types if t.allocatable.get(d, 0) > 0]
        if unit:
            bound = max(bound, float(rest[j]) * min(unit))
    return None if bound < before else REFUSED
