"""An index of one kind's objects by their controlling owner, fed by a watch.

The simulated Deployment controller keeps its ReplicaSets here, so a reconcile reads only the
Deployment's own ReplicaSets instead of listing every ReplicaSet of the namespace (the cost of a
reconcile no longer grows with the number of Deployments). Objects are kept in the order they were
first indexed (the store's creation order), each as its latest version seen. Pure: nothing here
reads or writes the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from karpy.kube import interface

Key = tuple[str, str]
"""(namespace, owner name)."""


class OwnerIndex:
    """Objects by the ``(namespace, name)`` of their controlling owner of ``owner_kind``.

    ``controller_ref`` is the caller's own reading of the controller owner reference (so both agree).
    """

    def __init__(self, owner_kind: str,
                 controller_ref: Callable[[Mapping[str, Any]], Mapping[str, Any] | None]) -> None:
        self._kind = owner_kind
        self._controller_ref = controller_ref
        self._owned: dict[Key, dict[str, dict[str, Any]]] = {}
        self._owner_of: dict[Key, Key] = {}
        """(namespace, object name) -> its owner's key."""

    def index(self, event: str, obj: dict[str, Any]) -> None:
        """Follow one watch event (also called with what the owner's controller itself just wrote)."""
        md = obj.get("metadata") or {}
        ns, name = md.get("namespace") or "", str(md.get("name"))
        ref = self._controller_ref(obj)
        after = (ns, str(ref.get("name"))) if ref is not None and ref.get("kind") == self._kind else None
        if event == interface.DELETED:
            after = None
        before = self._owner_of.get((ns, name))
        if before is not None and before != after:
            del self._owner_of[(ns, name)]
            objs = self._owned.get(before)
            if objs is not None:
                objs.pop(name, None)
                if not objs:
                    del self._owned[before]
        if after is not None:
            self._owned.setdefault(after, {})[name] = obj
            self._owner_of[(ns, name)] = after

    def owned(self, namespace: str, owner: str) -> list[dict[str, Any]]:
        """The objects whose controlling owner is ``namespace/owner`` (by name: the caller checks the uid)."""
        return list(self._owned.get((namespace, owner), {}).values())

    def __len__(self) -> int:
        return len(self._owner_of)
