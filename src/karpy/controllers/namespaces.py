"""The cluster's Namespaces and their labels, fed by a watch, for the scheduling runs.

A pod (anti-)affinity term with a ``namespaceSelector`` counts the pods of the namespaces whose
labels the selector matches (:mod:`karpy.scheduling.namespaces`). :class:`NamespaceWatch` keeps
the labels of every Namespace object and hands out one immutable
:class:`~karpy.scheduling.namespaces.NamespaceIndex` until a Namespace changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.kube import interface
from karpy.scheduling import namespaces as ns_mod

KIND = "Namespace"


class NamespaceWatch:
    """Namespace name -> labels, kept from a watch (see the module docstring)."""

    def __init__(self, cluster: interface.Cluster) -> None:
        self.cluster = cluster
        self._labels: dict[str, Mapping[str, str]] = {}
        self._index: ns_mod.NamespaceIndex | None = None
        self._unsubscribe: interface.Unsubscribe | None = None

    def start(self) -> NamespaceWatch:
        """Watch Namespaces and load those that exist; idempotent."""
        if self._unsubscribe is None:
            self._unsubscribe = self.cluster.watch(KIND, self.observe)
            for obj in self.cluster.list(KIND):
                self.observe(interface.ADDED, obj)
        return self

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def observe(self, event: str, obj: Mapping[str, Any]) -> None:
        md = obj.get("metadata") or {}
        name = str(md.get("name") or "")
        if not name:
            return
        if event == interface.DELETED:
            changed = self._labels.pop(name, None) is not None
        else:
            raw = md.get("labels")
            labels = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
            changed = self._labels.get(name) != labels
            self._labels[name] = labels
        if changed:
            self._index = None

    def index(self) -> ns_mod.NamespaceIndex:
        """The Namespaces as they are now (the same object until one changes)."""
        if self._index is None:
            self._index = ns_mod.NamespaceIndex.of(self._labels.items())
        return self._index
