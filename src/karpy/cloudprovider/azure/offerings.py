"""The unavailable-offerings cache and what each Azure launch error marks unavailable.

As Karpenter's Azure provider does, an offering ``(size, zone, capacity type)`` that failed to
launch is left out of :meth:`CloudProvider.get_instance_types` (``available=False``) and skipped by
the next launches until its entry expires. :func:`classify` maps an ARM error to a
:class:`LaunchFailure` that says which offerings to mark, for how long and with which reason:

* ``SkuNotAvailable``: this size's offerings of the attempted capacity type in the attempted
  placement scope (zonal or regional), 1 h for spot, 23 h for on-demand;
* ``ZonalAllocationFailed``: this size in this zone, both capacity types, 1 h;
* ``AllocationFailed``: this size in every zone of the attempted scope, both capacity types, 1 h;
* ``OverconstrainedZonalAllocationRequest``: this offering only, 1 h;
* ``OverconstrainedAllocationRequest``: this size and capacity type in the attempted scope, 1 h;
* family vCPU quota (``OperationNotAllowed`` naming a family quota): this size and capacity type
  everywhere, 1 h when the limit is 0, else 10 min; regional vCPU quota: every on-demand offering,
  1 h; spot (low-priority) quota: every spot offering, 1 h.

Any other error is not a capacity error: the launch stops with it. The cache reads time only from
the :class:`karpy.clock.Clock` it is given; it is pure otherwise (no I/O).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from karpy import clock
from karpy.api import labels
from karpy.cloudprovider import errors, instancetype

HOUR = 3600.0
LOW_QUOTA_TTL = 600.0
SUBSCRIPTION_QUOTA_TTL = HOUR
ALLOCATION_FAILURE_TTL = HOUR
SKU_NOT_AVAILABLE_SPOT_TTL = HOUR
SKU_NOT_AVAILABLE_ON_DEMAND_TTL = 23 * HOUR

ANY = "*"
"""Wildcard for a size or zone in a cache entry (quota errors mark a whole capacity type)."""

_LIMIT = re.compile(r"Current Limit:\s*(\d+)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class LaunchFailure:
    """What one failed launch means for the offerings: ``keys`` to mark for ``ttl`` seconds."""

    reason: str
    """Karpenter's Azure reason: ``SKUNotAvailable``, ``ZonalAllocationFailure``,
    ``AllocationFailure``, ``OverconstrainedZonalAllocationFailure``,
    ``OverconstrainedAllocationFailure``, ``SubscriptionQuotaReached``."""
    keys: tuple[errors.OfferingKey, ...]
    ttl: float
    message: str


class UnavailableOfferings:
    """Offerings known to have failed recently, each until its own expiry time (thread-safe: launches
    run on a pool of threads in ``karpy controller``)."""

    def __init__(self, clk: clock.Clock) -> None:
        self._clock = clk
        self._lock = threading.Lock()
        self._until: dict[errors.OfferingKey, tuple[float, str]] = {}
        self.seq = 0
        """Changes whenever an entry is added (callers may cache views keyed by it)."""

    def mark(self, key: errors.OfferingKey, ttl: float, reason: str) -> None:
        """``key`` (``ANY`` allowed for size or zone) is unavailable for ``ttl`` seconds from now."""
        until = self._clock.now() + ttl
        with self._lock:
            old = self._until.get(key)
            if old is None or old[0] < until:
                self._until[key] = (until, reason)
            self.seq += 1

    def mark_all(self, failure: LaunchFailure) -> None:
        for key in failure.keys:
            self.mark(key, failure.ttl, failure.reason)

    def reason(self, size: str, zone: str, capacity_type: str) -> str | None:
        """Why the offering is unavailable now, or ``None`` when it is not in the cache."""
        now = self._clock.now()
        for key in ((size, zone, capacity_type), (size, ANY, capacity_type), (ANY, ANY, capacity_type)):
            with self._lock:
                hit = self._until.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        return None

    def is_unavailable(self, size: str, zone: str, capacity_type: str) -> bool:
        return self.reason(size, zone, capacity_type) is not None

    def apply(self, types: Iterable[instancetype.InstanceType]) -> list[instancetype.InstanceType]:
        """``types`` with the offerings in the cache marked ``available=False``."""
        out = []
        for it in types:
            offers = tuple(
                instancetype.Offering(o.zone, o.capacity_type, o.price, False)
                if o.available and self.is_unavailable(it.name, o.zone, o.capacity_type) else o
                for o in it.offerings)
            out.append(it if offers == it.offerings else it.with_offerings(offers))
        return out

    def entries(self) -> dict[errors.OfferingKey, str]:
        """Every entry still in force, with its reason."""
        now = self._clock.now()
        with self._lock:
            items = sorted(self._until.items())
        return {k: r for k, (until, r) in items if until > now}


def _scope(zone: str) -> str:
    return "regional" if zone == "" else "zonal"


def _zones_in_scope(it: instancetype.InstanceType, zone: str) -> list[str]:
    return sorted({o.zone for o in it.offerings if _scope(o.zone) == _scope(zone)})


def _limit_is_zero(message: str) -> bool:
    m = _LIMIT.search(message)
    return m is not None and int(m.group(1)) == 0


def classify(code: str, message: str, it: instancetype.InstanceType, zone: str,
             capacity_type: str) -> LaunchFailure | None:
    """What an ARM error ``code`` / ``message`` on launching ``it`` in ``zone`` means, or ``None``
    when it is not a capacity or quota error (see the module docstring)."""
    name = it.name
    both = (labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_SPOT)
    lowered = message.lower()
    if code == "OperationNotAllowed" and "quota" in lowered:
        if "lowpriority" in lowered.replace(" ", "").replace("-", "") or "spot" in lowered:
            return LaunchFailure("SubscriptionQuotaReached", ((ANY, ANY, labels.CAPACITY_TYPE_SPOT),),
                                 SUBSCRIPTION_QUOTA_TTL,
                                 "this subscription has reached the regional vCPU quota for spot (LowPriorityCores)")
        if "family" in lowered:
            ttl = SUBSCRIPTION_QUOTA_TTL if _limit_is_zero(message) else LOW_QUOTA_TTL
            return LaunchFailure("SubscriptionQuotaReached", ((name, ANY, capacity_type),), ttl,
                                 f"subscription level {capacity_type} vCPU quota for {name} has been reached "
                                 "(may try provision an alternative instance type)")
        return LaunchFailure("SubscriptionQuotaReached", ((ANY, ANY, capacity_type),), SUBSCRIPTION_QUOTA_TTL,
                             f"subscription level regional vCPU quota for {capacity_type} has been reached")
    if code == "SkuNotAvailable":
        ttl = SKU_NOT_AVAILABLE_SPOT_TTL if capacity_type == labels.CAPACITY_TYPE_SPOT \
            else SKU_NOT_AVAILABLE_ON_DEMAND_TTL
        keys = tuple((name, z, capacity_type) for z in _zones_in_scope(it, zone))
        return LaunchFailure("SKUNotAvailable", keys, ttl,
                             f"the requested SKU is unavailable for instance type {name} in zone {zone} with "
                             f"capacity type {capacity_type}")
    if code == "ZonalAllocationFailed":
        return LaunchFailure("ZonalAllocationFailure", tuple((name, zone, ct) for ct in both),
                             ALLOCATION_FAILURE_TTL,
                             f"unable to allocate resources in the selected zone ({zone}) "
                             "(will try a different zone to fulfill your request)")
    if code == "AllocationFailed":
        keys = tuple((name, z, ct) for z in _zones_in_scope(it, zone) for ct in both)
        return LaunchFailure("AllocationFailure", keys, ALLOCATION_FAILURE_TTL,
                             f"unable to allocate resources with selected VM size ({name}) "
                             "(will try a different VM size to fulfill your request)")
    if code == "OverconstrainedZonalAllocationRequest":
        return LaunchFailure("OverconstrainedZonalAllocationFailure", ((name, zone, capacity_type),),
                             ALLOCATION_FAILURE_TTL,
                             f"unable to allocate resources in the selected zone ({zone}) with {capacity_type} "
                             f"capacity type and {name} VM size")
    if code == "OverconstrainedAllocationRequest":
        keys = tuple((name, z, capacity_type) for z in _zones_in_scope(it, zone))
        return LaunchFailure("OverconstrainedAllocationFailure", keys, ALLOCATION_FAILURE_TTL,
                             f"unable to allocate resources in all zones with {capacity_type} capacity type "
                             f"and {name} VM size")
    return None
