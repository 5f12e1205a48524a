"""NodeOverlays applied to instance types: which overlay changes which offering's price and which type's
capacity, per NodePool, and which overlays conflict (Karpenter v1.14's ``nodeoverlay`` store and validation).

:func:`evaluate` takes every NodeOverlay, every NodePool and each NodePool's instance types as the cloud
gives them, and returns a :class:`Store`:

* overlays are taken in Karpenter's order (:func:`karpy.api.nodeoverlay.order_by_weight`: higher weight
  first, equal weights by name, later in the alphabet first); one that breaks a rule
  (:func:`karpy.api.nodeoverlay.validate`) is left out (``Store.invalid``);
* an overlay selects an instance type of a NodePool when its requirements are compatible with the type's
  labels, its zones and capacity types, ``karpenter.sh/nodepool`` and the NodePool's template labels (every
  key it names must be defined there, as Karpenter's ``Compatible``); of that type it selects the offerings
  whose zone and capacity type its requirements admit;
* the first overlay to change an offering's price sets it (``price`` or ``priceAdjustment``); the first to
  add a resource to a type sets it, later ones only add resources not set yet (fields merge);
* an overlay that touches an offering price, or a resource, that an overlay *of the same weight* touched
  before it conflicts (``Store.conflicts``) and is applied nowhere, in no NodePool (all or nothing).

:meth:`Store.apply` returns a NodePool's types with the stored changes: new :class:`InstanceType`
objects for changed types (the others as given), prices never below 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpy.api import labels, nodeoverlay, nodepool
from karpy.cloudprovider import instancetype
from karpy.scheduling import requirement, requirements

OfferingKey = tuple[str, str]
"""(zone, capacity type): an offering of one instance type."""


@dataclass(slots=True)
class _Price:
    change: str
    lowest_weight: int


@dataclass(slots=True)
class _Capacity:
    resources: dict[str, int]
    lowest_weight: int
    lowest_resources: frozenset[str]


@dataclass(slots=True)
class _TypeUpdate:
    prices: dict[OfferingKey, _Price] = field(default_factory=dict)
    capacity: _Capacity | None = None


@dataclass(slots=True)
class Store:
    """What :func:`evaluate` found (see the module docstring)."""

    updates: dict[str, dict[str, _TypeUpdate]] = field(default_factory=dict)
    """NodePool -> instance type -> its changes."""
    evaluated: frozenset[str] = frozenset()
    """The NodePools whose instance types were looked at."""
    conflicts: tuple[str, ...] = ()
    """Overlays left out for conflicting with an overlay of the same weight."""
    invalid: Mapping[str, str] = field(default_factory=dict)
    """Overlays left out for breaking a rule -> why."""
    applied: tuple[str, ...] = ()
    """Overlays applied (they may select nothing)."""

    def apply(self, pool: str, types: Sequence[instancetype.InstanceType]) -> list[instancetype.InstanceType]:
        """``types`` of NodePool ``pool`` with this store's changes."""
        changes = self.updates.get(pool)
        if not changes:
            return list(types)
        return [_changed(t, changes[t.name]) if t.name in changes else t for t in types]

    def price_overlaid(self, pool: str, type_name: str) -> bool:
        u = self.updates.get(pool, {}).get(type_name)
        return u is not None and bool(u.prices)

    def capacity_overlay(self, pool: str, type_name: str) -> dict[str, int]:
        """The resources overlays add to ``type_name`` in ``pool`` (empty when none)."""
        u = self.updates.get(pool, {}).get(type_name)
        return dict(u.capacity.resources) if u is not None and u.capacity is not None else {}


def _changed(t: instancetype.InstanceType, u: _TypeUpdate) -> instancetype.InstanceType:
    offerings = t.offerings
    if u.prices:
        prices = u.prices
        offerings = tuple(
            dataclasses.replace(o, price=nodeoverlay.adjusted_price(o.price, prices[(o.zone, o.capacity_type)].change))
            if (o.zone, o.capacity_type) in prices else o for o in offerings)
    capacity = t.capacity
    if u.capacity is not None and u.capacity.resources:
        capacity = {**t.capacity, **u.capacity.resources}
    if offerings is t.offerings and capacity is t.capacity:
        return t
    return instancetype.InstanceType(t.name, t.labels, capacity, t.overhead, offerings, t.volume_limits)


# ------------------------------------------------------------------------------------- selection


def type_requirements(pool: nodepool.NodePool, t: instancetype.InstanceType) -> requirements.Requirements:
    """What an instance type of ``pool`` is known to be: the NodePool's name and template labels, the type's
    labels, its zones and capacity types."""
    reqs = requirements.Requirements.from_labels({**pool.template.labels, labels.NODEPOOL: pool.name, **t.labels})
    return reqs.add(requirement.Requirement.new(labels.ZONE, "In", sorted(t.zones)),
                    requirement.Requirement.new(labels.CAPACITY_TYPE, "In", sorted(t.capacity_types)))


def selected_offerings(pool: nodepool.NodePool, t: instancetype.InstanceType,
                       wanted: requirements.Requirements) -> list[OfferingKey]:
    """The offerings of ``t`` an overlay requiring ``wanted`` selects (none: it does not select ``t``)."""
    if type_requirements(pool, t).compatible(wanted, allow_undefined=frozenset()) is not None:
        return []
    out: list[OfferingKey] = []
    for o in t.offerings:
        offering = requirements.Requirements.from_labels({labels.ZONE: o.zone, labels.CAPACITY_TYPE: o.capacity_type})
        if wanted.compatible(offering) is None:
            out.append((o.zone, o.capacity_type))
    return out


# ------------------------------------------------------------------------------------- evaluation


def evaluate(overlays: Sequence[nodeoverlay.NodeOverlay], pools: Sequence[nodepool.NodePool],
             types: Mapping[str, Sequence[instancetype.InstanceType]]) -> Store:
    """The store of ``overlays`` over ``pools`` (those with an entry in ``types``); see the module docstring."""
    store = Store(evaluated=frozenset(p.name for p in pools if p.name in types))
    evaluated = [p for p in pools if p.name in types]
    invalid: dict[str, str] = {}
    conflicts: list[str] = []
    applied: list[str] = []
    for o in nodeoverlay.order_by_weight(overlays):
        problems = nodeoverlay.validate(o)
        if problems:
            invalid[o.name] = "; ".join(f"{e.path}: expected {e.expected}, found {e.found!r}" for e in problems)
            continue
        try:
            wanted = requirements.Requirements.from_node_selector_requirements(o.requirements)
        except ValueError as exc:
            invalid[o.name] = str(exc)
            continue
        selection = [(p, t, offs) for p in evaluated for t in types[p.name]
                     for offs in (selected_offerings(p, t, wanted),) if offs]
        if any(_conflicts(store, p.name, t.name, offs, o) for p, t, offs in selection):
            conflicts.append(o.name)
            continue
        for p, t, offs in selection:
            _record(store, p.name, t.name, offs, o)
        applied.append(o.name)
    store.conflicts, store.invalid, store.applied = tuple(conflicts), invalid, tuple(applied)
    return store


def _conflicts(store: Store, pool: str, type_name: str, offerings: Sequence[OfferingKey],
               o: nodeoverlay.NodeOverlay) -> bool:
    u = store.updates.get(pool, {}).get(type_name)
    if u is None:
        return False
    weight = o.effective_weight
    if o.price_change is not None and any(k in u.prices and u.prices[k].lowest_weight == weight for k in offerings):
        return True
    return bool(o.capacity) and u.capacity is not None and u.capacity.lowest_weight == weight and \
        any(r in u.capacity.lowest_resources for r in o.capacity)


def _record(store: Store, pool: str, type_name: str, offerings: Sequence[OfferingKey],
            o: nodeoverlay.NodeOverlay) -> None:
    change = o.price_change
    if change is None and not o.capacity:
        return
    u = store.updates.setdefault(pool, {}).setdefault(type_name, _TypeUpdate())
    weight = o.effective_weight
    if change is not None:
        for k in offerings:
            if k in u.prices:
                u.prices[k].lowest_weight = weight  # a higher weight set it; this one only lowers the bar
            else:
                u.prices[k] = _Price(change, weight)
    if o.capacity:
        if u.capacity is None:
            u.capacity = _Capacity(dict(o.capacity), weight, frozenset(o.capacity))
        else:
            for name, amount in o.capacity.items():
                u.capacity.resources.setdefault(name, amount)
            u.capacity.lowest_weight, u.capacity.lowest_resources = weight, frozenset(o.capacity)
