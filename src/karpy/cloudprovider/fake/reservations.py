"""The simulated cloud's capacity reservations (On-Demand Capacity Reservations and capacity blocks).

A scenario lists them (``spec.cloud.capacityReservations``, :func:`parse`); an EC2NodeClass selects them
with ``capacityReservationSelectorTerms`` as EC2's DescribeCapacityReservations filters would
(:meth:`karpy.api.capacityreservation.Reservation.matches`). :class:`SimulatedReservations` then:

* adds a ``reserved`` offering per selected reservation to the NodeClass's instance types
  (:func:`karpy.cloudprovider.reservations.with_reserved_offerings`: tiny price, available while it has room);
* counts each reservation's free slots down as instances launch into it and up as they terminate;
* lists them in the EC2NodeClass's ``status.capacityReservations`` (with the ``CapacityReservationsReady``
  condition);
* says which are expiring (:meth:`expiring`: a capacity block from 40 minutes before its end) and reclaims
  a capacity block's instances :data:`RECLAIM_BEFORE_END` seconds before its end time, as EC2 does.

With the ``ReservedCapacity`` gate off (``enabled=False``) nothing is offered. Pure; time is passed in.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from karpy.api import capacityreservation as cr
from karpy.api import duration, fields, nodeclass
from karpy.api import errors as api_errors
from karpy.cloudprovider import instancetype, interface
from karpy.cloudprovider import reservations as shared

RECLAIM_BEFORE_END = 30 * 60.0
"""EC2 terminates a capacity block's instances this long before the block's end time."""
DEFAULT_OWNER = "123456789012"


def parse(items: Sequence[fields.Fields], start: float) -> tuple[cr.Reservation, ...]:
    """``spec.cloud.capacityReservations`` entries: ``id``, ``instanceType``, ``zone``, ``count`` (required),
    ``type`` (``default`` / ``capacity-block``), ``instanceMatchCriteria`` (``targeted`` by default),
    ``ownerID``, ``tags``, ``endAfter`` (a duration from the start: when the reservation ends)."""
    out: list[cr.Reservation] = []
    seen: set[str] = set()
    for f in items:
        rid = f.req_str("id")
        if not rid.startswith("cr-"):
            raise f.fail("id", "a capacity reservation id (cr-...)", rid)
        if rid in seen:
            raise f.fail("id", "a unique id", rid)
        seen.add(rid)
        kind = f.str("type") or cr.TYPE_DEFAULT
        if kind not in cr.TYPES:
            raise f.fail("type", "one of " + ", ".join(cr.TYPES), kind)
        imc = f.str("instanceMatchCriteria") or "targeted"
        if imc not in cr.MATCH_CRITERIA:
            raise f.fail("instanceMatchCriteria", "one of " + ", ".join(cr.MATCH_CRITERIA), imc)
        count = f.int("count")
        if count is None or count < 0:
            raise f.fail("count", "a number of instances >= 0", count)
        end_after = _duration(f, "endAfter")
        if kind == cr.TYPE_CAPACITY_BLOCK and end_after is None:
            raise f.fail("endAfter", "an end for a capacity block (e.g. 2h)", None)
        out.append(cr.Reservation(
            id=rid, instance_type=f.req_str("instanceType"), zone=f.req_str("zone"),
            owner_id=f.str("ownerID") or DEFAULT_OWNER, instance_match_criteria=imc, reservation_type=kind,
            total=count, available=count, end_time=start + end_after if end_after is not None else None,
            tags=f.str_map("tags")))
    return tuple(out)


def _duration(f: fields.Fields, key: str) -> float | None:
    raw = f.raw(key)
    if raw is None:
        return None
    try:
        value = duration.parse_duration(raw)
    except duration.DurationError:
        value = None
    if value is None or value <= 0:
        raise f.fail(key, "a positive duration (e.g. 90m, 2h)", raw)
    return value


class SimulatedReservations:
    """See the module docstring."""

    def __init__(self, reservations: Sequence[cr.Reservation] = (), *, enabled: bool = True) -> None:
        self.all = tuple(reservations)
        self.enabled = enabled
        self.availability = shared.Availability()
        self.availability.sync({r.id: r.available for r in self.all})
        self._by_id = {r.id: r for r in self.all}
        self.holders: dict[str, str] = {}
        """Provider ID -> the reservation its instance runs in."""

    def __bool__(self) -> bool:
        return bool(self.all) and self.enabled

    def for_node_class(self, nc: object, now: float) -> list[cr.Reservation]:
        if not self or not isinstance(nc, nodeclass.EC2NodeClass) or not nc.capacity_reservation_selector_terms:
            return []
        return cr.selected(self.all, nc.capacity_reservation_selector_terms, now)

    def add_offerings(self, types: Sequence[instancetype.InstanceType], nc: object,
                      now: float) -> list[instancetype.InstanceType]:
        found = self.for_node_class(nc, now)
        return shared.with_reserved_offerings(types, found, self.availability, now) if found else list(types)

    def launched(self, provider_id: str, offering: instancetype.Offering) -> None:
        if offering.reservation_id:
            self.availability.launched(offering.reservation_id)
            self.holders[provider_id] = offering.reservation_id

    def terminated(self, provider_id: str) -> None:
        rid = self.holders.pop(provider_id, None)
        if rid is not None:
            self.availability.terminated(rid)

    def expiring(self, reservation_ids: Collection[str], now: float) -> set[str]:
        """Those of ``reservation_ids`` that are expiring capacity blocks (or are gone)."""
        return {rid for rid in reservation_ids
                if rid in self._by_id and self._by_id[rid].state(now) == cr.STATE_EXPIRING}

    def reclaims(self, now: float) -> list[tuple[float, str]]:
        """(when, provider ID) of running instances whose capacity block EC2 reclaims by ``now``."""
        out = []
        for pid, rid in sorted(self.holders.items()):
            r = self._by_id[rid]
            if r.reservation_type == cr.TYPE_CAPACITY_BLOCK and r.end_time is not None \
                    and now >= r.end_time - RECLAIM_BEFORE_END:
                out.append((r.end_time - RECLAIM_BEFORE_END, pid))
        return sorted(out)

    def status(self, node_class: Mapping[str, Any], status: dict[str, Any], now: float) -> dict[str, Any]:
        """``status`` with the EC2NodeClass's ``capacityReservations`` and ``CapacityReservationsReady``."""
        if not self or node_class.get("kind") != nodeclass.EC2_KIND:
            return status
        try:
            nc = nodeclass.EC2NodeClass.from_manifest(node_class)
        except api_errors.ValidationError:
            return status
        if not nc.capacity_reservation_selector_terms:
            return status
        found = self.for_node_class(nc, now)
        out = dict(status)
        if found:
            out["capacityReservations"] = [r.status(now) for r in found]
        else:
            out.pop("capacityReservations", None)
        conditions = [c for c in out.get("conditions") or () if c.get("type") != "CapacityReservationsReady"]
        ready = interface.ready_condition(True, "CapacityReservationsReady")
        out["conditions"] = [{**ready, "type": "CapacityReservationsReady"}, *conditions]
        return out
