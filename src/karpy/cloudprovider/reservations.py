"""Reserved offerings: capacity reservations as ``karpenter.sh/capacity-type: reserved`` offerings.

What every cloud that models reservations shares (the AWS provider, :mod:`karpy.cloudprovider.aws.reservations`,
and the simulated cloud, :mod:`karpy.cloudprovider.fake.reservations`), as Karpenter AWS builds them
(``pkg/providers/instancetype/offering/reserved_capacity_resolver.go``, ``pkg/providers/capacityreservation``):

* :func:`with_reserved_offerings`: each instance type gets one ``reserved`` offering per reservation of
  that type, priced at its on-demand price / :data:`PRICE_DIVISOR` (a tiny price, so the scheduler and the
  launch prefer it to any spot or on-demand offering), available while the reservation has room, its zone
  is one of the type's and it is not an expiring capacity block. Only with the ``ReservedCapacity`` gate.
* :class:`Availability`: how many instances each reservation can still take: synced from the cloud's
  count, one less per launch, one more per termination, zero when a launch found it full.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence

from karpy.api import capacityreservation as cr
from karpy.api import labels
from karpy.cloudprovider import instancetype

PRICE_DIVISOR = 10_000_000.0
"""A reserved offering costs the type's on-demand price divided by this (Karpenter's rule)."""


def reserved_price(on_demand: float | None) -> float:
    return (on_demand or 0.0) / PRICE_DIVISOR


class Availability:
    """Instances each reservation can still take (Karpenter's availability cache). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count: dict[str, int] = {}

    def sync(self, counts: Mapping[str, int]) -> None:
        """The cloud's own counts (``AvailableInstanceCount``), replacing what was tracked."""
        with self._lock:
            self._count.update(counts)

    def get(self, reservation_id: str) -> int:
        with self._lock:
            return self._count.get(reservation_id, 0)

    def launched(self, reservation_id: str) -> None:
        with self._lock:
            if self._count.get(reservation_id, 0) > 0:
                self._count[reservation_id] -= 1

    def terminated(self, reservation_id: str) -> None:
        """One more (Karpenter would rather over- than underestimate: no upper bound is applied)."""
        with self._lock:
            if reservation_id in self._count:
                self._count[reservation_id] += 1

    def unavailable(self, reservation_ids: Iterable[str]) -> None:
        """A launch found these full: none left until the next sync."""
        with self._lock:
            for rid in reservation_ids:
                if rid in self._count:
                    self._count[rid] = 0


def with_reserved_offerings(types: Sequence[instancetype.InstanceType], reservations: Sequence[cr.Reservation],
                            availability: Availability, now: float) -> list[instancetype.InstanceType]:
    """``types`` with a reserved offering for each of ``reservations`` of their type (see the module)."""
    by_type: dict[str, list[cr.Reservation]] = {}
    for r in reservations:
        by_type.setdefault(r.instance_type, []).append(r)
    if not by_type:
        return list(types)
    out: list[instancetype.InstanceType] = []
    for t in types:
        mine = by_type.get(t.name)
        if not mine:
            out.append(t)
            continue
        on_demand = t.cheapest_price(capacity_types=frozenset({labels.CAPACITY_TYPE_ON_DEMAND}))
        if on_demand is None:  # its on-demand offerings are all unavailable: the list price still holds
            on_demand = min((o.price for o in t.offerings if o.capacity_type == labels.CAPACITY_TYPE_ON_DEMAND),
                            default=None)
        added = []
        for r in mine:
            count = availability.get(r.id)
            added.append(instancetype.Offering(
                zone=r.zone, capacity_type=labels.CAPACITY_TYPE_RESERVED, price=reserved_price(on_demand),
                available=count > 0 and r.zone in t.zones and r.state(now) == cr.STATE_ACTIVE,
                reservation_id=r.id, reservation_type=r.reservation_type, reservation_capacity=count))
        out.append(t.with_offerings((*t.offerings, *added)))
    return out


def reserved_labels(offering: instancetype.Offering) -> dict[str, str]:
    """The node labels of an instance launched into ``offering`` (none unless it is reserved)."""
    if offering.capacity_type != labels.CAPACITY_TYPE_RESERVED or not offering.reservation_id:
        return {}
    return {cr.LABEL_ID: offering.reservation_id, cr.LABEL_TYPE: offering.reservation_type or cr.TYPE_DEFAULT}
