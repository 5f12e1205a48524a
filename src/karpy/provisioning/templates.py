"""NodeClaim templates: a NodePool with its instance types as arrays the packer can scan fast.

A :class:`Template` is what one NodePool can launch during one scheduling run: its requirements
(spec requirements plus template labels), taints, startup taints, the instance types it may use,
and how much of its limits is left. :class:`TypeTable` holds the instance types of a template
as NumPy arrays over the run's resource dimensions, and answers, per requirement set (cached):
which types are compatible, at what cheapest price, and which zones they offer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy.api import labels as wk
from karpy.cloudprovider import instancetype
from karpy.scheduling import requirements as reqs_mod

IntMatrix = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

UNLIMITED = np.int64(1 << 62)
NODES = "nodes"
"""Karpenter's ``nodes`` resource: each NodeClaim has one, and ``spec.limits.nodes`` caps them."""
ONE_NODE = 1000


@dataclass
class TypeInfo:
    """Per requirement set: compatible types, their price and offered zones."""

    mask: BoolArray
    price: FloatArray
    zones: list[frozenset[str]]
    capacity_types: list[frozenset[str]]


class TypeTable:
    """The instance types of one template as arrays over resource dimensions ``dims``."""

    def __init__(self, types: Sequence[instancetype.InstanceType], dims: Sequence[str]) -> None:
        self.types = list(types)
        self.dims = list(dims)
        n = len(self.types)
        self.alloc: IntMatrix = np.zeros((n, len(dims)), dtype=np.int64)
        self.capacity: IntMatrix = np.zeros((n, len(dims)), dtype=np.int64)
        for i, t in enumerate(self.types):
            alloc = t.allocatable
            for j, d in enumerate(dims):
                self.alloc[i, j] = alloc.get(d, 0)
                self.capacity[i, j] = t.capacity.get(d, 0)
        if NODES in self.dims:  # every instance is one of Karpenter's "nodes", counted against limits.nodes
            self.capacity[:, self.dims.index(NODES)] = ONE_NODE
        self.label_keys = frozenset(k for t in self.types for k in t.labels)
        self.offering_keys = frozenset(k for t in self.types for k in t.offering_labels)
        """Labels offerings decide (:attr:`instancetype.Offering.labels`), checked per offering."""
        self._info: dict[reqs_mod.Requirements, TypeInfo] = {}

    def __len__(self) -> int:
        return len(self.types)

    def info(self, requirements: reqs_mod.Requirements) -> TypeInfo:
        """Which types a NodeClaim with ``requirements`` may be, and their cheapest offering."""
        cached = self._info.get(requirements)
        if cached is not None:
            return cached
        n = len(self.types)
        mask = np.zeros(n, dtype=np.bool_)
        price = np.full(n, np.inf)
        zones: list[frozenset[str]] = []
        cts: list[frozenset[str]] = []
        zone_req = requirements.get(wk.ZONE)
        ct_req = requirements.get(wk.CAPACITY_TYPE)
        label_reqs = [(k, r) for k, r in requirements.items()
                      if k in self.label_keys and k not in (wk.ZONE, wk.CAPACITY_TYPE) and k not in self.offering_keys]
        offering_keys = [k for k in self.offering_keys if requirements.get(k) is not None]
        for i, t in enumerate(self.types):
            ok = True
            for key, r in label_reqs:
                value = t.labels.get(key)
                if (value is None and not r.admits_absence()) or (value is not None and not r.has(value)):
                    ok = False
                    break
            best = np.inf
            zs: set[str] = set()
            cs: set[str] = set()
            if ok:
                for o in t.offerings:
                    if not o.available:
                        continue
                    if zone_req is not None and not zone_req.has(o.zone):
                        continue
                    if ct_req is not None and not ct_req.has(o.capacity_type):
                        continue
                    if offering_keys and not instancetype.offering_admits(o, requirements.get, offering_keys):
                        continue
                    zs.add(o.zone)
                    cs.add(o.capacity_type)
                    best = min(best, o.price)
            mask[i] = ok and bool(zs)
            price[i] = best
            zones.append(frozenset(zs))
            cts.append(frozenset(cs))
        info = TypeInfo(mask, price, zones, cts)
        self._info[requirements] = info
        return info


@dataclass
class Template:
    """One NodePool as a source of new NodeClaims during one scheduling run."""

    nodepool: Any
    name: str
    weight: int
    requirements: reqs_mod.Requirements
    labels: dict[str, str]
    taints: tuple[Any, ...]
    startup_taints: tuple[Any, ...]
    table: TypeTable
    limits: dict[str, int]
    """Remaining limit per resource (absent: unlimited)."""
    has_min_values: bool = False
    daemon_overhead: dict[reqs_mod.Requirements, npt.NDArray[np.int64]] = field(default_factory=dict)

    def remaining_limit_vector(self, dims: Sequence[str]) -> npt.NDArray[np.int64]:
        return np.array([self.limits.get(d, UNLIMITED) for d in dims], dtype=np.int64)


def nodepool_requirements(nodepool: Any) -> reqs_mod.Requirements:
    """A NodePool's requirements: its template requirements, its labels and its own name."""
    spec = nodepool.template.spec
    r = reqs_mod.Requirements.from_node_selector_requirements(spec.requirements)
    labels_ = dict(nodepool.template.labels)
    labels_[wk.NODEPOOL] = nodepool.metadata.name
    return r.intersect(reqs_mod.Requirements.from_labels(labels_))


class TableCache:
    """Type tables kept between scheduling runs (a :class:`TypeTable` caches :meth:`TypeTable.info`).

    A table is reused when the NodePool's requirements, the run's dimensions and the instance
    type objects (by identity, in order: they are immutable) are the same as in the previous run;
    tables the last run did not use are dropped. A table only depends on those, so a reused one
    answers exactly as a new one would.
    """

    def __init__(self) -> None:
        self._last: dict[Any, tuple[Sequence[instancetype.InstanceType], TypeTable]] = {}
        self._now: dict[Any, tuple[Sequence[instancetype.InstanceType], TypeTable]] = {}

    def begin(self) -> None:
        """Start a run: tables used in the previous run stay available, older ones go."""
        self._last, self._now = self._now, {}

    def table(self, reqs: reqs_mod.Requirements, types: Sequence[instancetype.InstanceType],
              dims: Sequence[str]) -> TypeTable:
        key = (reqs, tuple(dims), tuple(map(id, types)))
        hit = self._now.get(key) or self._last.get(key)
        if hit is None or len(hit[0]) != len(types) or any(a is not b for a, b in zip(hit[0], types, strict=True)):
            hit = (list(types), TypeTable([t for t in types if _type_compatible(reqs, t)], dims))
        self._now[key] = hit
        return hit[1]


def build_templates(nodepools: Sequence[Any],
                    instance_types: Mapping[str, Sequence[instancetype.InstanceType]],
                    usage: Mapping[str, Mapping[str, int]], dims: Sequence[str],
                    cache: TableCache | None = None) -> list[Template]:
    """Templates in Karpenter's order: higher weight first, then by name. ``cache``: type tables
    kept from earlier runs (the templates are the same with or without it)."""
    out: list[Template] = []
    if cache is not None:
        cache.begin()
    for np_ in nodepools:
        name = np_.metadata.name
        if np_.metadata.deletion_timestamp is not None:
            continue
        reqs = nodepool_requirements(np_)
        given = instance_types.get(name, ())
        if cache is not None:
            table = cache.table(reqs, given, dims)
        else:
            table = TypeTable([t for t in given if _type_compatible(reqs, t)], dims)
        limits: dict[str, int] = {}
        used = usage.get(name, {})
        for res, limit in (np_.limits or {}).items():
            limits[res] = limit - used.get(res, 0)
        labels_ = dict(np_.template.labels)
        labels_[wk.NODEPOOL] = name
        out.append(Template(
            nodepool=np_, name=name, weight=int(np_.weight or 0), requirements=reqs, labels=labels_,
            taints=tuple(np_.template.spec.taints), startup_taints=tuple(np_.template.spec.startup_taints),
            table=table, limits=limits,
            has_min_values=any(r.min_values for r in reqs.values()),
        ))
    out.sort(key=lambda t: (-t.weight, t.name))
    return out


def _type_compatible(reqs: reqs_mod.Requirements, t: instancetype.InstanceType) -> bool:
    for key, r in reqs.items():
        if key == wk.ZONE:
            if not any(r.has(z) for z in t.zones):
                return False
            continue
        if key == wk.CAPACITY_TYPE:
            if not any(r.has(c) for c in t.capacity_types):
                return False
            continue
        value = t.labels.get(key)
        if value is not None and not r.has(value):
            return False
    return True
