"""Label and field selectors for ``Cluster.list`` calls, with the API server's syntax and meaning.

Label selectors (``labels.Parse`` syntax)::

    app=web, tier!=db, env in (prod, staging), zone notin (a), gpu, !spot, priority>3

A ``Mapping[str, str]`` is the same as ``k1=v1,k2=v2``. A ``metav1.LabelSelector`` dict
(``matchLabels`` / ``matchExpressions``) is matched by :func:`matches_label_selector` (``None``
selects nothing, ``{}`` selects everything, as for a policy/v1 PodDisruptionBudget) and converted
to the string form by :func:`label_selector_to_string`.

Field selectors (``fields.ParseSelector`` syntax): comma-separated ``field=value``,
``field==value`` or ``field!=value``; ``\\``-escapes for ``,``, ``=``, ``!`` and ``\\``. A missing
field has the value ``""`` (``spec.nodeName=`` selects unbound pods); booleans read ``true`` or
``false``. Only the fields in :func:`supported_fields` may be used - exactly those a real API
server accepts for the kind (custom resources: ``metadata.name`` and, when namespaced,
``metadata.namespace``); anything else raises :class:`karpy.kube.errors.BadRequest` naming the
field, the kind and what it supports.

This module is pure (no cluster); :mod:`karpy.kube.memory` uses it to filter and to pick an index.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy.kube import errors, interface

# ---------------------------------------------------------------------------------------- labels

_KEY = r"[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_KEY_RE = re.compile(rf"^{_KEY}$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")
_SET_RE = re.compile(rf"^({_KEY})\s+(in|notin)\s*\((.*)\)$")
_CMP_RE = re.compile(rf"^({_KEY})\s*(==|!=|=|>|<)\s*(\S*)$")

EQUALS = "="
NOT_EQUALS = "!="
IN = "in"
NOT_IN = "notin"
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = ">"
LESS_THAN = "<"


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One requirement of a label selector; ``values`` is empty for exists / does-not-exist."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        value = labels.get(self.key)
        if op in (EQUALS, IN):
            return value is not None and value in self.values
        if op in (NOT_EQUALS, NOT_IN):
            return value is None or value not in self.values
        if op == EXISTS:
            return value is not None
        if op == DOES_NOT_EXIST:
            return value is None
        if value is None:
            return False
        try:
            have = int(value)
        except ValueError:
            return False
        want = int(self.values[0])
        return have > want if op == GREATER_THAN else have < want


@dataclass(frozen=True, slots=True)
class LabelQuery:
    """A parsed label selector: every requirement must match (an empty query matches everything)."""

    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def matches_object(self, obj: Mapping[str, Any]) -> bool:
        return self.matches(obj.get("metadata", {}).get("labels"))

    def __str__(self) -> str:
        parts = []
        for r in self.requirements:
            if r.operator == EXISTS:
                parts.append(r.key)
            elif r.operator == DOES_NOT_EXIST:
                parts.append(f"!{r.key}")
            elif r.operator in (IN, NOT_IN):
                parts.append(f"{r.key} {r.operator} ({','.join(r.values)})")
            else:
                parts.append(f"{r.key}{r.operator}{r.values[0]}")
        return ",".join(parts)


def _split_outside_parens(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise errors.BadRequest(f"unbalanced parentheses in label selector {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise errors.BadRequest(f"unbalanced parentheses in label selector {text!r}")
    parts.append("".join(current))
    return parts


def _check_value(value: str, text: str) -> str:
    if len(value) > 63 or not _VALUE_RE.match(value):
        raise errors.BadRequest(f"invalid label value {value!r} in label selector {text!r}")
    return value


def parse_label_selector(text: str) -> LabelQuery:
    """Parse the string form; raises :class:`karpy.kube.errors.BadRequest` when malformed."""
    if not text.strip():
        return LabelQuery()
    reqs: list[LabelRequirement] = []
    for raw in _split_outside_parens(text):
        part = raw.strip()
        if not part:
            raise errors.BadRequest(f"empty requirement in label selector {text!r}")
        if part.startswith("!"):
            key = part[1:].strip()
            if not _KEY_RE.match(key):
                raise errors.BadRequest(f"invalid label key {key!r} in label selector {text!r}")
            reqs.append(LabelRequirement(key, DOES_NOT_EXIST))
            continue
        m = _SET_RE.match(part)
        if m:
            values = tuple(_check_value(v.strip(), text) for v in m.group(3).split(","))
            if m.group(3).strip() == "":
                raise errors.BadRequest(f"'{m.group(2)}' needs at least one value in {text!r}")
            reqs.append(LabelRequirement(m.group(1), m.group(2), tuple(sorted(set(values)))))
            continue
        m = _CMP_RE.match(part)
        if m:
            key, op, value = m.group(1), m.group(2), m.group(3)
            if op in (GREATER_THAN, LESS_THAN):
                if not re.fullmatch(r"-?\d+", value):
                    raise errors.BadRequest(f"'{op}' needs an integer, found {value!r} in {text!r}")
            else:
                _check_value(value, text)
            reqs.append(LabelRequirement(key, EQUALS if op == "==" else op, (value,)))
            continue
        if _KEY_RE.match(part):
            reqs.append(LabelRequirement(part, EXISTS))
            continue
        raise errors.BadRequest(f"cannot parse requirement {part!r} of label selector {text!r}")
    return LabelQuery(tuple(reqs))


def label_query(selector: str | Mapping[str, str] | LabelQuery | None) -> LabelQuery | None:
    """Normalise what ``Cluster.list`` accepts; ``None`` (or an empty selector) means "no filter"."""
    if selector is None:
        return None
    if isinstance(selector, LabelQuery):
        query = selector
    elif isinstance(selector, str):
        query = parse_label_selector(selector)
    else:
        query = LabelQuery(tuple(LabelRequirement(k, EQUALS, (str(v),)) for k, v in sorted(selector.items())))
    return query if query.requirements else None


_EXPRESSION_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def from_label_selector(selector: Mapping[str, Any]) -> LabelQuery:
    """A ``metav1.LabelSelector`` dict as a query (``{}`` -> the empty query, matching everything)."""
    match_labels = selector.get("matchLabels") or {}
    reqs = [LabelRequirement(k, EQUALS, (str(v),)) for k, v in sorted(match_labels.items())]
    for expr in selector.get("matchExpressions") or []:
        op = _EXPRESSION_OPERATORS.get(expr.get("operator", ""))
        if op is None:
            raise errors.Invalid(f"unknown matchExpressions operator {expr.get('operator')!r}")
        values = tuple(str(v) for v in expr.get("values") or [])
        if op in (IN, NOT_IN) and not values:
            raise errors.Invalid(f"matchExpressions operator {expr['operator']} needs values")
        reqs.append(LabelRequirement(str(expr.get("key", "")), op, tuple(sorted(set(values)))))
    return LabelQuery(tuple(reqs))


def matches_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """``metav1.LabelSelector`` semantics: ``None`` selects nothing, ``{}`` selects everything."""
    if selector is None:
        return False
    return from_label_selector(selector).matches(labels)


def label_selector_to_string(selector: Mapping[str, Any]) -> str:
    """The string form of a ``metav1.LabelSelector`` dict, for ``Cluster.list(label_selector=...)``."""
    return str(from_label_selector(selector))


# ---------------------------------------------------------------------------------------- fields

_COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
_CLUSTER_SCOPED_FIELDS = frozenset({"metadata.name"})

_FIELDS_BY_KIND: dict[str, frozenset[str]] = {
    # what kube-apiserver's field label conversion functions accept, per kind (pkg/apis/core/v1)
    "Pod": _COMMON_FIELDS
    | {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    },
    "Node": _CLUSTER_SCOPED_FIELDS | {"spec.unschedulable"},
    "Event": _COMMON_FIELDS
    | {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
    "Namespace": _CLUSTER_SCOPED_FIELDS | {"status.phase"},
}
"""Per built-in kind, the field selectors a real API server accepts. Every other kind - custom
resources included (NodeClaim, NodePool: their CRDs declare no ``selectableFields``) - takes
``metadata.name``, plus ``metadata.namespace`` when namespaced."""

# Field names whose value lives at a different path.
_FIELD_PATHS: dict[tuple[str, str], str] = {("Event", "source"): "source.component"}
_BOOL_FIELDS = frozenset({"spec.unschedulable", "spec.hostNetwork"})


def supported_fields(kind: str) -> frozenset[str]:
    """The field selector keys a real API server (and so ``Cluster.list``) accepts for ``kind``."""
    found = _FIELDS_BY_KIND.get(kind)
    if found is not None:
        return found
    info = interface.kind_info(kind)
    return _CLUSTER_SCOPED_FIELDS if info is not None and not info.namespaced else _COMMON_FIELDS


def field_value(obj: Mapping[str, Any], kind: str, field: str) -> str:
    """The value of ``field`` in ``obj`` as a field selector compares it (``""`` when missing)."""
    node: Any = obj
    for part in _FIELD_PATHS.get((kind, field), field).split("."):
        if not isinstance(node, Mapping):
            node = None
            break
        node = node.get(part)
    if field in _BOOL_FIELDS:
        return "true" if node is True else "false"
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str


@dataclass(frozen=True, slots=True)
class FieldQuery:
    """A parsed field selector: every requirement must hold."""

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any], kind: str) -> bool:
        return all((field_value(obj, kind, r.field) == r.value) == r.equal for r in self.requirements)

    def equals(self, field: str) -> str | None:
        """The value ``field`` must equal, when the selector pins it (used to pick an index)."""
        for r in self.requirements:
            if r.field == field and r.equal:
                return r.value
        return None

    def check(self, kind: str) -> None:
        """Raise :class:`karpy.kube.errors.BadRequest` for a field ``kind`` does not support."""
        allowed = supported_fields(kind)
        for r in self.requirements:
            if r.field not in allowed:
                raise errors.BadRequest(
                    f'field label not supported: "{r.field}" for {kind} '
                    f"(supported: {', '.join(sorted(allowed))})",
                    kind=kind,
                )


def _split_unescaped(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        raise errors.BadRequest(f"field selector {text!r} ends with an unfinished escape")
    parts.append("".join(current))
    return parts


def _unescape(text: str, whole: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            nxt = text[i + 1]
            if nxt not in "\\,=!":
                raise errors.BadRequest(f"invalid escape sequence '\\{nxt}' in field selector {whole!r}")
            out.append(nxt)
            i += 2
            continue
        if ch in "=,":
            raise errors.BadRequest(f"unescaped {ch!r} in field selector {whole!r}")
        out.append(ch)
        i += 1
    return "".join(out)


def _find_operator(term: str) -> tuple[int, str] | None:
    """Position and text of the first unescaped ``!=``, ``==`` or ``=`` in ``term``."""
    i = 0
    while i < len(term):
        ch = term[i]
        if ch == "\\":
            i += 2
            continue
        if term.startswith("!=", i):
            return i, "!="
        if term.startswith("==", i):
            return i, "=="
        if ch == "=":
            return i, "="
        i += 1
    return None


@functools.lru_cache(maxsize=8192)
def parse_field_selector(text: str) -> FieldQuery:
    """Parse the string form; raises :class:`karpy.kube.errors.BadRequest` when malformed.

    Kept per text (a :class:`FieldQuery` is immutable): controllers read their object by
    ``metadata.name=...`` on every reconcile, and a run has a few selectors per object at most."""
    if not text.strip():
        return FieldQuery()
    reqs: list[FieldRequirement] = []
    for term in _split_unescaped(text):
        if not term.strip():
            continue
        found = _find_operator(term)
        if found is None:
            raise errors.BadRequest(f"invalid field selector term {term!r}: expected field=value or field!=v")
        pos, op = found
        field = _unescape(term[:pos].strip(), text)
        value = _unescape(term[pos + len(op) :].strip(), text)
        if not field:
            raise errors.BadRequest(f"field selector term {term!r} has no field name")
        reqs.append(FieldRequirement(field, op != "!=", value))
    return FieldQuery(tuple(reqs))


def field_query(selector: str | FieldQuery | None) -> FieldQuery | None:
    """Normalise what ``Cluster.list`` accepts; ``None`` (or an empty selector) means "no filter"."""
    if selector is None:
        return None
    query = selector if isinstance(selector, FieldQuery) else parse_field_selector(selector)
    return query if query.requirements else None
