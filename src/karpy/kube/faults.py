"""Fault injection around any :class:`karpy.kube.interface.Cluster`, for chaos runs and tests.

:class:`FaultyCluster` implements the Cluster contract by delegating to an inner cluster and, with
the rates of a :class:`KubeFaults`, failing calls the way an API server under stress does:

* a write (create, update, update_status, patch, patch_status, delete, evict) may fail *before*
  reaching the store with ``Conflict`` (409), ``TooManyRequests`` (429), ``InternalError`` (500) or
  ``Timeout`` (504), or be applied and then lose its response (``Timeout`` after the write: the
  caller cannot tell whether it happened, as with a real timeout);
* a read (get, list) may fail with ``InternalError`` or ``TooManyRequests``;
* a watch may drop events (all watches of a kind lose the same event, as the handlers of one
  informer do). A dropped event breaks the watch as it does for an informer: after
  ``relist_after`` seconds the next call re-lists the kind and hands the handler what changed
  (ADDED/MODIFIED for every current object, DELETED for those that went), as client-go's reflector
  does. ``pump()`` delivers a due re-list; every call pumps too;
* a watch may deliver events late (``watch_delay``, by ``delay_seconds``); events of one object stay in
  order, and with ``watch_reorder`` events of other objects overtake a delayed one. ``pump()``
  delivers them when due.

Every injected fault is counted in :attr:`FaultyCluster.injected` by name. Randomness comes from
the ``rng`` given (seeded by the caller). :meth:`close` stops every watch opened through this
wrapper (a controller process that dies).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from karpy import clock as clock_mod
from karpy.kube import errors, interface


@dataclass(frozen=True, slots=True)
class KubeFaults:
    """Rates (0..1, per call) of each API-server fault."""

    conflict: float = 0.0
    throttle: float = 0.0
    server_error: float = 0.0
    timeout: float = 0.0
    lost_response: float = 0.0
    read_error: float = 0.0
    watch_drop: float = 0.0
    relist_after: float = 5.0
    watch_delay: float = 0.0
    """Rate of watch events delivered ``delay_seconds`` late."""
    delay_seconds: float = 3.0
    watch_reorder: bool = False
    """Events of other objects overtake a delayed one (events of one object always stay in order)."""

    @property
    def any(self) -> bool:
        return any((self.conflict, self.throttle, self.server_error, self.timeout, self.lost_response,
                    self.read_error, self.watch_drop, self.watch_delay))


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class _Watch:
    def __init__(self, kind: str, handler: interface.WatchHandler) -> None:
        self.kind = kind
        self.handler = handler
        self.seen: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        self.broken_at: float | None = None
        self.closed = False
        self.unsubscribe: interface.Unsubscribe | None = None
        self.queue: list[tuple[float, str, dict[str, Any]]] = []
        """Delayed events: (due, event, object), delivered by ``pump`` in order."""


class FaultyCluster:
    """See the module docstring."""

    def __init__(self, inner: interface.Cluster, faults: KubeFaults, rng: random.Random,
                 clock: clock_mod.Clock) -> None:
        self.inner = inner
        self.faults = faults
        self.rng = rng
        self.clock = clock
        self.injected: dict[str, int] = {}
        self._watches: list[_Watch] = []
        self._last_event: dict[str, tuple[tuple[str, str, str, str], bool]] = {}
        self._last_delay: dict[str, tuple[tuple[str, str, str, str], bool]] = {}

    # ---------------------------------------------------------------------------- faults

    def _count(self, name: str) -> None:
        self.injected[name] = self.injected.get(name, 0) + 1

    def _before_write(self, what: str) -> None:
        self.pump()
        f = self.faults
        roll = self.rng.random()
        for rate, name, exc in ((f.conflict, "conflict", errors.Conflict),
                                (f.throttle, "throttle", errors.TooManyRequests),
                                (f.server_error, "serverError", errors.InternalError),
                                (f.timeout, "timeout", errors.Timeout)):
            if roll < rate:
                self._count(name)
                raise exc(f"injected fault: {name} on {what}")
            roll -= rate

    def _after_write(self, what: str) -> None:
        if self.faults.lost_response and self.rng.random() < self.faults.lost_response:
            self._count("lostResponse")
            raise errors.Timeout(f"injected fault: the response to {what} was lost (it was applied)")

    def _before_read(self, what: str) -> None:
        self.pump()
        if self.faults.read_error and self.rng.random() < self.faults.read_error:
            self._count("readError")
            raise errors.InternalError(f"injected fault: server error on {what}")

    def _write(self, what: str, call: Callable[[], Any]) -> Any:
        self._before_write(what)
        out = call()
        self._after_write(what)
        return out

    # ------------------------------------------------------------------------- the contract

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        self._before_read(f"get {kind}/{name}")
        return self.inner.get(kind, name, namespace)

    def list(self, kind: str, namespace: str = "", label_selector: interface.LabelSelectorArg = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        self._before_read(f"list {kind}")
        return self.inner.list(kind, namespace, label_selector, field_selector)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = self._write(f"create {obj.get('kind')}", lambda: self.inner.create(obj))
        return out

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = self._write(f"update {obj.get('kind')}", lambda: self.inner.update(obj))
        return out

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = self._write(f"update status of {obj.get('kind')}", lambda: self.inner.update_status(obj))
        return out

    def patch(self, kind: str, name: str, patch: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        out: dict[str, Any] = self._write(f"patch {kind}/{name}",
                                          lambda: self.inner.patch(kind, name, patch, namespace))
        return out

    def patch_status(self, kind: str, name: str, patch: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        out: dict[str, Any] = self._write(f"patch status of {kind}/{name}",
                                          lambda: self.inner.patch_status(kind, name, patch, namespace))
        return out

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        self._write(f"delete {kind}/{name}", lambda: self.inner.delete(kind, name, namespace))

    def evict(self, name: str, namespace: str) -> None:
        self._write(f"evict {namespace}/{name}", lambda: self.inner.evict(name, namespace))

    def bind(self, name: str, namespace: str, node_name: str) -> dict[str, Any]:
        out: dict[str, Any] = self._write(f"bind {namespace}/{name}",
                                          lambda: self.inner.bind(name, namespace, node_name))
        return out

    def watch(self, kind: str, handler: interface.WatchHandler) -> interface.Unsubscribe:
        w = _Watch(kind, handler)

        def deliver(event: str, obj: dict[str, Any]) -> None:
            if w.closed:
                return
            if w.broken_at is None and self._dropped(kind, event, obj):
                w.broken_at = self.clock.now()  # every watch of the kind shares one informer
                w.queue.clear()  # the re-list will bring what was still on its way
            if w.broken_at is not None:
                return  # the watch is down until it re-lists
            delay = self._delayed(kind, event, obj)
            key = (interface.namespace_of(obj), interface.name_of(obj))
            behind = [due for due, _, o in w.queue
                      if (interface.namespace_of(o), interface.name_of(o)) == key or not self.faults.watch_reorder]
            if delay or behind:
                due = max([self.clock.now() + (self.faults.delay_seconds if delay else 0.0), *behind])
                w.queue.append((due, event, obj))
                return
            self._hand(w, event, obj)

        for obj in self.inner.list(kind):
            w.seen[(interface.namespace_of(obj), interface.name_of(obj))] = (_rv(obj), obj)
        w.unsubscribe = self.inner.watch(kind, deliver)
        self._watches.append(w)

        def stop() -> None:
            w.closed = True
            if w.unsubscribe is not None:
                w.unsubscribe()

        return stop

    @staticmethod
    def _hand(w: _Watch, event: str, obj: dict[str, Any]) -> None:
        key = (interface.namespace_of(obj), interface.name_of(obj))
        if event == interface.DELETED:
            w.seen.pop(key, None)
        else:
            w.seen[key] = (_rv(obj), obj)
        w.handler(event, obj)

    def _delayed(self, kind: str, event: str, obj: dict[str, Any]) -> bool:
        """Whether this event arrives late; decided once per event and kind, like :meth:`_dropped`."""
        key = (event, interface.namespace_of(obj), interface.name_of(obj), _rv(obj))
        last = self._last_delay.get(kind)
        if last is not None and last[0] == key:
            return last[1]
        delayed = bool(self.faults.watch_delay) and self.rng.random() < self.faults.watch_delay
        if delayed:
            self._count("watchDelay")
        self._last_delay[kind] = (key, delayed)
        return delayed

    def _dropped(self, kind: str, event: str, obj: dict[str, Any]) -> bool:
        """Whether this event is lost; decided once per event and kind, so that every watch of a kind
        (one informer in a real controller process) loses the same events."""
        key = (event, interface.namespace_of(obj), interface.name_of(obj), _rv(obj))
        last = self._last_event.get(kind)
        if last is not None and last[0] == key:
            return last[1]
        dropped = bool(self.faults.watch_drop) and self.rng.random() < self.faults.watch_drop
        if dropped:
            self._count("watchDrop")
        self._last_event[kind] = (key, dropped)
        return dropped

    # -------------------------------------------------------------------------- re-list, close

    def next_relist(self) -> float | None:
        """When the earliest broken watch re-lists (for a driver that sleeps until then)."""
        times = [w.broken_at + self.faults.relist_after for w in self._watches
                 if w.broken_at is not None and not w.closed]
        times.extend(min(due for due, _, _ in w.queue) for w in self._watches
                     if w.queue and not w.closed and w.broken_at is None)
        return min(times) if times else None

    def pump(self) -> int:
        """Re-list every broken watch whose time has come; returns how many events it delivered."""
        delivered = 0
        now = self.clock.now()
        for w in self._watches:
            while w.queue and not w.closed and w.broken_at is None:
                ready = [i for i, (due, _, _) in enumerate(w.queue) if due <= now]
                if not ready:
                    break
                _, event, obj = w.queue.pop(ready[0])
                self._hand(w, event, obj)
                delivered += 1
            if w.closed or w.broken_at is None or now < w.broken_at + self.faults.relist_after:
                continue
            w.broken_at = None
            w.queue.clear()  # the re-list below supersedes what was still on its way
            current = {(interface.namespace_of(o), interface.name_of(o)): o for o in self.inner.list(w.kind)}
            gone = [k for k in w.seen if k not in current]
            for key, obj in sorted(current.items()):
                before = w.seen.get(key)
                if before is not None and before[0] == _rv(obj):
                    continue
                w.seen[key] = (_rv(obj), obj)
                w.handler(interface.ADDED if before is None else interface.MODIFIED, obj)
                delivered += 1
            for key in gone:
                _, last = w.seen.pop(key)
                w.handler(interface.DELETED, last)
                delivered += 1
        return delivered

    def close(self) -> None:
        """Stop every watch opened through this wrapper."""
        for w in self._watches:
            w.closed = True
            if w.unsubscribe is not None:
                w.unsubscribe()
        self._watches.clear()
