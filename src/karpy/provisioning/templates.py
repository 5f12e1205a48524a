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
        self.alloc: IntMatrix = np.array([[t.allocatable.get(d, 0) for d in self.dims] for t in self.types],
                                         dtype=np.int64).reshape(n, len(self.dims))
        self.capacity: IntMatrix = np.array([[t.capacity.get(d, 0) for d in self.dims] for t in self.types],
                                            dtype=np.int64).reshape(n, len(self.dims))
        if NODES in self.dims:  # every instance is one of Karpenter's "nodes", counted against limits.nodes
            self.capacity[:, self.dims.index(NODES)] = ONE_NODE
        self.label_keys = frozenset(k for t in self.types for k in t.labels)
        self.offering_keys = frozenset(k for t in self.types for k in t.offering_labels)
        """Labels offerings decide (:attr:`instancetype.Offering.labels`), checked per offering."""
        self._info: dict[reqs_mod.Requirements, TypeInfo] = {}
        self._offerings: _Offerings | None = None

    def __len__(self) -> int:
        return len(self.types)

    def info(self, requirements: reqs_mod.Requirements) -> TypeInfo:
        """Which types a NodeClaim with ``requirements`` may be, and their cheapest offering.

        Vectorised over the types and their offerings (:class:`_Offerings`): each requirement is
        asked once per distinct label value, zone or capacity type, not once per type."""
        cached = self._info.get(requirements)
        if cached is not None:
            return cached
        offers = self._offerings
        if offers is None:
            offers = self._offerings = _Offerings(self.types, self.label_keys)
        n = len(self.types)
        ok = np.ones(n, dtype=np.bool_)
        for key, r in requirements.items():
            if key in self.label_keys and key not in (wk.ZONE, wk.CAPACITY_TYPE) and key not in self.offering_keys:
                ok &= offers.label_mask(key, r)
        sel = offers.available & ok[offers.type_of]
        offering_keys = [k for k in self.offering_keys if requirements.get(k) is not None]
        if offering_keys:  # labels offerings decide (Azure Ultra SSD, AWS partitions): asked per offering
            sel &= np.fromiter((instancetype.offering_admits(o, requirements.get, offering_keys)
                                for o in offers.offerings), dtype=np.bool_, count=len(offers.offerings))
        zone_req = requirements.get(wk.ZONE)
        if zone_req is not None:
            sel &= _admitted(offers.zones, zone_req)[offers.zone_of]
        ct_req = requirements.get(wk.CAPACITY_TYPE)
        if ct_req is not None:
            sel &= _admitted(offers.capacity_types, ct_req)[offers.ct_of]
        price = np.full(n, np.inf)
        np.minimum.at(price, offers.type_of[sel], offers.price[sel])
        zone_bits = np.zeros(n, dtype=np.int64)
        np.bitwise_or.at(zone_bits, offers.type_of[sel], offers.zone_bit[sel])
        ct_bits = np.zeros(n, dtype=np.int64)
        np.bitwise_or.at(ct_bits, offers.type_of[sel], offers.ct_bit[sel])
        info = TypeInfo(ok & (zone_bits != 0), price, offers.zone_sets(zone_bits.tolist()),
                        offers.ct_sets(ct_bits.tolist()))
        self._info[requirements] = info
        return info


def _admitted(values: Sequence[str], r: Any) -> BoolArray:
    """Per value (by index), whether requirement ``r`` admits it."""
    return np.fromiter((r.has(v) for v in values), dtype=np.bool_, count=len(values))


class _Offerings:
    """The offerings of a table's types as flat arrays (type index, zone and capacity type codes and
    bits, price, availability) and each label key's values as codes per type (-1: no such label)."""

    def __init__(self, types: Sequence[instancetype.InstanceType], label_keys: frozenset[str]) -> None:
        self.zones: list[str] = []
        self.capacity_types: list[str] = []
        self.offerings: list[instancetype.Offering] = [o for t in types for o in t.offerings]
        zone_ids: dict[str, int] = {}
        ct_ids: dict[str, int] = {}
        offs = self.offerings
        type_of = np.repeat(np.arange(len(types), dtype=np.int64), [len(t.offerings) for t in types])
        zone_of = [zone_ids.setdefault(o.zone, len(zone_ids)) for o in offs]
        ct_of = [ct_ids.setdefault(o.capacity_type, len(ct_ids)) for o in offs]
        price = [o.price for o in offs]
        available = [o.available for o in offs]
        if len(zone_ids) > 62 or len(ct_ids) > 62:
            raise ValueError(f"instance types: at most 62 zones and capacity types each, found "
                             f"{len(zone_ids)} zones and {len(ct_ids)} capacity types")
        self.zones = list(zone_ids)
        self.capacity_types = list(ct_ids)
        self.type_of = type_of.astype(np.int64)
        self.zone_of = np.array(zone_of, dtype=np.int64)
        self.ct_of = np.array(ct_of, dtype=np.int64)
        self.zone_bit = np.left_shift(np.int64(1), self.zone_of)
        self.ct_bit = np.left_shift(np.int64(1), self.ct_of)
        self.price = np.array(price, dtype=np.float64)
        self.available = np.array(available, dtype=np.bool_)
        self._types = types
        self._label_codes: dict[str, tuple[list[str], npt.NDArray[np.int64]]] = {}
        self._sets: dict[tuple[int, int], frozenset[str]] = {}

    def label_mask(self, key: str, r: Any) -> BoolArray:
        """Per type, whether its value of label ``key`` (or its lack of one) satisfies ``r``."""
        hit = self._label_codes.get(key)
        if hit is None:
            ids: dict[str, int] = {}
            codes = np.fromiter((-1 if (v := t.labels.get(key)) is None else ids.setdefault(v, len(ids))
                                 for t in self._types), dtype=np.int64, count=len(self._types))
            hit = self._label_codes[key] = (list(ids), codes)
        values, codes = hit
        admitted = np.append(_admitted(values, r), r.admits_absence())  # code -1: the last entry
        out: BoolArray = admitted[codes]
        return out

    def zone_sets(self, bits: list[int]) -> list[frozenset[str]]:
        return self._sets_of(0, bits, self.zones)

    def ct_sets(self, bits: list[int]) -> list[frozenset[str]]:
        return self._sets_of(1, bits, self.capacity_types)

    def _sets_of(self, which: int, bits: list[int], names: list[str]) -> list[frozenset[str]]:
        """:meth:`_set` of each of ``bits`` (many types share a few distinct bit sets)."""
        sets = {b: self._set(which, b, names) for b in set(bits)}
        return [sets[b] for b in bits]

    def _set(self, which: int, bits: int, names: list[str]) -> frozenset[str]:
        hit = self._sets.get((which, bits))
        if hit is None:
            hit = self._sets[(which, bits)] = frozenset(names[i] for i in range(len(names)) if bits >> i & 1)
        return hit


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
        if not self.limits:
            return np.full(len(dims), UNLIMITED, dtype=np.int64)
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
            hit = (list(types), TypeTable(compatible_types(reqs, types), dims))
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
            table = TypeTable(compatible_types(reqs, given), dims)
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


def compatible_types(reqs: reqs_mod.Requirements,
                     types: Sequence[instancetype.InstanceType]) -> list[instancetype.InstanceType]:
    """The types :func:`_type_compatible` admits, in order; each requirement is asked once per
    distinct label value, zone set or capacity-type set (a catalog repeats them across types)."""
    checks: list[tuple[str, Any, dict[Any, bool]]] = [(key, r, {}) for key, r in reqs.items()]
    out: list[instancetype.InstanceType] = []
    for t in types:
        for key, r, seen in checks:
            if key == wk.ZONE:
                value: Any = t.zones
            elif key == wk.CAPACITY_TYPE:
                value = t.capacity_types
            else:
                value = t.labels.get(key)
                if value is None:
                    continue
            ok = seen.get(value)
            if ok is None:
                ok = seen[value] = (any(r.has(v) for v in value) if key in (wk.ZONE, wk.CAPACITY_TYPE)
                                    else r.has(value))
            if not ok:
                break
        else:
            out.append(t)
    return out
