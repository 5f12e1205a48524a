"""The controller runtime: work queues with delays, driven by an injected clock.

Every karpy controller is a :class:`Controller`: a ``reconcile(key) -> requeue_after | None``
function plus the watches that map object changes to keys. The :class:`Manager` owns one ordered
queue of due work items ``(due_time, seq, controller, key)``:

- ``enqueue(controller, key, after)`` schedules a key; a key already queued keeps the earliest due
  time (as controller-runtime's rate-limited queue coalesces duplicates).
- ``run_due()`` runs every item whose due time is ``<= clock.now()`` in (time, insertion) order.
  A reconcile that raises is logged with its controller and key, counted, and retried with
  exponential backoff; one bad object never stops the loop.
- ``next_due()`` tells a driver when the next work is due.
- ``calls`` (:mod:`karpy.controllers.cloudcalls`) is how controllers run cloud calls: inline by
  default, a bounded thread pool under the real-time driver (:mod:`karpy.controllers.realtime`).
- a watch's mapper wrapped by :func:`only` says what it ignores (e.g. a status write that only
  rewords a condition's message); the cluster may then skip calling it.

Two drivers use the same Manager and the same controllers: the simulator advances a
``VirtualClock`` to ``next_due()`` (merged with its own world events); a real deployment sleeps on
the wall clock and feeds watch events from the API server. Controllers never know which.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as clock_mod
from karpy.controllers import cloudcalls, reconcile_errors
from karpy.kube import interface

log = logging.getLogger("karpy.controllers")

Mapper = Callable[[str, dict[str, Any]], Iterable[str]]
"""(event type, object) -> keys to reconcile."""


def only(mapper: Mapper, watch_filter: interface.WatchFilter = interface.MESSAGES_ONLY) -> Mapper:
    """``mapper`` for a watch that cares only about the events ``watch_filter`` wants (by default all
    but a rewording of conditions' messages): the cluster may skip the others
    (:meth:`karpy.kube.interface.Cluster.watch`), so ``mapper`` must not depend on them."""
    return interface.Filtered(mapper, watch_filter)


def by_name(_event: str, obj: dict[str, Any]) -> Iterable[str]:
    """Map an object to its own ``namespace/name`` (or ``name``) key."""
    md = obj.get("metadata", {})
    ns = md.get("namespace") or ""
    return (f"{ns}/{md.get('name')}" if ns else str(md.get("name")),)


@dataclass
class Controller:
    """A named reconcile function and what it watches."""

    name: str
    reconcile: Callable[[str], float | None]
    """Reconcile one key; return seconds after which to look again, or None."""
    watches: list[tuple[str, Mapper]] = field(default_factory=list)
    errors: int = 0


class Manager:
    """Runs controllers' reconciles when due, on whatever clock it is given."""

    MAX_BACKOFF = 300.0

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock,
                 calls: cloudcalls.CloudCalls | None = None) -> None:
        self.cluster = cluster
        self.clock = clock
        self.calls: cloudcalls.CloudCalls = calls if calls is not None else cloudcalls.Inline()
        """How controllers run cloud calls: inline (simulator) or on a pool (real driver)."""
        self.controllers: dict[str, Controller] = {}
        self._queue: list[tuple[float, int, str, str]] = []
        self._due: dict[tuple[str, str], float] = {}
        self._seq = 0
        self._failures: dict[tuple[str, str], int] = {}
        self.reconciles = 0
        self.failures = reconcile_errors.ReconcileErrors()
        """Every reconcile failure, for reports (nothing fails silently)."""
        self.observer: Callable[[str, str, float], None] | None = None
        """Told (controller, result, real seconds) after each reconcile: controller-runtime's metrics."""

    def register(self, controller: Controller) -> None:
        if controller.name in self.controllers:
            raise ValueError(f"controller {controller.name!r} registered twice")
        self.controllers[controller.name] = controller
        for kind, mapper in controller.watches:
            if isinstance(mapper, interface.Filtered):  # the cluster may skip what the mapper ignores
                self.cluster.watch(kind, interface.Filtered(self._watch_handler(controller.name, mapper.fn),
                                                            mapper.watch_filter))
            else:
                self.cluster.watch(kind, self._watch_handler(controller.name, mapper))

    def _watch_handler(self, name: str, mapper: Mapper) -> Callable[[str, dict[str, Any]], None]:
        def handle(event: str, obj: dict[str, Any]) -> None:
            try:
                keys = mapper(event, obj)
                if type(keys) is not tuple:  # a generator may fail half-way: map all before enqueuing
                    keys = list(keys)
            except Exception:  # a bad object must not break the watch
                log.exception("controller %s: cannot map %s event", name, event)
                return
            for key in keys:
                self.enqueue(name, key)

        return handle

    def enqueue(self, controller: str, key: str, after: float = 0.0) -> None:
        due = self.clock.now()
        if after > 0.0:  # a negative (or NaN) delay is "now"
            due += after
        item = (controller, key)
        current = self._due.get(item)
        if current is not None and current <= due:
            return
        self._due[item] = due
        self._seq += 1
        heapq.heappush(self._queue, (due, self._seq, controller, key))

    def next_due(self) -> float | None:
        """The due time of the earliest queued item, or None when idle."""
        while self._queue:
            due, _, name, key = self._queue[0]
            if self._due.get((name, key)) == due:
                return due
            heapq.heappop(self._queue)  # superseded by an earlier enqueue
        return None

    def run_due(self, limit: int = 1_000_000) -> int:
        """Run every item due now; returns how many reconciles ran."""
        ran = 0
        now = self.clock.now()
        while self._queue and ran < limit:
            due, _, name, key = self._queue[0]
            if due > now:
                break
            heapq.heappop(self._queue)
            if self._due.get((name, key)) != due:
                continue
            del self._due[(name, key)]
            ran += 1
            self._run(name, key)
        self.reconciles += ran
        return ran

    def _run(self, name: str, key: str) -> None:
        controller = self.controllers[name]
        started = clock_mod.perf_counter()
        try:
            after = controller.reconcile(key)
        except Exception as exc:
            if self.observer is not None:
                self.observer(name, "error", clock_mod.perf_counter() - started)
            controller.errors += 1
            self.failures.record(name, key, exc, self.clock.now())
            failures = self._failures.get((name, key), 0) + 1
            self._failures[(name, key)] = failures
            backoff = min(self.MAX_BACKOFF, 0.005 * 2 ** min(failures, 20))
            retryable = getattr(exc, "retryable", True)
            log.warning("controller %s: reconcile %s failed (%s): %s; retrying in %.3fs",
                        name, key, type(exc).__name__, exc, backoff if retryable else 10.0)
            self.enqueue(name, key, backoff if retryable else max(backoff, 10.0))
            return
        self._failures.pop((name, key), None)
        if self.observer is not None:
            self.observer(name, "success" if after is None else "requeue_after", clock_mod.perf_counter() - started)
        if after is not None:
            self.enqueue(name, key, after)

    def pending(self) -> int:
        return len(self._due)
