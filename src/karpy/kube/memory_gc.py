"""Secondary indexes of the in-memory cluster and its ownerReference garbage-collection rule.

:class:`Indexes` keeps, for every stored object version, its uid (-> the object), the owners it points at (owner
uid -> dependent keys) and, for Pods, ``spec.nodeName`` (``""`` for unbound pods).
:class:`karpy.kube.memory.InMemoryCluster` calls :meth:`Indexes.add` / :meth:`Indexes.drop` on
every store change, so lookups by uid, by owner and by node never scan the store.

:func:`collect` is the garbage collector's decision for the dependents of one removed owner, as
Kubernetes' background propagation makes it: a dependent none of whose owners exists any more is
deleted (respecting its finalizers; the cluster cascades further when it is really removed); a
dependent that keeps a live owner only loses its dangling ownerReferences; a dependent that is
already terminating is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from karpy.kube import interface

Key = tuple[str, str, str]
"""``(kind, namespace, name)`` as :func:`karpy.kube.interface.meta_key` returns it."""

DELETE = "delete"
DROP_REFERENCES = "drop-references"


class Indexes:
    """uid -> stored object, owner uid -> dependent keys, node name -> pods."""

    __slots__ = ("dependents", "pods_by_node", "uids")

    def __init__(self) -> None:
        self.uids: dict[str, dict[str, Any]] = {}
        """uid -> the stored object (not its key: one reference, no tuple per object)."""
        self.dependents: dict[str, set[Key]] = {}
        self.pods_by_node: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}

    def add(self, obj: dict[str, Any]) -> None:
        key = interface.meta_key(obj)
        meta = obj["metadata"]
        self.uids[meta["uid"]] = obj
        for ref in meta.get("ownerReferences") or ():
            self.dependents.setdefault(str(ref["uid"]), set()).add(key)
        if key[0] == "Pod":
            node = str((obj.get("spec") or {}).get("nodeName") or "")
            self.pods_by_node.setdefault(node, {})[(key[1], key[2])] = obj

    def drop(self, obj: dict[str, Any]) -> None:
        key = interface.meta_key(obj)
        meta = obj["metadata"]
        self.uids.pop(meta["uid"], None)
        for ref in meta.get("ownerReferences") or ():
            deps = self.dependents.get(str(ref["uid"]))
            if deps is not None:
                deps.discard(key)
                if not deps:
                    del self.dependents[str(ref["uid"])]
        if key[0] == "Pod":
            node = str((obj.get("spec") or {}).get("nodeName") or "")
            pods = self.pods_by_node.get(node)
            if pods is not None:
                pods.pop((key[1], key[2]), None)
                if not pods:
                    del self.pods_by_node[node]

    def replace(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """``new`` is stored in place of ``old`` (same kind, namespace and name)."""
        old_meta, new_meta = old["metadata"], new["metadata"]
        old_refs, new_refs = old_meta.get("ownerReferences"), new_meta.get("ownerReferences")
        if old_meta["uid"] != new_meta["uid"] or (old_refs is not new_refs and old_refs != new_refs):
            self.drop(old)
            self.add(new)
            return
        self.uids[new_meta["uid"]] = new
        if new.get("kind") == "Pod":
            node = str((new.get("spec") or {}).get("nodeName") or "")
            if node != str((old.get("spec") or {}).get("nodeName") or ""):
                self.drop(old)
                self.add(new)
                return
            _, ns, name = interface.meta_key(new)
            self.pods_by_node[node][(ns, name)] = new

    def exists(self, uid: str) -> bool:
        return uid in self.uids

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        """Stored pods whose ``spec.nodeName`` is ``node`` (``""``: unbound pods)."""
        return list(self.pods_by_node.get(node, {}).values())

    def dependents_of(self, uid: str) -> list[Key]:
        return sorted(self.dependents.get(uid, ()))


def collect(
    owner_uid: str, indexes: Indexes, lookup: Callable[[Key], dict[str, Any] | None]
) -> list[tuple[str, dict[str, Any]]]:
    """What to do with the dependents of the removed owner ``owner_uid``, in key order.

    Returns ``(DELETE, dependent)`` or ``(DROP_REFERENCES, dependent-with-live-refs-only)``; the
    second object is a new dict and leaves the stored dependent untouched.
    """
    actions: list[tuple[str, dict[str, Any]]] = []
    for key in indexes.dependents_of(owner_uid):
        dep = lookup(key)
        if dep is None or interface.is_terminating(dep):
            continue
        refs = interface.owner_references(dep)
        alive = [r for r in refs if indexes.exists(str(r.get("uid", "")))]
        if not alive:
            actions.append((DELETE, dep))
        elif len(alive) < len(refs):
            new = dict(dep)
            new["metadata"] = dict(dep["metadata"])
            new["metadata"]["ownerReferences"] = alive
            actions.append((DROP_REFERENCES, new))
    return actions
