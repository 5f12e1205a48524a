"""The simulated cloud's interruption queue (what SQS or Event Grid would deliver) and spot reclaims.

:class:`Queue` holds :class:`karpy.cloudprovider.interface.InterruptionMessage` s until they are
acknowledged, in the order they were sent, with ids ``msg-000001``, ``msg-000002``... (one
counter shared with the reclaim schedule, so ids depend only on the calls made). Scheduled spot
reclaims come back from :meth:`Queue.due` in time order, each with its own time.

The simulated cloud (:class:`karpy.cloudprovider.fake.provider.SimulatedCloud`) sends: for a
``SpotInterruption``, the notice at once and a ``StateChange`` (``"terminated"``) when it reclaims
the instance two minutes of virtual time later; for an explicit ``StateChange``, the message and an
immediate termination; ``Rebalance`` and ``ScheduledChange`` only queue the message.

Pure; the caller passes every time.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from karpy.cloudprovider import interface


class Queue:
    """See the module docstring."""

    def __init__(self) -> None:
        self._messages: list[interface.InterruptionMessage] = []
        self._reclaims: list[tuple[float, int, str]] = []
        self._seq = 0

    def send(self, provider_id: str, kind: str, when: float, detail: str) -> interface.InterruptionMessage:
        self._seq += 1
        msg = interface.InterruptionMessage(f"msg-{self._seq:06d}", provider_id, kind, when, detail)
        self._messages.append(msg)
        return msg

    def pending(self) -> list[interface.InterruptionMessage]:
        return list(self._messages)

    def ack(self, message: interface.InterruptionMessage) -> None:
        self._messages = [m for m in self._messages if m.id != message.id]

    def schedule_reclaim(self, provider_id: str, when: float) -> None:
        self._seq += 1
        heapq.heappush(self._reclaims, (when, self._seq, provider_id))

    def due(self, now: float) -> Iterator[tuple[float, str]]:
        """Pop every reclaim due by ``now``: (its time, provider ID), earliest first."""
        while self._reclaims and self._reclaims[0][0] <= now:
            when, _, pid = heapq.heappop(self._reclaims)
            yield when, pid
