"""Watch delivery for the in-memory cluster: synchronous, ordered, non-recursive notifications.

:class:`Watches` keeps the handlers registered through
:meth:`karpy.kube.memory.InMemoryCluster.watch` and the queue of notifications the store's
writes produce. The store queues a notification (:meth:`Watches.notify`) when it commits or
removes an object and calls :meth:`Watches.drain` once the outer write has finished.

A caller may rely on:

* Notifications are delivered in the order they were queued (write order), each to the handlers
  watching its kind and then to those watching ``"*"``, in the order they subscribed.
* A handler that writes back does not recurse: :meth:`Watches.drain` called while draining only
  returns, and the handler's writes are delivered after the current ones by the outer drain.
* An exception from a handler does not stop delivery: the rest of the queue is delivered, then the
  first exception is re-raised.
* A :class:`karpy.kube.interface.Filtered` handler is not called for the events its filter does
  not want; what a MODIFIED write changed is worked out once per notification, only when such a
  handler watches.
* A handler unsubscribed while the queue drains gets no further notification, even one already
  queued.

Everything runs under the lock the owner passes in (the store's); no thread is started.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

from karpy.kube import interface

Notification = tuple[str, str, dict[str, Any], dict[str, Any] | None]
"""(kind, event type, object, the version it replaced)."""


class _Watcher:
    __slots__ = ("active", "handler", "only")

    def __init__(self, handler: interface.WatchHandler) -> None:
        self.only: interface.WatchFilter | None = None
        if isinstance(handler, interface.Filtered):  # call the function itself, skip what it ignores
            self.only = handler.watch_filter
            handler = handler.fn
        self.handler = handler
        self.active = True


class Watches:
    """The watchers of one store and its queue of notifications to deliver; see the module docstring."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._watchers: dict[str, list[_Watcher]] = {}
        self._fanout: dict[str, tuple[_Watcher, ...]] = {}
        """kind -> its watchers then the ``"*"`` ones, built on first use after a (un)subscription."""
        self._pending: collections.deque[Notification] = collections.deque()
        """Notifications to deliver, oldest first."""
        self._draining = False

    def watch(self, kind: str, handler: interface.WatchHandler) -> interface.Unsubscribe:
        """Call ``handler(event_type, obj)`` for every ``kind`` notification (``"*"``: every kind)."""
        watcher = _Watcher(handler)
        with self._lock:
            self._watchers.setdefault(kind, []).append(watcher)
            self._fanout.clear()

        def unsubscribe() -> None:
            with self._lock:
                watcher.active = False
                watchers = self._watchers.get(kind, [])
                if watcher in watchers:
                    watchers.remove(watcher)
                self._fanout.clear()

        return unsubscribe

    def notify(self, kind: str, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """Queue one notification: ``obj`` (stored, read-only) replaced ``old`` (None: none or not known)."""
        self._pending.append((kind, event_type, obj, old))

    def drain(self) -> None:
        """Deliver queued notifications in order; re-entrant writes only append to the queue."""
        if self._draining:
            return
        self._draining = True
        failure: BaseException | None = None
        try:
            pending = self._pending
            fanout = self._fanout
            while pending:
                kind, event_type, obj, old = pending.popleft()
                watchers = fanout.get(kind)
                if watchers is None:
                    watchers = fanout[kind] = (*self._watchers.get(kind, ()), *self._watchers.get("*", ()))
                changed: frozenset[str] | None = None
                before = old if event_type == interface.MODIFIED else None
                for watcher in watchers:
                    if not watcher.active:
                        continue
                    only = watcher.only
                    if only is not None:
                        if changed is None and before is not None:
                            changed = interface.changed_parts(before, obj)
                        if not only.wants(event_type, changed):
                            continue
                    try:
                        watcher.handler(event_type, obj)
                    except Exception as exc:  # deliver the rest, then report the first failure
                        if failure is None:
                            failure = exc
        finally:
            self._draining = False
        if failure is not None:
            raise failure
