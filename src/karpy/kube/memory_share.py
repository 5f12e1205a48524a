"""How the in-memory cluster keeps many similar objects small: equal parts are stored once.

A 100,000-pod simulation stores 100,000 Pods whose labels, owner references, conditions and
container statuses repeat (replicas of one template, pods started in the same second on one
node), Nodes and NodeClaims whose capacity, conditions and requirement lists repeat per instance
type, and Events whose sources, messages and involved objects repeat. :class:`Sharing` replaces,
in an object about to be stored, each such part (:data:`PARTS`) by an *equal* part it has already
stored, and interns short repeated strings. It is safe because the store never changes a stored
object in place and callers must not either (:class:`karpy.kube.memory.InMemoryCluster`'s
contract; its ``check_shared`` mode catches offenders).

A caller may rely on: :meth:`Sharing.compact` changes only which equal objects an object holds:
the object compares and serialises exactly as before (same keys in the same order, same types:
``1``, ``1.0`` and ``True`` are never taken for one another). Parts a write did not change (the
very objects of the version it replaces) are not looked at again. The table of known parts is
bounded (:attr:`Sharing.limit`); when full it starts afresh, which only loses sharing.
"""

from __future__ import annotations

import operator
import sys
from typing import Any

PARTS: dict[str, dict[str, tuple[str, ...]]] = {
    "Pod": {"metadata": ("labels", "annotations", "ownerReferences", "finalizers"),
            "status": ("conditions", "containerStatuses", "initContainerStatuses", "hostIPs", "podIPs")},
    "Node": {"metadata": ("annotations", "finalizers"), "spec": ("taints",),
             "status": ("capacity", "allocatable", "conditions", "nodeInfo", "daemonEndpoints", "images")},
    "NodeClaim": {"metadata": ("labels", "annotations", "finalizers", "ownerReferences"),
                  "spec": ("requirements", "taints", "startupTaints", "nodeClassRef", "resources"),
                  "status": ("capacity", "allocatable", "conditions")},
    "Event": {"": ("source",)},
}
"""Per kind, per section (``""``: top level), the fields whose values are shared when equal."""

STRINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "Pod": {"metadata": ("namespace", "generateName", "creationTimestamp"),
            "status": ("phase", "startTime", "hostIP", "podIP", "qosClass")},
    "Node": {"metadata": ("creationTimestamp",)},
    "NodeClaim": {"metadata": ("generateName", "creationTimestamp"), "status": ("nodeName", "imageID")},
    "Event": {"": ("reason", "message", "type", "firstTimestamp", "lastTimestamp", "reportingComponent",
                   "reportingInstance", "action", "eventTime"),
              "metadata": ("namespace", "creationTimestamp")},
}
"""Per kind, per section, the string fields that are interned (one string object per distinct text)."""

_SCALAR_TAGS = {int: "i", float: "f", bool: "b", type(None): "n"}


def _fingerprint(value: Any) -> Any:
    """A hashable image of JSON-like ``value`` that tells types apart and keeps key order."""
    kind = type(value)
    if kind is str:
        return value
    if kind is dict:
        return ("d", *[(k, _fingerprint(v)) for k, v in value.items()])
    if kind is list:
        return ("l", *map(_fingerprint, value))
    tag = _SCALAR_TAGS.get(kind)
    return (tag, value) if tag is not None else ("?", id(value))


def _same_types(a: Any, b: Any) -> bool:
    """Equal (``a == b``) JSON-like values are also equal type for type (``1`` is not ``True``)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        for x, y in zip(a.values(), b.values(), strict=True):
            if x is not y and (type(x) is not str or type(y) is not str) and not _same_types(x, y):
                return False
    elif kind is list:
        for x, y in zip(a, b, strict=True):
            if x is not y and not _same_types(x, y):
                return False
    return True


class Sharing:
    """Equal parts of stored objects stored once (module docstring)."""

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        """How many distinct parts are remembered before the table starts afresh."""
        self._table: dict[int, Any] = {}
        """Hash -> a stored part: lists (keyed by their items' identities) and mappings holding
        anything but plain strings (keyed by their content)."""
        self._texts: dict[int, dict[str, str]] = {}
        """Hash of the items -> a stored mapping of plain strings to plain strings (labels, most
        conditions): an equal mapping has the same types, no :func:`_same_types` walk needed."""
        self.shared = 0
        """How many parts were replaced by an equal one already stored (for tests and benchmarks)."""

    def share(self, value: Any) -> Any:
        """The stored part equal to ``value`` (``value`` itself when it is the first such part)."""
        kind = type(value)
        if kind is dict:
            try:  # a flat mapping (labels, a condition, an owner reference): its items are the key
                key = hash(tuple(value.items()))
            except TypeError:  # holds mappings or lists
                return self._remember(self._table, hash(_fingerprint(value)), value)
            found = self._texts.get(key)
            if found is not None:
                if found is not value and found == value:  # equal to plain strings: plain strings
                    self.shared += 1
                    return found
                return value
            if all(type(v) is str for v in value.values()) and all(type(k) is str for k in value):
                return self._remember(self._texts, key, value)
            return self._remember(self._table, key, value)
        if kind is list:
            try:  # items already shared (compact shares a list's items first): their identities
                key = hash(("l", *map(id, value)))
            except TypeError:
                return value
            found = self._table.get(key)
            if type(found) is list and len(found) == len(value) and all(map(operator.is_, found, value)):
                if found is not value:
                    self.shared += 1
                return found
            return self._remember(self._table, key, value)
        return value

    def _remember(self, table: dict[int, Any], key: int, value: Any) -> Any:
        """``value``, or the equal part of the same types that ``table`` holds under ``key``."""
        found = table.get(key)
        if found is not None:
            if found is not value and found == value and _same_types(found, value):
                self.shared += 1
                return found
            return value
        if len(self._table) + len(self._texts) >= self.limit:
            self._table.clear()
            self._texts.clear()
        table[key] = value
        return value

    def compact(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        """Share the parts of ``new`` (about to be stored, private to the store) that ``old`` (the
        version it replaces, if any) does not already hold, and intern its strings (:data:`PARTS`,
        :data:`STRINGS`)."""
        plan = _PLAN.get(kind)
        if plan is None:
            return
        share = self.share
        intern = sys.intern
        for section, actions in plan:
            part = new.get(section) if section else new
            if type(part) is not dict:
                continue
            before = (old.get(section) if section else old) if old is not None else None
            if before is part:  # a section the write did not change: done when it was stored
                continue
            unchanged = before if type(before) is dict else _EMPTY
            for name, value in part.items():  # replacing values while iterating is allowed (no new keys)
                action = actions.get(name)
                if action is None or value is None or unchanged.get(name) is value:
                    continue
                if action is _SHARE:
                    if type(value) is list and value and type(value[0]) is dict:  # share items, then the list
                        value = [share(v) for v in value]
                    part[name] = share(value)
                elif type(value) is str:
                    text = intern(value)
                    if text is not value:
                        part[name] = text


_SHARE = "share"
_INTERN = "intern"


def _plan() -> dict[str, tuple[tuple[str, dict[str, str]], ...]]:
    """Per kind, per section: field -> what :meth:`Sharing.compact` does with it."""
    plan: dict[str, dict[str, dict[str, str]]] = {}
    for table, action in ((PARTS, _SHARE), (STRINGS, _INTERN)):
        for kind, sections in table.items():
            for section, names in sections.items():
                plan.setdefault(kind, {}).setdefault(section, {}).update(dict.fromkeys(names, action))
    return {kind: tuple(sections.items()) for kind, sections in plan.items()}


_PLAN = _plan()
_EMPTY: dict[str, Any] = {}
