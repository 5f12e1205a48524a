"""The insufficient-capacity cache: offerings EC2 recently could not fill, as Karpenter's
``UnavailableOfferings``.

An offering ``(instance type, zone, capacity type)`` marked unavailable stays so for
:data:`TTL_SECONDS` (three minutes) of the injected clock; marking it again extends the time. It is
fed by CreateFleet ``Errors[]`` and by spot interruption notices, and read when instance types are
listed (``Offering.available = False``) and when launch overrides are built (the offering is skipped).
Thread-safe.
"""

from __future__ import annotations

import threading

from karpy import clock as clock_mod
from karpy.cloudprovider import errors

TTL_SECONDS = 180.0


class UnavailableOfferings:
    def __init__(self, clock: clock_mod.Clock, ttl: float = TTL_SECONDS) -> None:
        self.clock = clock
        self.ttl = ttl
        self._until: dict[errors.OfferingKey, float] = {}
        self._lock = threading.Lock()
        self.seq = 0
        """Changes whenever an offering is marked, so callers can cache views keyed by it."""
        self.history: list[tuple[float, errors.OfferingKey, str]] = []
        """(time, offering, reason) of every mark, oldest first (the last 1000)."""

    def mark(self, instance_type: str, zone: str, capacity_type: str, reason: str = "", *,
             until: float | None = None) -> None:
        """Unavailable for the TTL (or until ``until``, seconds since the epoch)."""
        with self._lock:
            self._until[(instance_type, zone, capacity_type)] = until if until is not None else \
                self.clock.now() + self.ttl
            self.seq += 1
            self.history.append((self.clock.now(), (instance_type, zone, capacity_type), reason))
            del self.history[:-1000]

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        with self._lock:
            until = self._until.get((instance_type, zone, capacity_type))
            return until is not None and until > self.clock.now()

    def snapshot(self) -> frozenset[errors.OfferingKey]:
        """Every offering unavailable now."""
        now = self.clock.now()
        with self._lock:
            expired = [k for k, until in self._until.items() if until <= now]
            for k in expired:
                del self._until[k]
            return frozenset(self._until)
