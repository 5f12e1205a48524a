"""EC2 capacity reservations for the AWS provider: DescribeCapacityReservations, availability, launches.

As Karpenter AWS (``pkg/providers/capacityreservation``, ``pkg/providers/launchtemplate/types.go``,
``pkg/providers/instance``):

* :func:`queries`: the DescribeCapacityReservations requests of a NodeClass's
  ``capacityReservationSelectorTerms``: a term with ``id`` is one request by ``CapacityReservationIds``;
  a term with ``tags`` or ``instanceMatchCriteria`` one request with the filters ``owner-id``,
  ``tag:<key>`` (``tag-key`` for ``"*"``) and ``instance-match-criteria``, ``MaxResults`` 1000; every
  request filters ``state=active``. :class:`Reservations` runs them (paginated), drops duplicates and
  reservations that have ended, and syncs each one's ``AvailableInstanceCount`` into its
  :class:`karpy.cloudprovider.reservations.Availability` (counted down per launch, up per termination,
  zero after a launch found it full).
* :func:`launch_template_fields`: a reserved launch's template targets its reservation
  (``CapacityReservationSpecification``: ``capacity-reservations-only`` + the reservation id; a capacity
  block also ``InstanceMarketOptions.MarketType=capacity-block``); a spot or on-demand launch opts out of
  open reservations (``CapacityReservationPreference=none``) - both only with the ``ReservedCapacity`` gate.
* :func:`fleet_capacity_type`: CreateFleet's ``DefaultTargetCapacityType`` of a reserved launch:
  ``capacity-block`` for a capacity block, else ``on-demand``.
* :func:`one_partition`: a reserved launch uses reservations of one type only (default ODCRs before
  capacity blocks: a CreateFleet has one market type) and one reservation per (instance type, zone).
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from karpy import clock as clock_mod
from karpy.api import capacityreservation as cr
from karpy.cloudprovider import reservations as shared
from karpy.cloudprovider.aws import session

MAX_RESULTS = 1000


def queries(terms: Sequence[cr.Term]) -> list[dict[str, Any]]:
    """The DescribeCapacityReservations parameters of ``terms`` (see the module docstring)."""
    out: list[dict[str, Any]] = []
    for t in terms:
        active = [{"Name": "state", "Values": ["active"]}]
        if t.id:
            out.append({"Filters": active, "CapacityReservationIds": [t.id]})
        if t.tags or t.instance_match_criteria:
            filters = list(active)
            if t.owner_id:
                filters.append({"Name": "owner-id", "Values": [t.owner_id]})
            for k, v in sorted(t.tags.items()):
                filters.append({"Name": "tag-key", "Values": [k]} if v == "*" else {"Name": f"tag:{k}", "Values": [v]})
            if t.instance_match_criteria:
                filters.append({"Name": "instance-match-criteria", "Values": [t.instance_match_criteria]})
            out.append({"Filters": filters, "MaxResults": MAX_RESULTS})
    return out


def _time(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    return clock_mod.parse_rfc3339(str(value))


def parse(item: Mapping[str, Any]) -> cr.Reservation | None:
    """A DescribeCapacityReservations entry (``None`` for match criteria or types Karpenter does not know)."""
    imc = str(item.get("InstanceMatchCriteria") or "")
    kind = str(item.get("ReservationType") or cr.TYPE_DEFAULT)
    if imc not in cr.MATCH_CRITERIA or kind not in cr.TYPES:
        return None
    return cr.Reservation(
        id=str(item["CapacityReservationId"]), instance_type=str(item.get("InstanceType") or ""),
        zone=str(item.get("AvailabilityZone") or ""), owner_id=str(item.get("OwnerId") or ""),
        instance_match_criteria=imc, reservation_type=kind, total=int(item.get("TotalInstanceCount") or 0),
        available=int(item.get("AvailableInstanceCount") or 0), end_time=_time(item.get("EndDate")),
        tags={str(t["Key"]): str(t.get("Value") or "") for t in item.get("Tags") or ()},
        interruptible=bool(item.get("Interruptible")))


class Reservations:
    """The account's reservations as the NodeClasses select them, and their availability. Thread-safe."""

    def __init__(self, ec2: Any, clock: clock_mod.Clock, *, enabled: bool = True) -> None:
        self.ec2 = ec2
        self.clock = clock
        self.enabled = enabled
        self.availability = shared.Availability()
        self._lock = threading.Lock()
        self._known: dict[str, cr.Reservation] = {}

    def _describe(self, params: Mapping[str, Any]) -> list[cr.Reservation]:
        out: list[cr.Reservation] = []
        try:
            for page in session.paginate(self.ec2, "describe_capacity_reservations", **params):
                out.extend(r for r in map(parse, page.get("CapacityReservations") or ()) if r is not None)
        except session.AWSError as exc:
            if "NotFound" not in exc.code:  # an id that no longer exists: nothing found, as Karpenter
                raise
        return out

    def list(self, terms: Sequence[cr.Term]) -> list[cr.Reservation]:
        """The reservations ``terms`` select, by id; ``[]`` without terms or with the gate off."""
        if not self.enabled or not terms:
            return []
        found: dict[str, cr.Reservation] = {}
        for params in queries(terms):
            for r in self._describe(params):
                found[r.id] = r
        now = self.clock.now()
        live = [r for _, r in sorted(found.items()) if r.end_time is None or r.end_time > now]
        self.availability.sync({r.id: r.available for r in live})
        with self._lock:
            self._known.update((r.id, r) for r in live)
        return live

    def get(self, reservation_id: str) -> cr.Reservation | None:
        with self._lock:
            return self._known.get(reservation_id)

    def expiring(self, reservation_ids: Collection[str]) -> set[str]:
        """Those of ``reservation_ids`` that are expiring capacity blocks now (described afresh)."""
        if not reservation_ids:
            return set()
        now = self.clock.now()
        found = {r.id: r for r in self._describe({"CapacityReservationIds": sorted(reservation_ids)})}
        return {rid for rid, r in found.items() if r.state(now) == cr.STATE_EXPIRING}


def launch_template_fields(reservation: cr.Reservation | None, enabled: bool) -> dict[str, Any]:
    """The LaunchTemplateData fields a launch adds (see the module docstring)."""
    if not enabled:
        return {}
    if reservation is None:
        return {"CapacityReservationSpecification": {"CapacityReservationPreference": "none"}}
    out: dict[str, Any] = {"CapacityReservationSpecification": {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": reservation.id}}}
    if reservation.reservation_type == cr.TYPE_CAPACITY_BLOCK:
        out["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    return out


def fleet_capacity_type(reservation_type: str) -> str:
    return "capacity-block" if reservation_type == cr.TYPE_CAPACITY_BLOCK else "on-demand"


def one_partition(reservation_types: Sequence[str]) -> str:
    """The reservation type a reserved launch uses among those offered: ``default`` before ``capacity-block``."""
    return cr.TYPE_DEFAULT if cr.TYPE_DEFAULT in reservation_types else cr.TYPE_CAPACITY_BLOCK
