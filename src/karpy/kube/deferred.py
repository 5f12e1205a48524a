"""A Cluster whose watch handlers run only on the thread that pumps, like the Kubernetes adapter's.

:class:`DeferredWatches` wraps any :class:`karpy.kube.interface.Cluster` (in practice the in-memory
cluster) and changes one thing: a watch handler is not called at write time on the writing thread; the
event waits in a thread-safe queue until :meth:`DeferredWatches.pump` delivers it, in commit order,
on the caller's thread. Everything else (reads, writes, errors) is the wrapped cluster's, so writes
may come from any thread the wrapped cluster accepts them from (the in-memory cluster locks).

This gives the in-memory cluster the threading the real-time driver gets from the adapter, so the
driver, the cloud-call pool and a provider that writes (KWOK) are tested together without an API
server, and ``karpy controller --in-memory-cluster`` is safe with its thread pool.
"""

from __future__ import annotations

import queue
from typing import Any

from karpy.kube import interface


class DeferredWatches:
    """See the module docstring."""

    def __init__(self, inner: interface.Cluster) -> None:
        self.inner = inner
        self._events: queue.SimpleQueue[tuple[interface.WatchHandler, str, dict[str, Any]]] = queue.SimpleQueue()
        self.delivered = 0

    def watch(self, kind: str, handler: interface.WatchHandler) -> interface.Unsubscribe:
        def defer(event: str, obj: dict[str, Any]) -> None:
            self._events.put((handler, event, obj))

        return self.inner.watch(kind, defer)

    def pump(self, timeout: float = 0.0) -> int:
        """Deliver every queued event on this thread; wait up to ``timeout`` for the first one."""
        delivered = 0
        try:
            item = self._events.get(timeout=timeout) if timeout > 0 else self._events.get_nowait()
        except queue.Empty:
            return 0
        while True:
            handler, event, obj = item
            handler(event, obj)
            delivered += 1
            try:
                item = self._events.get_nowait()
            except queue.Empty:
                break
        self.delivered += delivered
        return delivered

    def has_synced(self) -> bool:
        return True

    # Everything else is the wrapped cluster's.

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        return self.inner.get(kind, name, namespace)

    def list(self, kind: str, namespace: str = "", label_selector: interface.LabelSelectorArg = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        return self.inner.list(kind, namespace, label_selector, field_selector)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.inner.create(obj)

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.inner.update(obj)

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.inner.update_status(obj)

    def patch(self, kind: str, name: str, patch: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        return self.inner.patch(kind, name, patch, namespace)

    def patch_status(self, kind: str, name: str, patch: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        return self.inner.patch_status(kind, name, patch, namespace)

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        self.inner.delete(kind, name, namespace)

    def evict(self, name: str, namespace: str) -> None:
        self.inner.evict(name, namespace)

    def bind(self, name: str, namespace: str, node_name: str) -> dict[str, Any]:
        return self.inner.bind(name, namespace, node_name)
