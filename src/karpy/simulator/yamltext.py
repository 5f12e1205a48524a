"""YAML text of JSON-shaped data, as PyYAML's safe dumper writes it, without PyYAML's Python layers.

:func:`pyyaml` is ``yaml.dump(value, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=120)``
where :class:`Dumper` is PyYAML's safe dumper (libyaml's emitter when PyYAML has it) with no anchors or
aliases. Even with libyaml, PyYAML's representer and resolver are Python: a call or more per node,
regular expressions per scalar. :func:`fast` writes the same text for the common data of a run in a
fraction of the time, and :func:`block_item` the text of one item of a block sequence at a column.

The fast writer only writes what it can prove PyYAML writes the same way. A string it is not sure of
is PyYAML's text of that string alone, dumped where the emitter is in the same state (:func:`_spliced`);
anything else (a key that may not be simple, a type the safe representer does not take) raises
:class:`Unsure` inside, and the caller's answer is PyYAML's own text (:func:`fast` does that for a
whole value; :func:`block_item` returns ``None`` and lets the caller do it). What it writes itself:

- block mappings whose keys are strings of 1 to 99 characters (a simple key below both emitters'
  limits: libyaml's 128 characters, the pure-Python emitter's 122, as it counts ``!!str``),
  ``key: scalar`` or the key alone on its line with the block collection under it; a mapping's
  lists are not indented (``- `` at the key's column), a list's lists and mappings begin on the
  ``- `` line (``- - a``, ``- k: v``); empty collections as ``{}`` and ``[]``;
- ``null``, ``true``/``false``, ``int`` and ``float`` as the representer spells them (``.inf``,
  ``.nan``, ``1.0e+20``), plain because the resolver reads them back as themselves;
- strings of printable characters of the Basic Multilingual Plane (no line break, no tab, no
  ``U+0085``, ``U+2028``, ``U+2029``, ``U+FEFF``, nothing past ``U+FFFF``: where PyYAML's and libyaml's
  emitters differ or quote with escapes): plain when the emitter allows a plain scalar (no leading indicator, no
  ``": "``/``" #"``, no ``---``/``...`` start, no leading or trailing space) and the resolver reads
  the text as a string; otherwise single-quoted (``'`` doubled). A scalar with a space whose line
  would pass column 120 might be folded: spliced, as the strings outside these characters.

Only ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None`` themselves (not
subclasses, which the safe representer refuses) take the fast path.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

WIDTH = 120
"""The ``width`` of :func:`pyyaml`: a plain or single-quoted scalar folds at a space past it."""
_KEY_LIMIT = 100
"""Keys at least this long are left to PyYAML (past 122 characters the pure-Python emitter writes ``? key``)."""

_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class Dumper(_BaseDumper):  # type: ignore[misc]
    """PyYAML's safe dumper (libyaml's emitter when there is one) writing every object in full: no
    ``&id001`` anchors where two parts of the data happen to share one Python object."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def pyyaml(value: Any) -> str:
    """PyYAML's text of ``value``: the reference :func:`fast` matches."""
    text: str = yaml.dump(value, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=WIDTH)
    return text


class Unsure(Exception):
    """The fast writer cannot prove its text is PyYAML's for this value."""


_RESOLVERS: dict[str | None, list[tuple[str, re.Pattern[str]]]] = Dumper.yaml_implicit_resolvers
_STR = "tag:yaml.org,2002:str"
_FLOAT = "tag:yaml.org,2002:float"
_QUICK = re.compile(r"[A-Za-z0-9_/][A-Za-z0-9_./=+-]*")
"""Texts with no space, quote or indicator the emitter cares about, nor a ``---``/``...`` start."""
_PRINTABLE = re.compile("[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]*")
"""The characters both emitters write as they are (``allow_unicode``) and neither reads as a break."""
_LEADING = frozenset("#,[]{}&*!|>'\"%@`")
_CACHE_LIMIT = 65_536
"""Texts kept (then forgotten all at once): a run's keys and common values, not all its names."""


def _tag(text: str) -> str:
    """The tag the resolver gives ``text`` written plain (``Resolver.resolve`` for a plain scalar)."""
    for tag, regexp in _RESOLVERS.get(text[0] if text else "", []) + _RESOLVERS.get(None, []):
        if regexp.match(text):
            return tag
    return _STR


def _plain_allowed(text: str) -> bool:
    """The emitter's ``analyze_scalar(text).allow_block_plain`` for a non-empty :data:`_PRINTABLE` text."""
    if text[0] == " " or text[-1] == " " or text[0] in _LEADING or text.startswith(("---", "...")):
        return False
    if text[0] in "?:-" and (len(text) == 1 or text[1] == " "):
        return False
    return not (text.endswith(":") or ": " in text or " #" in text)


def _careful(text: str) -> str:
    """A string's one-line scalar text the slow way, or ``""`` when PyYAML may quote it otherwise."""
    if not text:
        return "''"
    if not _PRINTABLE.fullmatch(text):
        return ""
    if _plain_allowed(text) and _tag(text) == _STR:
        return text
    return "'" + text.replace("'", "''") + "'"


_strings: dict[str, str] = {}
"""Texts of strings; ``""`` for a string left to PyYAML (:func:`_spliced`)."""
_RESOLVABLE = frozenset(k for k in _RESOLVERS if k)
"""First characters for which the resolver may read a plain text as something other than a string."""
_WILDCARD = None in _RESOLVERS
"""A resolver for any first character (PyYAML has none; one added would make every text a candidate)."""


def _string(text: str) -> str:
    """A string's one-line scalar text, or ``""`` (cached: keys and most values repeat)."""
    done = _strings.get(text)
    if done is not None:
        return done
    if _QUICK.fullmatch(text):
        resolvable = text[0] in _RESOLVABLE or _WILDCARD
        done = "'" + text + "'" if resolvable and _tag(text) != _STR else text
    else:
        done = _careful(text)
    if len(_strings) >= _CACHE_LIMIT:
        _strings.clear()
    _strings[text] = done
    return done


def _float(value: float) -> str:
    """``SafeRepresenter.represent_float``'s text, written plain since it resolves as a float."""
    if math.isnan(value):
        text = ".nan"
    elif math.isinf(value):
        text = ".inf" if value > 0 else "-.inf"
    else:
        text = repr(value).lower()
        if "." not in text and "e" in text:
            text = text.replace("e", ".0e", 1)
    if _tag(text) != _FLOAT:
        raise Unsure(value)
    return text


def _other(value: Any) -> str:
    """The text of a scalar that is not a string (no space in it: never folded), or :class:`Unsure`."""
    kind = type(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    if kind is float:
        return _float(value)
    raise Unsure(value)


_keys: dict[str, str] = {}


def _key(key: str) -> str:
    """A mapping key's text (cached), or :class:`Unsure` when it may not be a simple ``key:``."""
    done = _string(key)
    if not key or len(key) >= _KEY_LIMIT or not done:
        raise Unsure(key)
    if len(_keys) >= _CACHE_LIMIT:
        _keys.clear()
    _keys[key] = done
    return done


def _spliced(key: str | None, value: str, indent: int, key_text: str = "") -> str:
    """PyYAML's text of ``key: value`` (``- value`` when ``key`` is None) at column ``indent``, without
    the ``indent`` spaces: a string it may fold, quote over lines or escape, dumped alone where the emitter
    is in the same state (same column and indentation: ``indent // 2`` mappings deep; an unindented list).
    ``key_text``: the key as written (:func:`_key`; quoted when the resolver would read it otherwise)."""
    inner: dict[str, Any] = {key: value} if key is not None else {"k": [value]}
    for _ in range(indent // 2):
        inner = {"a": inner}
    above = indent // 2 + (key is None)
    text = pyyaml(inner).split("\n", above)[-1]
    if not text.startswith(" " * indent + (f"{key_text}:" if key is not None else "- ")):
        raise Unsure(value)  # not the expected lines: the caller's fallback
    return text[indent:]


def _mapping(value: dict[Any, Any], indent: int, lead: str, out: list[str]) -> None:
    """A non-empty mapping at ``indent``; ``lead`` is written before its first key (its line so far)."""
    pad = " " * indent
    keys = _keys
    strings = _strings
    append = out.append
    for k, v in value.items():
        if type(k) is not str:
            raise Unsure(k)
        key = keys.get(k) or _key(k)
        kind = type(v)
        if kind is str:
            text = strings.get(v)
            if text is None:
                text = _string(v)
            if not text or (" " in text and indent + len(key) + 2 + len(text) > WIDTH):  # may fold it
                append(lead + _spliced(k, v, indent, key))
            else:
                append(f"{lead}{key}: {text}\n")
        elif kind is dict:
            if v:
                append(f"{lead}{key}:\n")
                _mapping(v, indent + 2, " " * (indent + 2), out)
            else:
                append(f"{lead}{key}: {{}}\n")
        elif kind is list:
            if v:
                append(f"{lead}{key}:\n")
                _sequence(v, indent, pad, out)
            else:
                append(f"{lead}{key}: []\n")
        else:
            append(f"{lead}{key}: {_other(v)}\n")
        lead = pad


def _sequence(value: list[Any], indent: int, lead: str, out: list[str]) -> None:
    """A non-empty list whose ``- `` are at column ``indent``; ``lead`` begins its first item's line."""
    pad = " " * indent
    for v in value:
        kind = type(v)
        if kind is dict:
            if v:
                _mapping(v, indent + 2, lead + "- ", out)
            else:
                out.append(f"{lead}- {{}}\n")
        elif kind is list:
            if v:
                _sequence(v, indent + 2, lead + "- ", out)
            else:
                out.append(f"{lead}- []\n")
        elif kind is str:
            text = _strings.get(v)
            if text is None:
                text = _string(v)
            if not text or (" " in text and indent + 2 + len(text) > WIDTH):
                out.append(lead + _spliced(None, v, indent))
            else:
                out.append(f"{lead}- {text}\n")
        else:
            out.append(f"{lead}- {_other(v)}\n")
        lead = pad


def fast(value: Any) -> str:
    """:func:`pyyaml`'s text of ``value``, written here when it can be (a non-empty dict or list)."""
    out: list[str] = []
    try:
        if type(value) is dict and value:
            _mapping(value, 0, "", out)
        elif type(value) is list and value:
            _sequence(value, 0, "", out)
        else:
            return pyyaml(value)
    except Unsure:
        return pyyaml(value)
    return "".join(out)


def block_item(item: Any, indent: int) -> str | None:
    """The lines of ``item`` as one item of a block sequence whose ``- `` is at column ``indent`` (the
    same text as in PyYAML's text of the whole), or ``None`` when unsure."""
    out: list[str] = []
    try:
        _sequence([item], indent, " " * indent, out)
    except Unsure:
        return None
    return "".join(out)
