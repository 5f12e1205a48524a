"""Events sent from a thread of their own, so that publishing never waits on the API server.

:class:`BackgroundRecorder` is an :class:`~karpy.kube.events.EventRecorder` whose ``publish`` and
``series`` only put the event, with the time it happened, on a bounded queue and return; one
background thread takes them in order and does what the plain recorder does (create, or aggregate a
repeat into the existing Event's ``count``), stamped with the time of the call, not of the write.
This is client-go's event broadcaster: a controller's ``Eventf`` queues and returns, a goroutine
correlates and writes. ``karpy controller`` gives its controllers one; ``karpy simulate`` and the tests
keep the plain recorder, which writes inline and deterministically.

A caller may rely on:

* ``publish`` never blocks and never raises for the cluster's sake; it checks the event type at once
  (:class:`karpy.kube.errors.Invalid`, as the plain recorder) and returns the event as queued (no name
  and no count yet: nothing is written);
* events are written in the order they were published, one at a time, so an Event's creation comes
  before the count updates of its repeats;
* when :data:`CAPACITY` events wait already, a new one is dropped and counted in :attr:`dropped`
  (client-go drops what its full channel cannot take); a write the cluster refuses is logged and
  counted in :attr:`failed`; :attr:`written` counts the events handled without error;
* :meth:`collector` gives ``/metrics`` ``karpy_events_dropped_total``, ``karpy_events_failed_total``,
  ``karpy_events_written_total`` and ``karpy_events_queued``;
* :meth:`close` stops taking events, writes what is queued and the counts not written yet
  (:meth:`~karpy.kube.events.EventRecorder.flush`) for at most ``timeout`` seconds.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from karpy import clock as clock_mod
from karpy.kube import errors, events, interface

log = logging.getLogger("karpy.kube.events")

CAPACITY = 1000
"""Events that may wait for the background thread (client-go's maxQueuedEvents)."""

_STOP = object()


class BackgroundRecorder(events.EventRecorder):
    """See the module docstring."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock, component: str = "karpenter",
                 capacity: int = CAPACITY) -> None:
        super().__init__(cluster, clock, component)
        if capacity < 1:
            raise ValueError(f"an event queue needs room for at least one event, not {capacity}")
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=capacity)
        self._lock = threading.Lock()
        self._closed = False
        self.dropped = 0
        self.failed = 0
        self.written = 0
        self._thread = threading.Thread(target=self._run, name="karpy-events", daemon=True)
        self._thread.start()

    def publish(self, involved: Mapping[str, Any], type: str, reason: str, message: str) -> dict[str, Any]:
        """Queue the event (see the module docstring); returns it as queued."""
        self._check(type)
        self._offer(self._publish_at, (involved, type, reason, message, self.clock.now()))
        return {"involvedObject": events.involved_object(involved), "type": type, "reason": reason,
                "message": message, "source": {"component": self.component}}

    def series(self, involved: Mapping[str, Any], type: str, reason: str, message: str) -> dict[str, Any] | None:
        """Queue an isomorphic-series event; nothing is written yet, so ``None``."""
        self._check(type)
        self._offer(self._series_at, (involved, type, reason, message, self.clock.now()))
        return None

    @staticmethod
    def _check(type_: str) -> None:
        if type_ not in (events.NORMAL, events.WARNING):
            raise errors.Invalid(f"event type must be {events.NORMAL} or {events.WARNING}, found {type_!r}")

    def _offer(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        with self._lock:
            if self._closed:
                self.dropped += 1
                return
            try:
                self._queue.put_nowait((fn, args))
            except queue.Full:
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    log.warning("events: queue full (%d waiting); %d events dropped so far",
                                self._queue.maxsize, self.dropped)

    def pending(self) -> int:
        """Events queued and not handled yet."""
        return self._queue.unfinished_tasks

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                fn, args = item
                try:
                    fn(*args)
                except Exception as exc:  # an event that cannot be written must never stop the others
                    self.failed += 1
                    log.warning("events: cannot write %s event on %s: %s", args[2],
                                events.involved_object(args[0]).get("name"), exc)
                else:
                    self.written += 1
            finally:
                self._queue.task_done()

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until every queued event is handled; True when none is left."""
        deadline = clock_mod.perf_counter() + timeout
        while self._queue.unfinished_tasks:
            if clock_mod.perf_counter() >= deadline:
                return False
            threading.Event().wait(0.01)
        return True

    def close(self, timeout: float = 5.0) -> bool:
        """Take no more events; write the queued ones and the pending counts. True when all were written."""
        with self._lock:
            if self._closed:
                return not self._thread.is_alive()
            self._closed = True
        if not self.wait_idle(timeout):
            return False  # the thread is a daemon: what is still queued goes with the process
        self._queue.put(_STOP)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            try:
                self.flush()
            except Exception as exc:
                log.warning("events: cannot write the last counts: %s", exc)
                return False
            return True
        return False

    def collector(self) -> EventsCollector:
        """A Prometheus collector of this recorder's counts (register it in a registry)."""
        return EventsCollector(self)


class EventsCollector:
    """Reads a :class:`BackgroundRecorder`'s counts at scrape time."""

    def __init__(self, recorder: BackgroundRecorder) -> None:
        self._recorder = recorder

    def collect(self) -> Iterator[Metric]:
        r = self._recorder
        for name, help_, value in (
                ("karpy_events_dropped", "Events dropped because the event queue was full.", r.dropped),
                ("karpy_events_failed", "Events the API server refused (each is logged).", r.failed),
                ("karpy_events_written", "Events created or aggregated by the event thread.", r.written)):
            counter = CounterMetricFamily(name, help_)
            counter.add_metric([], value)
            yield counter
        queued = GaugeMetricFamily("karpy_events_queued", "Events waiting for the event thread.")
        queued.add_metric([], r.pending())
        yield queued
