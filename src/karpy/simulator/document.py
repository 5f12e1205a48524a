"""The machine-readable form of a ``karpy simulate`` run, written as JSON or YAML a piece at a time.

:func:`document` is a :class:`karpy.simulator.engine.Result` as plain data::

    {"scenario": {...}, "objects": {"nodes": [...], "nodeclaims": [...], "pods": [...],
     "nodepools": [...]}, "events": [...], "metrics": {...}, "timeline": [...], "notes": [...],
     "reconcileErrors": [...]}

Objects are as the API server would return them, sorted by namespace and name; events are in the
order they were first published, each with ``time``, ``t`` (seconds since the start), ``type``,
``reason``, ``involvedObject``, ``message``, ``count`` and ``source``.

:func:`write_json` and :func:`write_yaml` stream it: the top level, ``objects`` and the long lists
are written item by item, so no text of the whole document is ever built (a run of 100,000 pods
writes hundreds of MB). The bytes are those of ``json.dumps(document, indent=2, ensure_ascii=False)``
plus a newline, and of ``yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=120)``,
with one exception: a float that is not finite (never produced by a run) is written as JSON ``null``
where ``json.dumps`` wrote the non-JSON ``NaN``. JSON items are encoded by orjson where its text is
the standard library's (see :func:`_encode`); YAML by :func:`karpy.simulator.yamltext.fast`'s writer where
it is sure its text is PyYAML's, by PyYAML (libyaml's emitter when it has it) elsewhere; where libyaml's
emitter and ``safe_dump``'s pure-Python one differ (a string with ``U+0085`` or past ``U+FFFF``, a key of
123 to 128 characters; none in the examples) the text is libyaml's.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any

import orjson

from karpy.simulator import engine, timefmt, yamltext

OBJECT_KINDS = ("nodes", "nodeclaims", "pods", "nodepools")
_STREAMED = frozenset({"objects", "events", "timeline", "notes"})
"""Top-level keys whose value is written a piece at a time."""


def sections(result: engine.Result) -> Iterator[tuple[str, Any]]:
    """The document's top-level keys and values, in order, each built only when asked for."""
    yield "scenario", {**result.scenario.summary(), "seed": result.seed,
                       "until": timefmt.duration(result.until), "karpyControllers": list(result.karpy_controllers)}
    objects = {k: result.objects.get(k, []) for k in OBJECT_KINDS}
    if result.objects.get("capacitybuffers"):  # only in runs that have them (gate CapacityBuffer)
        objects["capacitybuffers"] = result.objects["capacitybuffers"]
    yield "objects", objects
    yield "events", result.events
    yield "metrics", result.metrics
    yield "timeline", _Lazy(result.timeline)
    yield "notes", result.notes
    yield "reconcileErrors", result.reconcile_errors


class _Lazy(Sequence[Any]):
    """The timeline's samples as dicts, each made when it is written."""

    def __init__(self, samples: Sequence[engine.Sample]) -> None:
        self._samples = samples

    def __len__(self) -> int:
        return len(self._samples)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [s.to_dict() for s in self._samples[i]]
        return self._samples[i].to_dict()


def document(result: engine.Result) -> dict[str, Any]:
    """The result as plain data (see the module docstring)."""
    return {k: list(v) if isinstance(v, _Lazy) else v for k, v in sections(result)}


# ------------------------------------------------------------------------------------------ JSON

_NOT_LIKE_STDLIB = re.compile(rb"(?:^|: |\n *)-?(?:\d+(?:\.\d+)?e-\d(?:,|\n|$)|0\.0000\d)")
"""Where orjson's float text may differ from ``repr``: a number token (after ``": "``, at the start of
a line or of the text) with a one-digit negative exponent (``2.5e-7`` for ``2.5e-07``) or small in
positional form (``0.00001`` for ``1e-05``). A match inside a string only costs the slower encoder."""
_DIGITS_AS_ZERO = bytes(48 if 48 <= b <= 57 else b if b in b"e-." else 32 for b in range(256))
"""A quick first look (most items have neither ``<digit>e-<digit>`` nor ``0.0000``; ``bytes.translate``
and ``in`` cost a microsecond where a regular expression costs fifty): digits read as ``0``,
everything but ``e``, ``-`` and ``.`` as a space; the precise pattern runs only where this finds one."""


def _encode(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, by orjson when its text is the same."""
    try:
        data = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except TypeError:  # keys that are not strings, integers past 64 bits, lone surrogates...
        return json.dumps(value, indent=2, ensure_ascii=False)
    quick = data.translate(_DIGITS_AS_ZERO)
    if (b"0e-0" in quick or b"0.0000" in quick) and _NOT_LIKE_STDLIB.search(data):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return data.decode()


def _indented(text: str, level: int) -> str:
    return text.replace("\n", "\n" + "  " * level) if level else text


def _json_value(value: Any, level: int, write: Callable[[str], object], stream: bool) -> None:
    """Write ``value`` as it would appear at nesting ``level``; ``stream``: item by item."""
    if stream and isinstance(value, Mapping) and value:
        write("{")
        first = True
        for k, v in value.items():
            write(("\n" if first else ",\n") + "  " * (level + 1) + json.dumps(k, ensure_ascii=False) + ": ")
            _json_value(v, level + 1, write, isinstance(v, (Mapping, Sequence)) and not isinstance(v, str))
            first = False
        write("\n" + "  " * level + "}")
    elif stream and isinstance(value, Sequence) and not isinstance(value, str) and len(value):
        write("[")
        pad = "  " * (level + 1)
        for i in range(len(value)):
            write(("\n" if i == 0 else ",\n") + pad + _indented(_encode(value[i]), level + 1))
        write("\n" + "  " * level + "]")
    else:
        write(_indented(_encode(list(value) if isinstance(value, _Lazy) else value), level))


def write_json(result: engine.Result, file: IO[str]) -> None:
    """The document as ``json.dumps(document, indent=2, ensure_ascii=False) + "\\n"`` would write it."""
    write = file.write
    write("{")
    for i, (key, value) in enumerate(sections(result)):
        write(("\n" if i == 0 else ",\n") + "  " + json.dumps(key) + ": ")
        _json_value(value, 1, write, key in _STREAMED)
    write("\n}\n")


# ------------------------------------------------------------------------------------------ YAML

def _under(key: str, items: list[Any]) -> dict[str, Any]:
    return {key: items}


def _nested(outer: str, key: str, items: list[Any]) -> dict[str, Any]:
    return {outer: {key: items}}


def _yaml_items(head: Callable[[list[Any]], Any], items: Sequence[Any], skip: int) -> Iterator[str]:
    """Each item of a list as it reads inside ``head([item])``, without the ``skip`` lines of keys
    above it: the same columns, so the same text as in the whole document. The fast writer's text
    where it is sure of it (the ``- `` of ``skip`` levels down is at column ``2 * (skip - 1)``),
    PyYAML's otherwise."""
    indent = 2 * (skip - 1)
    for item in items:
        text = yamltext.block_item(item, indent)
        yield text if text is not None else yamltext.pyyaml(head([item])).split("\n", skip)[skip]


def write_yaml(result: engine.Result, file: IO[str]) -> None:
    """The document as ``yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=120)``
    would write it with no anchors or aliases, a list item at a time."""
    for key, value in sections(result):
        if key == "objects":
            file.write("objects:\n")
            for kind, objs in value.items():
                if not objs:
                    file.write(f"  {kind}: []\n")
                    continue
                file.write(f"  {kind}:\n")
                for text in _yaml_items(functools.partial(_nested, "objects", kind), objs, 2):
                    file.write(text)
        elif key in _STREAMED and len(value):
            file.write(f"{key}:\n")
            for text in _yaml_items(functools.partial(_under, key), value, 1):
                file.write(text)
        else:
            file.write(yamltext.fast({key: list(value) if isinstance(value, _Lazy) else value}))
