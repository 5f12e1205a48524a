"""EC2 capacity reservations in the EC2NodeClass: ``spec.capacityReservationSelectorTerms`` and
``status.capacityReservations`` (Karpenter AWS ``pkg/apis/v1/ec2nodeclass.go`` / ``_status.go``).

A term selects On-Demand Capacity Reservations (and capacity blocks, which EC2 models as ODCRs) by
``id`` alone, or by ``tags`` (value ``"*"``: any value), ``ownerID`` and ``instanceMatchCriteria``
(``open`` / ``targeted``) together; terms are ORed. The status lists each reservation found, with its
``reservationType`` (``default`` or ``capacity-block``) and ``state``: a capacity block is
``expiring`` from :data:`EXPIRATION_PERIOD` seconds before its end time (Karpenter's
``CapacityReservationFromEC2``), every other reservation ``active``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy import clock
from karpy.api import fields

TYPE_DEFAULT = "default"
TYPE_CAPACITY_BLOCK = "capacity-block"
TYPES = (TYPE_DEFAULT, TYPE_CAPACITY_BLOCK)
MATCH_CRITERIA = ("open", "targeted")
STATE_ACTIVE = "active"
STATE_EXPIRING = "expiring"
EXPIRATION_PERIOD = 40 * 60.0
"""A capacity block is expiring this long before its end time (EC2 reclaims its instances 30 minutes
before the end: Karpenter drains them 10 minutes earlier)."""
LABEL_ID = "karpenter.k8s.aws/capacity-reservation-id"
LABEL_TYPE = "karpenter.k8s.aws/capacity-reservation-type"
LABEL_INTERRUPTIBLE = "karpenter.k8s.aws/capacity-reservation-interruptible"


@dataclass(frozen=True, slots=True)
class Term:
    """One ``capacityReservationSelectorTerms`` entry."""

    id: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    owner_id: str | None = None
    instance_match_criteria: str | None = None

    def __hash__(self) -> int:
        return hash((self.id, tuple(sorted(self.tags.items())), self.owner_id, self.instance_match_criteria))

    @staticmethod
    def parse(f: fields.Fields) -> Term:
        imc = f.str("instanceMatchCriteria")
        if imc is not None and imc not in MATCH_CRITERIA:
            raise f.fail("instanceMatchCriteria", "one of " + ", ".join(MATCH_CRITERIA), imc)
        return Term(id=f.str("id"), tags=f.str_map("tags"), owner_id=f.str("ownerID"), instance_match_criteria=imc)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.id is not None:
            out["id"] = self.id
        if self.instance_match_criteria is not None:
            out["instanceMatchCriteria"] = self.instance_match_criteria
        if self.owner_id is not None:
            out["ownerID"] = self.owner_id
        if self.tags:
            out["tags"] = dict(self.tags)
        return out


@dataclass(frozen=True, slots=True)
class Reservation:
    """A capacity reservation as EC2 describes it (the parts Karpenter reads)."""

    id: str
    instance_type: str
    zone: str
    owner_id: str
    instance_match_criteria: str = "targeted"
    reservation_type: str = TYPE_DEFAULT
    total: int = 0
    """``TotalInstanceCount``."""
    available: int = 0
    """``AvailableInstanceCount`` when described."""
    end_time: float | None = None
    """Seconds since the epoch; ``None``: unlimited."""
    tags: Mapping[str, str] = field(default_factory=dict)
    interruptible: bool = False

    def __hash__(self) -> int:
        return hash(self.id)

    def state(self, now: float) -> str:
        if self.reservation_type != TYPE_CAPACITY_BLOCK or self.end_time is None:
            return STATE_ACTIVE
        return STATE_EXPIRING if now >= self.end_time - EXPIRATION_PERIOD else STATE_ACTIVE

    def matches(self, term: Term) -> bool:
        """Does ``term`` select this reservation (EC2's filters as Karpenter builds them)?"""
        if term.id is not None:
            return term.id == self.id
        if term.owner_id is not None and term.owner_id != self.owner_id:
            return False
        if term.instance_match_criteria is not None and term.instance_match_criteria != self.instance_match_criteria:
            return False
        return all(k in self.tags and (v == "*" or self.tags[k] == v) for k, v in term.tags.items())

    def labels(self) -> dict[str, str]:
        """The node labels of an instance launched into it."""
        return {LABEL_ID: self.id, LABEL_TYPE: self.reservation_type}

    def status(self, now: float) -> dict[str, Any]:
        """Its ``status.capacityReservations`` entry."""
        out: dict[str, Any] = {"availabilityZone": self.zone, "id": self.id,
                               "instanceMatchCriteria": self.instance_match_criteria,
                               "instanceType": self.instance_type, "ownerID": self.owner_id,
                               "reservationType": self.reservation_type, "state": self.state(now)}
        if self.end_time is not None:
            out["endTime"] = clock.rfc3339(self.end_time)
        if self.interruptible:
            out["interruptible"] = True
        return out


def selected(reservations: list[Reservation] | tuple[Reservation, ...], terms: tuple[Term, ...],
             now: float) -> list[Reservation]:
    """The reservations any of ``terms`` selects that have not ended, by id (Karpenter drops ended ones)."""
    out = {r.id: r for r in reservations if any(r.matches(t) for t in terms)
           and (r.end_time is None or r.end_time > now)}
    return [out[k] for k in sorted(out)]
