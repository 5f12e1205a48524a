"""Instance types and offerings: what a cloud can launch, as the scheduling core sees it.

An :class:`InstanceType` is immutable. Its ``labels`` are the single-valued node labels every node
of the type carries (``node.kubernetes.io/instance-type``, ``kubernetes.io/arch``,
``karpenter.k8s.aws/instance-family`` ...). Zone and capacity type are not labels of the type: they
come from its :class:`Offering` s, one per (zone, capacity type), each with an hourly price and
whether it can be launched now. An offering may also decide labels of its own (``Offering.labels``: the
values a node launched on it may get, as Karpenter's offering requirements: Azure's
``sku-storage-ultra-ssd``, an AWS partition placement group's partition); :func:`offering_admits` checks a
claim's requirements against them. All amounts are milli-units (see :mod:`karpy.api.quantity`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from karpy.api import quantity

LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_OS = "kubernetes.io/os"
CAPACITY_SPOT = "spot"
CAPACITY_ON_DEMAND = "on-demand"


@dataclass(frozen=True, slots=True)
class Offering:
    """One place and way to buy an instance type."""

    zone: str
    capacity_type: str
    price: float
    """US dollars per hour."""
    available: bool = True
    reservation_id: str = ""
    """A ``reserved`` offering's capacity reservation (``cr-...``); ``""`` for spot and on-demand."""
    reservation_type: str = ""
    """``default`` or ``capacity-block`` (reserved offerings only)."""
    reservation_capacity: int = 0
    """Instances the reservation can still take (reserved offerings only)."""
    labels: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Labels this offering decides beyond zone and capacity type: (key, the values a node launched on it may
    get). A key not here is one the offering does not define."""

    def label_values(self, key: str) -> tuple[str, ...] | None:
        return next((values for k, values in self.labels if k == key), None)


class LabelRequirement(Protocol):
    def has(self, value: str) -> bool: ...

    def admits_absence(self) -> bool: ...


def offering_admits(o: Offering, get: Callable[[str], LabelRequirement | None],
                    keys: Iterable[str] | None = None) -> bool:
    """Whether the requirements ``get`` returns (key -> requirement or ``None``) allow one of the values ``o``
    may take for each of ``keys`` (default: the keys ``o`` defines); a key ``o`` does not define must admit
    absence."""
    for key in (k for k, _ in o.labels) if keys is None else keys:
        r = get(key)
        if r is None:
            continue
        values = o.label_values(key)
        if values is None:
            if not r.admits_absence():
                return False
        elif not any(r.has(v) for v in values):
            return False
    return True


@dataclass(frozen=True, slots=True)
class Overhead:
    """What the kubelet and the OS keep for themselves; allocatable = capacity - total."""

    kube_reserved: Mapping[str, int] = field(default_factory=dict)
    system_reserved: Mapping[str, int] = field(default_factory=dict)
    eviction_threshold: Mapping[str, int] = field(default_factory=dict)

    def total(self) -> quantity.ResourceList:
        return quantity.add(quantity.add(self.kube_reserved, self.system_reserved), self.eviction_threshold)


@dataclass(frozen=True)
class InstanceType:
    """A launchable machine shape. Equality and hashing are by name."""

    name: str
    labels: Mapping[str, str]
    capacity: Mapping[str, int]
    overhead: Overhead
    offerings: tuple[Offering, ...]
    volume_limits: Mapping[str, int] = field(default_factory=dict)
    """Volumes each CSI driver can attach to one node of this type (driver name -> count; ``*``: any
    driver not named); a driver without an entry has no known limit (:mod:`karpy.provisioning.volume_limits`)."""

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InstanceType) and other.name == self.name

    @cached_property
    def allocatable(self) -> quantity.ResourceList:
        """Capacity minus overhead, never below zero: what a Node of this type reports."""
        total = self.overhead.total()
        return {k: max(0, v - total.get(k, 0)) for k, v in self.capacity.items()}

    @cached_property
    def zones(self) -> frozenset[str]:
        return frozenset(o.zone for o in self.offerings)

    @cached_property
    def capacity_types(self) -> frozenset[str]:
        return frozenset(o.capacity_type for o in self.offerings)

    @cached_property
    def offering_labels(self) -> dict[str, frozenset[str]]:
        """Key -> every value the type's offerings may give it (Karpenter's instance-type requirement on it)."""
        out: dict[str, set[str]] = {}
        for o in self.offerings:
            for key, values in o.labels:
                out.setdefault(key, set()).update(values)
        return {k: frozenset(v) for k, v in out.items()}

    def available_offerings(self) -> tuple[Offering, ...]:
        return tuple(o for o in self.offerings if o.available)

    def cheapest_price(self, zones: frozenset[str] | None = None,
                       capacity_types: frozenset[str] | None = None) -> float | None:
        """The lowest price among available offerings in ``zones`` x ``capacity_types``."""
        best: float | None = None
        for o in self.offerings:
            if not o.available:
                continue
            if zones is not None and o.zone not in zones:
                continue
            if capacity_types is not None and o.capacity_type not in capacity_types:
                continue
            if best is None or o.price < best:
                best = o.price
        return best

    def with_offerings(self, offerings: tuple[Offering, ...]) -> InstanceType:
        """A copy with other offerings (availability or prices changed)."""
        return InstanceType(self.name, self.labels, self.capacity, self.overhead, offerings, self.volume_limits)


def restrict_zones(types: Iterable[InstanceType],
                   zones: Iterable[str]) -> list[InstanceType]:
    """Each type with only its offerings in ``zones``; types with none left are dropped."""
    wanted = frozenset(zones)
    out: list[InstanceType] = []
    for t in types:
        kept = tuple(o for o in t.offerings if o.zone in wanted)
        if not kept:
            continue
        out.append(t if len(kept) == len(t.offerings) else t.with_offerings(kept))
    return out
