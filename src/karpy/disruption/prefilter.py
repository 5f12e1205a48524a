"""Cheap necessary conditions checked before a consolidation's removal simulation.

A what-if scheduling run (:func:`karpy.disruption.simulation.simulate_removal`) costs a full
scheduling pass; these checks cost a few NumPy operations per candidate group and only ever say
"hopeless" when the simulation could not succeed either:

* :func:`free_capacity` is every schedulable node's free (cpu, memory, pods) once the pending pods
  are placed first-fit, computed once per pass (:class:`Room`);
* :func:`hopeless` returns :data:`REFUSED` when what of a group's pods cannot fit the other nodes'
  free room (first-fit, largest first, constraints ignored: they can only make placement harder)
  fits no instance type of the group's NodePool cheaper than the group (one new node), or, for a
  set of new nodes, when a price lower bound (the cheapest price per unit of the scarcest
  resource) is not below the group's price. ``None`` means: run the simulation.

Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from karpy.api import nodepool as nodepool_mod
from karpy.cloudprovider import instancetype
from karpy.disruption import candidates as candidates_mod
from karpy.disruption import milp
from karpy.disruption import snapshot as snapshot_mod
from karpy.provisioning import templates

REFUSED = "Can't replace with a cheaper node"
"""The refusal a hopeless group gets (the consolidation methods' ``CANT_REPLACE``)."""


DIMS = ("cpu", "memory", "pods")


@dataclass
class Room:
    """Free capacity (cpu, memory, pods) of every schedulable node once the pending pods have been
    placed first-fit, computed once per pass; rows by node name."""

    index: dict[str, int]
    matrix: Any


def free_capacity(snap: snapshot_mod.ClusterSnapshot) -> Room:
    """The :class:`Room` of ``snap``."""
    names: list[str] = []
    rows: list[list[int]] = []
    for n in snap.nodes:
        if n.deleting or n.node.unschedulable:
            continue
        e = n.existing_node()
        free = [e.allocatable.get(d, 0) for d in DIMS]
        for p in e.pods:
            for j, d in enumerate(DIMS):
                free[j] -= p.requests.get(d, 0)
        names.append(n.name)
        rows.append(free)
    matrix = np.array(rows, dtype=np.int64).reshape(len(rows), len(DIMS))
    for p in snap.pending_pods:  # pending pods are placed in the same simulation: they go first
        _first_fit(matrix, np.array([p.requests.get(d, 0) for d in DIMS], dtype=np.int64))
    return Room({name: i for i, name in enumerate(names)}, matrix)


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
    harder)."""
    room = free.matrix.copy()
    for c in group:
        i = free.index.get(c.name)
        if i is not None:
            room[i] = -1  # the removed nodes take nothing
    rest = np.zeros(len(DIMS), dtype=np.int64)
    pods = [p for c in group if (info := snap.node(c.name)) is not None for p in info.reschedulable_pods()]
    reqs = sorted((np.array([p.requests.get(d, 0) for d in DIMS], dtype=np.int64) for p in pods),
                  key=lambda r: (-int(r[0]), -int(r[1])))
    for r in reqs:
        if not _first_fit(room, r):
            rest += r
    return rest


def _pool_types(snap: snapshot_mod.ClusterSnapshot, pool: nodepool_mod.NodePool
                ) -> list[tuple[instancetype.InstanceType, float]]:
    """The instance types ``pool``'s own requirements allow, each with its cheapest offering those
    requirements allow (zone, capacity type); cached on the snapshot."""
    cache: dict[str, list[tuple[instancetype.InstanceType, float]]] = snap.__dict__.setdefault("_pool_types", {})
    hit = cache.get(pool.name)
    if hit is None:
        reqs = templates.nodepool_requirements(pool)
        hit = []
        for t in snap.instance_types.get(pool.name, ()):
            if templates._type_compatible(reqs, t):
                price = milp.option_price(t, reqs)
                if price is not None:
                    hit.append((t, price))
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
              free: Room, *, one_node: bool = True) -> str | None:
    """``REFUSED`` when a cheap necessary condition already fails, else None.

    What cannot fit the rest of the cluster (see :func:`_unplaceable`) must fit one instance type
    of the group's NodePool cheaper than the group (``one_node``), or a set of new nodes whose
    price lower bound (the cheapest price per unit of the scarcest resource) is below it. Only
    then is the costly removal simulation worth running.
    """
    before = _group_price(snap, group)
    if before is None or not group:
        return None
    rest = _unplaceable(snap, group, free)
    if not rest.any():
        return None  # a delete may be possible
    types = _pool_types(snap, group[0].nodepool)
    if one_node:
        for t, price in types:
            if price < before and all(t.allocatable.get(d, 0) >= int(rest[j]) for j, d in enumerate(DIMS)):
                return None
        return REFUSED
    bound = 0.0
    for j, d in enumerate(DIMS):
        if rest[j] <= 0:
            continue
        unit = [price / t.allocatable[d] for t, price in types if t.allocatable.get(d, 0) > 0]
        if unit:
            bound = max(bound, float(rest[j]) * min(unit))
    return None if bound < before else REFUSED
