"""The unavailable-offerings cache shared by the provisioner and the NodeClaim lifecycle.

When a launch fails with :class:`karpy.cloudprovider.errors.InsufficientCapacityError`, the
lifecycle controller marks every offering the error names ``(instance type, zone, capacity type)``
unavailable for ``ttl`` seconds (Karpenter keeps such an "ICE cache" for 3 minutes). The
provisioner passes the instance types it gets from the cloud through :meth:`apply`, which turns
the cached offerings' ``available`` to ``False``, so the next scheduling run plans the pods onto
other offerings. Entries expire on their own; time comes from the injected clock.

A caller may rely on: :meth:`apply` returns new :class:`InstanceType` objects only for types
that have a cached offering (others are passed through unchanged) and never mutates its input.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from karpy import clock as clock_mod
from karpy.cloudprovider import errors as cp_errors
from karpy.cloudprovider import instancetype

DEFAULT_TTL = 180.0


class UnavailableOfferings:
    """Offerings out of capacity until a time: ``(instance_type, zone, capacity_type) -> until``."""

    def __init__(self, clock: clock_mod.Clock, ttl: float = DEFAULT_TTL) -> None:
        self.clock = clock
        self.ttl = ttl
        self._until: dict[cp_errors.OfferingKey, float] = {}

    def mark_unavailable(self, offerings: Iterable[cp_errors.OfferingKey], ttl: float | None = None) -> None:
        """Treat ``offerings`` as unavailable for ``ttl`` seconds (default: the cache's ttl)."""
        until = self.clock.now() + (self.ttl if ttl is None else ttl)
        for key in offerings:
            self._until[key] = max(until, self._until.get(key, 0.0))

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        until = self._until.get((instance_type, zone, capacity_type))
        return until is not None and until > self.clock.now()

    def active(self) -> dict[cp_errors.OfferingKey, float]:
        """The entries that have not expired, ``offering -> until``; drops expired ones."""
        now = self.clock.now()
        for key in [k for k, until in self._until.items() if until <= now]:
            del self._until[key]
        return dict(self._until)

    def apply(self, types: Sequence[instancetype.InstanceType]) -> list[instancetype.InstanceType]:
        """``types`` with every cached offering marked ``available=False``."""
        active = self.active()
        if not active:
            return list(types)
        by_type: dict[str, set[tuple[str, str]]] = {}
        for name, zone, ct in active:
            by_type.setdefault(name, set()).add((zone, ct))
        out: list[instancetype.InstanceType] = []
        for it in types:
            gone = by_type.get(it.name)
            if not gone or not any((o.zone, o.capacity_type) in gone and o.available for o in it.offerings):
                out.append(it)
                continue
            out.append(it.with_offerings(tuple(
                instancetype.Offering(o.zone, o.capacity_type, o.price, False)
                if (o.zone, o.capacity_type) in gone else o
                for o in it.offerings)))
        return out

    def __len__(self) -> int:
        return len(self.active())
