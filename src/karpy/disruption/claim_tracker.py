"""NodeClaims' expiration times and which NodeClaims are still launching, kept from change marks.

The disruption controller asks every pass which NodeClaims are past ``spec.expireAfter``, when
the next one will be, and which NodeClaims have no Node yet (consolidation waits for them).
:class:`ClaimTracker` answers from what it keeps per NodeClaim and re-reads only the NodeClaims
:mod:`karpy.disruption.changes` marked (a NodeClaim's own events, and its Node's: a Node
registering or going changes whether the claim is still launching).

A caller may rely on: :meth:`ClaimTracker.expired`, :meth:`next_expiry` and
:meth:`launching` give what a walk over every parsed NodeClaim of cluster state would give now.
"""

from __future__ import annotations

import heapq

from karpy.api import nodeclaim
from karpy.controllers import state
from karpy.disruption import changes

EXPIRY_SLACK = 1.0
"""Seconds before its computed expiration time a claim is checked with the exact test (the
sum ``creation + expireAfter`` may round differently from ``now - creation >= expireAfter``)."""


class ClaimTracker:
    """See the module docstring."""

    def __init__(self, cluster_state: state.ClusterState, dirty: changes.Dirty) -> None:
        self.state = cluster_state
        self.dirty = dirty
        self._expiry: dict[str, tuple[float, bool]] = {}
        """NodeClaim -> (creation time + ``expireAfter``, whether it is deleting)."""
        self._heap: list[tuple[float, str]] = []
        """(expiration time, claim) of claims not deleting; entries no longer in ``_expiry`` are stale."""
        self._launching: set[str] = set()
        """Claims not deleting with no Node of their provider ID (none yet, or not launched)."""

    def refresh(self) -> None:
        """Re-read the NodeClaims marked since the last call."""
        everything, _, claims = self.dirty.take()
        if everything:
            self._expiry.clear()
            self._heap.clear()
            self._launching.clear()
            for claim in self.state.nodeclaims():
                self._read(claim.name, claim)
            return
        for name in claims:
            self._read(name, self.state.nodeclaim(name))

    def _read(self, name: str, claim: nodeclaim.NodeClaim | None) -> None:
        self._launching.discard(name)
        old = self._expiry.pop(name, None)
        if claim is None:
            return
        deleting = claim.metadata.deletion_timestamp is not None
        if not deleting and not self.state.node_name_for_provider_id(claim.status.provider_id):
            self._launching.add(name)
        if claim.spec.expire_after is None or claim.metadata.creation_timestamp is None:
            return
        entry = (claim.metadata.creation_timestamp + claim.spec.expire_after, deleting)
        self._expiry[name] = entry
        if not deleting and entry != old:
            heapq.heappush(self._heap, (entry[0], name))

    def expired(self, now: float) -> list[nodeclaim.NodeClaim]:
        """Claims not deleting that are past their ``expireAfter`` at ``now``, by name."""
        self.refresh()
        due: dict[str, nodeclaim.NodeClaim] = {}
        later: list[tuple[float, str]] = []
        while self._heap and self._heap[0][0] <= now + EXPIRY_SLACK:
            at, name = heapq.heappop(self._heap)
            if self._expiry.get(name) != (at, False) or name in due:
                continue  # stale: the claim changed, is deleting or gone
            claim = self.state.nodeclaim(name)
            if claim is None or claim.spec.expire_after is None or claim.metadata.creation_timestamp is None:
                continue
            if now - claim.metadata.creation_timestamp < claim.spec.expire_after:
                later.append((at, name))
                continue
            due[name] = claim
            later.append((at, name))  # kept until the claim's deletion is seen (a failed delete retries)
        for entry in later:
            heapq.heappush(self._heap, entry)
        return [due[name] for name in sorted(due)]

    def next_expiry(self, now: float) -> float | None:
        """The earliest expiration time after ``now`` of any claim (deleting ones included)."""
        self.refresh()
        return min((at for at, _ in self._expiry.values() if at > now), default=None)

    def launching(self) -> list[str]:
        """Claims not deleting whose Node is not there (yet), by name."""
        self.refresh()
        return sorted(self._launching)
