"""Bounded caches of successful parses by text, one rule for all: :func:`remember`.

A cluster repeats few distinct texts in the fields karpy reads most (quantities such as ``"4"`` and
``"16Gi"``, timestamps shared by objects written in the same second, a NodePool's ``expireAfter``), so
their parses are remembered by the text in a module-level ``dict[str, V]``. Every such cache follows:

* only a parse that succeeded is remembered (:func:`remember` after the parse): a text that does not
  parse raises every time, with its own message;
* the cache is bounded: a full cache is emptied before the next entry, which only costs parsing again;
* the cache stays a plain ``dict``, so a lookup (``cache.get(text)``, ``text in cache``) on the hot
  paths costs what a dict lookup costs (a ``dict`` subclass costs 10-30 ns more per lookup).
"""

from __future__ import annotations

from typing import TypeVar

V = TypeVar("V")


def remember(cache: dict[str, V], size: int, text: str, value: V) -> V:
    """Remember the parse ``value`` of ``text`` in ``cache`` of at most ``size`` entries (emptying a full
    cache first); returns ``value``."""
    if size < 1:
        raise ValueError(f"parse_cache.remember: size must be a positive number of entries, found {size}")
    if len(cache) >= size:
        cache.clear()
    cache[text] = value
    return value
