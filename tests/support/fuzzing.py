"""What the fuzz tests share: every place in a parsed document, and a document damaged at a few of them.

The fuzz tests (manifests, scenarios, Cluster Autoscaler node groups, SQS messages) start from valid documents
and break them where a user's typo or a hostile sender would: a value replaced by a hostile one, a key renamed,
a field dropped. :func:`paths` lists the places, :func:`parent_of` finds the container of one, :func:`mutate`
draws the damage with Hypothesis (the same draws for the same seed, so a failure replays).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

RENAMED_KEYS = st.one_of(st.text(max_size=6), st.integers(), st.booleans())
"""What a renamed key becomes: any text, or a key YAML reads as a number or a boolean."""


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` (mapping keys and list indexes from the top), ``()`` (the whole) first."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(paths(v, (*prefix, i)))
    return out


def parent_of(doc: Any, path: tuple[Any, ...]) -> Any:
    """The mapping or list holding the place ``path`` (its last key indexes it)."""
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    return parent


def mutate(draw: st.DrawFn, doc: Any, values: st.SearchStrategy[Any], ops: Sequence[str]) -> Any:
    """``doc`` (changed in place) after one to three of ``ops`` at drawn places: ``replace`` (by one of
    ``values``), ``rename`` (a mapping key, by one of :data:`RENAMED_KEYS`) or ``drop``; a document with no
    place left is replaced whole by one of ``values``."""
    for _ in range(draw(st.integers(1, 3))):
        places = [p for p in paths(doc) if p]
        if not places:
            return draw(values)
        path = draw(st.sampled_from(places))
        parent = parent_of(doc, path)
        op = draw(st.sampled_from(ops))
        if op == "replace":
            parent[path[-1]] = draw(values)
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(RENAMED_KEYS)] = parent.pop(path[-1])
        elif op == "drop":
            del parent[path[-1]]
    return doc
