"""Parts of stored objects parsed once per identity: what many NodeClaims and Nodes share.

The in-memory cluster (:mod:`karpy.kube.memory_share`) stores equal parts once: the NodeClaims of
one NodePool and instance-type set hold the very same ``spec.requirements`` list, the Nodes and
NodeClaims of one instance type the very same ``capacity`` / ``allocatable`` mappings, and a write
that leaves a condition alone keeps its dict. Stored objects are never changed in place, so a part
parsed once may be handed out again for the same object: :class:`ByIdentity` remembers the parse
of a part by its identity (keeping the part alive, so the identity stays its own).

A caller may rely on: every function here returns exactly what the plain parser it names returns
for the same input (errors included: a part that does not parse is never remembered), provided
the caller's input is a stored object that nobody changes in place; the values handed out are
frozen models or mappings that must be treated as read-only. Caches are bounded; a full cache is
emptied, which only costs parsing again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from karpy.api import fields, quantity

T = TypeVar("T")

CACHE_SIZE = 8192
"""Entries each :class:`ByIdentity` keeps before it starts afresh."""


class ByIdentity(Generic[T]):
    """Parses remembered by the identity of the part parsed (see the module docstring)."""

    __slots__ = ("_entries", "size")

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._entries: dict[int, tuple[Any, T]] = {}

    def get(self, part: Any, parse: Callable[[], T]) -> T:
        """The parse of ``part``: remembered, or ``parse()`` (then remembered)."""
        hit = self._entries.get(id(part))
        if hit is not None and hit[0] is part:
            return hit[1]
        value = parse()
        if len(self._entries) >= self.size:
            self._entries.clear()
        self._entries[id(part)] = (part, value)
        return value

    def clear(self) -> None:
        """Forget every parse (only loses reuse)."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


_RESOURCE_LISTS: ByIdentity[quantity.ResourceList] = ByIdentity()
_BY_PARSER: dict[Callable[[fields.Fields], Any], tuple[ByIdentity[Any], ByIdentity[Any]]] = {}
"""Per item parser: (its tuples by list, its items by dict)."""


def resource_list(f: fields.Fields, key: str) -> quantity.ResourceList:
    """:func:`karpy.api.quantity.read_list` of stored ``f``, shared by every holder of the mapping."""
    raw = f.data.get(key)
    if type(raw) is not dict or not raw:
        return quantity.read_list(f, key)
    return _RESOURCE_LISTS.get(raw, lambda: quantity.read_list(f, key))


def items(f: fields.Fields, key: str, parse: Callable[[fields.Fields], T]) -> tuple[T, ...]:
    """``tuple(parse(item) for item in f.items(key))`` of stored ``f``: a list seen before gives its
    tuple again, and an item dict seen before (in any list) its parse. ``parse`` must depend on
    the item alone."""
    raw = f.data.get(key)
    if type(raw) is not list or not raw:
        return tuple(parse(i) for i in f.items(key))
    caches = _BY_PARSER.get(parse)
    if caches is None:
        caches = _BY_PARSER[parse] = (ByIdentity(), ByIdentity(4 * CACHE_SIZE))
    lists, parts = caches

    def parse_list() -> tuple[T, ...]:
        out: list[T] = []
        for item in f.items(key):
            part = item.data
            if type(part) is dict:
                out.append(parts.get(part, lambda: parse(item)))  # noqa: B023 - called at once
            else:
                out.append(parse(item))
        return tuple(out)

    result: tuple[T, ...] = lists.get(raw, parse_list)
    return result
