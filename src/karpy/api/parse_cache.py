"""A bounded cache of successful parses by text: :class:`ParseCache`.

A cluster repeats few distinct texts in the fields karpy reads most (quantities such as ``"4"`` and
``"16Gi"``, timestamps shared by objects written in the same second, a NodePool's ``expireAfter``), so
their parses are remembered by the text. The rules every such cache follows:

* only a parse that succeeded is remembered (:meth:`ParseCache.remember` after the parse): a text
  that does not parse raises every time, with its own message;
* the cache is bounded: a full cache is emptied before the next entry, which only costs parsing
  again;
* a lookup is a plain ``dict`` lookup (``cache.get(text)``, ``text in cache``): the hot paths pay
  nothing for the helper.
"""

from __future__ import annotations

from typing import TypeVar

V = TypeVar("V")


class ParseCache(dict[str, V]):
    """Parses remembered by their text, at most ``size`` of them (see the module docstring)."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        super().__init__()
        if size < 1:
            raise ValueError(f"ParseCache: size must be a positive number of entries, found {size}")
        self.size = size

    def remember(self, text: str, value: V) -> V:
        """Remember the parse ``value`` of ``text`` (emptying a full cache first); returns ``value``."""
        if len(self) >= self.size:
            self.clear()
        self[text] = value
        return value
