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
        self.shared = 0
        """How many parts were replaced by an equal one already stored (for tests and benchmarks)."""

    def share(self, value: Any) -> Any:
        """The stored part equal to ``value`` (``value`` itself when it is the first such part)."""
        kind = type(value)
        if kind is dict:
            try:  # a flat mapping (labels, a condition, an owner reference): its items are the key
                key = hash(tuple(value.items()))
            except TypeError:  # holds mappings or lists
                key = hash(_fingerprint(value))
        elif kind is list:
            try:  # items already shared (compact shares a list's items first): their identities
                key = hash(("l", *map(id, value)))
            except TypeError:
                return value
        else:
            return value
        table = self._table
        found = table.get(key)
        if found is not None:
            if found is not value and found == value and _same_types(found, value):
                self.shared += 1
                return found
            return value
        if len(table) >= self.limit:
            table.clear()
        table[key] = value
        return value

    def compact(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        """Share the parts of ``new`` (about to be stored, private to the store) that ``old`` (the
        version it replaces, if any) does not already hold."""
        parts = PARTS.get(kind)
        if parts is not None:
            for section, names in parts.items():
                part = new if not section else new.get(section)
                if type(part) is not dict:
                    continue
                before = old if not section or old is None else old.get(section)
                for name in names:
                    value = part.get(name)
                    if value is None or (type(before) is dict and before.get(name) is value):
                        continue
                    if type(value) is list and value and type(value[0]) is dict:  # share items, then the list
                        value = [self.share(v) for v in value]
                    part[name] = self.share(value)
        strings = STRINGS.get(kind)
        if strings is not None:
            intern = sys.intern
            for section, names in strings.items():
                part = new if not section else new.get(section)
                if type(part) is not dict or (old is not None and section and old.get(section) is part):
                    continue  # a section the write did not change: already done
                for name in names:
                    value = part.get(name)
                    if type(value) is str:
                        text = intern(value)
                        if text is not value:
                            part[name] = text
