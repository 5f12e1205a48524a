"""The fast path of reading YAML: libyaml's parser events built straight into dicts and lists.

PyYAML's loader composes a node graph of a whole document (a Python object with two marks for every
scalar, mapping and list) before it constructs the data, and resolves every plain scalar's tag with
regular expressions: on a 50 MB ``kubectl get -A -o yaml`` dump (one ``kind: List`` document) that
is minutes and gigabytes. :func:`read` builds the same data from the parser's events instead, looks
each plain scalar up in a table of those already seen (a dump repeats its times, ``"True"``, field
names and label values thousands of times, and equal strings are then stored once), and hands each
object of a ``kind: List`` to the caller's ``prune`` as soon as it is complete, before the next one
is read, so what the caller drops never accumulates.

It takes the YAML kubectl, Helm and people write: plain, quoted and block scalars, mappings and
lists (block or flow), several documents, the standard tags of those (``!!str``, ``!!int``...).
Anything else - an anchor or alias, any other tag (``!!binary``, ``!!set``, a local tag), a merge
key, a key given twice or that is not a scalar, nesting deeper than :data:`MAX_DEPTH`, a scalar its
constructor refuses (an integer too large), text that does not parse - makes :func:`read` return
``None``, and the caller reads the text with its full loader, which gives the data, warnings and
errors of those cases. A caller may rely on: when :func:`read` returns documents, they are equal,
with the same types and key order, to what the full loader (the same ``loader`` class: its resolver
and scalar constructors are the ones used here) would build, less what ``prune`` dropped; nothing
but ``MemoryError`` is raised.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from karpy.api import strict

MAX_DEPTH = 66
"""Deeper nesting goes to the full loader (the strict checks refuse more than 64 levels anyway, and
the full loader's own limit is Python's recursion limit)."""
TABLE_LIMIT = 500_000
"""Entries of a scalar table before it starts afresh (which only loses sharing)."""

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_CONSTRUCTED = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool",
                          "tag:yaml.org,2002:null", "tag:yaml.org,2002:timestamp"})
_NO_KEY: Any = object()
_MISSING: Any = object()

Prune = Callable[[dict[str, Any]], None]
"""Changes one object of a ``kind: List`` in place (drops what its reader never uses)."""


@dataclass(slots=True)
class Document:
    data: Any
    items_pruned: bool
    """``data`` is a ``kind: List`` whose items ``prune`` has already seen."""
    plain_json: bool
    """:func:`karpy.api.strict.check_structure` finds nothing in ``data`` (or, for a ``kind: List``, in
    each of its items): every key is a string, every number finite, nesting under
    :data:`karpy.api.strict.MAX_DEPTH` levels and at most :data:`karpy.api.strict.MAX_NODES` values."""
    dollar_brace: bool
    """Some string of the text holds ``${`` (without it, no value looks like a shell variable)."""


class _Fallback(Exception):
    """What the full loader must read."""


def read(loader: Any, prune: Prune | None = None) -> list[Document] | None:
    """The documents of the text ``loader`` (a PyYAML ``CParser`` based loader, not used yet) was made
    with, or ``None`` when the full loader must read it (module docstring). Disposes of ``loader``."""
    try:
        return _Reader(loader, prune).documents()
    except MemoryError:
        raise
    except Exception:  # anything unusual is the full loader's to read and report
        return None
    finally:
        loader.dispose()


class _Reader:
    def __init__(self, loader: Any, prune: Prune | None) -> None:
        self.loader = loader
        self.get = loader.get_event
        self.prune = prune
        self.plain: dict[str, Any] = {}
        """Plain scalar text -> its value (resolved and constructed once)."""
        self.strings: dict[str, str] = {}
        """Quoted and block scalars, each text stored once."""
        self.odd = False
        """A key that is not a string, or a number that is not finite, was read."""
        self.dollar_brace = False

    def documents(self) -> list[Document]:
        get = self.get
        if type(get()) is not yaml.StreamStartEvent:
            raise _Fallback
        docs: list[tuple[Any, bool, bool]] = []
        while True:
            ev = get()
            if type(ev) is yaml.StreamEndEvent:
                break
            if type(ev) is not yaml.DocumentStartEvent:
                raise _Fallback
            data, pruned, small = self._document()
            if type(get()) is not yaml.DocumentEndEvent:
                raise _Fallback
            if pruned and not _is_list(data):
                raise _Fallback  # items of something else than a List were pruned: read it whole
            docs.append((data, pruned, small))
        return [Document(data, pruned, small and not self.odd, self.dollar_brace) for data, pruned, small in docs]

    def _document(self) -> tuple[Any, bool, bool]:
        """The document's data, whether ``prune`` saw its items, and whether its nesting and its
        number of values (each item's, for a List) are within :func:`karpy.api.strict.check_structure`'s
        bounds."""
        get, prune = self.get, self.prune
        plain, strings = self.plain, self.strings
        stack: list[tuple[Any, Any, int]] = []  # (container, its pending key, values read before it)
        cur: Any = None  # the mapping or list being built; None at the root
        key: Any = _NO_KEY  # the key waiting for its value when ``cur`` is a mapping
        values = 0  # values read (keys too: an upper bound of what check_structure counts)
        deepest = 0
        biggest_item = 0
        pruned = False
        scalar_event, mapping_start, mapping_end = yaml.ScalarEvent, yaml.MappingStartEvent, yaml.MappingEndEvent
        sequence_start, sequence_end = yaml.SequenceStartEvent, yaml.SequenceEndEvent
        while True:
            ev = get()
            t = type(ev)
            values += 1
            if t is scalar_event:
                if ev.anchor is not None:
                    raise _Fallback
                text = ev.value
                if ev.tag is not None:
                    v = self._tagged(ev.tag, text)
                elif ev.implicit[0]:
                    v = plain.get(text, _MISSING)
                    if v is _MISSING:
                        v = self._plain(text, ev.implicit)
                else:
                    v = strings.get(text)
                    if v is None:
                        if len(strings) >= TABLE_LIMIT:
                            strings.clear()
                        strings[text] = v = text
                        if "${" in text:
                            self.dollar_brace = True
                first = values
            elif t is mapping_start or t is sequence_start:
                if ev.anchor is not None or (type(cur) is dict and key is _NO_KEY) \
                        or ev.tag not in (None, _MAP if t is mapping_start else _SEQ):
                    raise _Fallback  # an anchor, a mapping or list as a key, or a tag of its own
                stack.append((cur, key, values))
                if len(stack) > deepest:
                    deepest = len(stack)
                    if deepest > MAX_DEPTH:
                        raise _Fallback
                cur, key = ({} if t is mapping_start else []), _NO_KEY
                continue
            elif t is mapping_end or t is sequence_end:
                values -= 1  # an end is no value
                v = cur
                cur, key, first = stack.pop()
            else:  # an alias, or an event out of place
                raise _Fallback
            if cur is None:
                return v, pruned, deepest <= strict.MAX_DEPTH and (
                    biggest_item if pruned or _is_list(v) else values) <= strict.MAX_NODES
            if type(cur) is list:
                if len(stack) == 2 and stack[1][1] == "items" and stack[0][0] is None:
                    # an object of the root's items (of a kind: List, checked at the end)
                    biggest_item = max(biggest_item, values - first + 1)
                    if prune is not None and t is mapping_end:
                        prune(v)
                        pruned = True
                cur.append(v)
            elif key is _NO_KEY:
                if type(v) is not str:
                    self.odd = True
                key = v
            else:
                if key in cur:
                    raise _Fallback  # given twice: the full loader warns about it
                cur[key] = v
                key = _NO_KEY

    def _plain(self, text: str, implicit: tuple[bool, bool]) -> Any:
        loader = self.loader
        tag = loader.resolve(yaml.ScalarNode, text, implicit)
        if tag == _STR:
            v: Any = text
            if "${" in text:
                self.dollar_brace = True
        elif tag in _CONSTRUCTED:
            v = loader.yaml_constructors[tag](loader, yaml.ScalarNode(tag, text))
            if type(v) is float and not math.isfinite(v):
                self.odd = True
        else:
            raise _Fallback  # merge key, "=" value key, or anything else the constructor handles its way
        if len(self.plain) >= TABLE_LIMIT:
            self.plain.clear()
        self.plain[text] = v
        return v


    def _tagged(self, tag: str, text: str) -> Any:
        """A scalar with an explicit standard tag (``!!str 1``, ``!!int "3"``)."""
        if tag == _STR:
            v: Any = text
            if "${" in text:
                self.dollar_brace = True
            return v
        if tag not in _CONSTRUCTED:
            raise _Fallback  # "!", "!!binary", a local tag...: the full loader's
        v = self.loader.yaml_constructors[tag](self.loader, yaml.ScalarNode(tag, text))
        if type(v) is float and not math.isfinite(v):
            self.odd = True
        return v


def _is_list(data: Any) -> bool:
    """What :func:`karpy.api.manifest.load_documents` expands into its items."""
    return type(data) is dict and data.get("kind") == "List" and type(data.get("items")) is list
