"""Builders for structural OpenAPI v3 schemas, as a Kubernetes API server reads them in a CRD.

Each builder returns a plain ``dict`` (the schema node), so schemas compose as data and render to
YAML or JSON unchanged. Keyword names are Python's (``max_len``); the output uses OpenAPI's
(``maxLength``). ``rules`` are ``x-kubernetes-validations`` (CEL) built with :func:`rule`. Only
keys whose value is set are emitted. A caller may rely on the builders never sharing mutable
state: every call returns fresh dicts (a schema may be reused in several places).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

Schema = dict[str, Any]


def rule(expr: str, message: str) -> dict[str, str]:
    """One ``x-kubernetes-validations`` entry: a CEL expression and the message when it is false."""
    return {"message": message, "rule": expr}


def _common(out: Schema, *, doc: str | None, default: Any, rules: Sequence[Mapping[str, str]],
            extra: Mapping[str, Any] | None = None) -> Schema:
    if doc:
        out["description"] = doc
    if default is not None:
        out["default"] = copy.deepcopy(default)
    if rules:
        out["x-kubernetes-validations"] = [dict(r) for r in rules]
    if extra:
        out.update(copy.deepcopy(dict(extra)))
    return out


def string(*, enum: Sequence[str] | None = None, pattern: str | None = None, min_len: int | None = None,
           max_len: int | None = None, fmt: str | None = None, default: str | None = None,
           rules: Sequence[Mapping[str, str]] = (), doc: str | None = None) -> Schema:
    out: Schema = {"type": "string"}
    if enum is not None:
        out["enum"] = list(enum)
    if pattern is not None:
        out["pattern"] = pattern
    if min_len is not None:
        out["minLength"] = min_len
    if max_len is not None:
        out["maxLength"] = max_len
    if fmt is not None:
        out["format"] = fmt
    return _common(out, doc=doc, default=default, rules=rules)


def integer(*, fmt: str | None = None, minimum: int | None = None, maximum: int | None = None,
            default: int | None = None, rules: Sequence[Mapping[str, str]] = (), doc: str | None = None) -> Schema:
    out: Schema = {"type": "integer"}
    if fmt is not None:
        out["format"] = fmt
    if minimum is not None:
        out["minimum"] = minimum
    if maximum is not None:
        out["maximum"] = maximum
    return _common(out, doc=doc, default=default, rules=rules)


def int32(minimum: int | None = None, maximum: int | None = None, *, default: int | None = None,
          doc: str | None = None) -> Schema:
    return integer(fmt="int32", minimum=minimum, maximum=maximum, default=default, doc=doc)


def int64(minimum: int | None = None, maximum: int | None = None, *, default: int | None = None,
          doc: str | None = None) -> Schema:
    return integer(fmt="int64", minimum=minimum, maximum=maximum, default=default, doc=doc)


def boolean(*, default: bool | None = None, doc: str | None = None) -> Schema:
    return _common({"type": "boolean"}, doc=doc, default=default, rules=())


def timestamp(doc: str | None = None) -> Schema:
    """An RFC 3339 time (``metav1.Time``)."""
    return string(fmt="date-time", doc=doc)


def obj(props: Mapping[str, Schema] | None = None, *, required: Sequence[str] = (),
        rules: Sequence[Mapping[str, str]] = (), default: Any = None, doc: str | None = None,
        max_props: int | None = None, extra: Mapping[str, Any] | None = None) -> Schema:
    """An object with named properties (``required`` names are sorted, as controller-gen does)."""
    out: Schema = {"type": "object"}
    if props is not None:
        out["properties"] = {k: copy.deepcopy(v) for k, v in props.items()}
    if required:
        missing = [r for r in required if props is None or r not in props]
        if missing:
            raise ValueError(f"required fields {missing} are not properties")
        out["required"] = sorted(required)
    if max_props is not None:
        out["maxProperties"] = max_props
    return _common(out, doc=doc, default=default, rules=rules, extra=extra)


def str_map(value: Schema | None = None, *, max_props: int | None = None,
            rules: Sequence[Mapping[str, str]] = (), map_type: str | None = None, doc: str | None = None) -> Schema:
    """A ``map[string]string`` (or ``map[string]<value>``)."""
    out: Schema = {"type": "object", "additionalProperties": copy.deepcopy(value) if value else {"type": "string"}}
    if max_props is not None:
        out["maxProperties"] = max_props
    if map_type is not None:
        out["x-kubernetes-map-type"] = map_type
    return _common(out, doc=doc, default=None, rules=rules)


def array(items: Schema, *, min_items: int | None = None, max_items: int | None = None,
          list_type: str | None = None, map_keys: Sequence[str] = (), rules: Sequence[Mapping[str, str]] = (),
          default: Any = None, doc: str | None = None) -> Schema:
    out: Schema = {"type": "array", "items": copy.deepcopy(items)}
    if min_items is not None:
        out["minItems"] = min_items
    if max_items is not None:
        out["maxItems"] = max_items
    if list_type is not None:
        out["x-kubernetes-list-type"] = list_type
    if map_keys:
        out["x-kubernetes-list-map-keys"] = list(map_keys)
    return _common(out, doc=doc, default=default, rules=rules)


def preserve_unknown(props: Mapping[str, Schema] | None = None, *, rules: Sequence[Mapping[str, str]] = (),
                     doc: str | None = None) -> Schema:
    """An object whose declared ``props`` are checked and whose other fields are kept as written."""
    return obj(props, rules=rules, doc=doc, extra={"x-kubernetes-preserve-unknown-fields": True})


QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
"""A Kubernetes ``resource.Quantity`` (``100m``, ``1.5Gi``, ``2e3``)."""


def quantity(doc: str | None = None) -> Schema:
    """An int-or-string ``resource.Quantity``."""
    out: Schema = {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY_PATTERN,
                   "x-kubernetes-int-or-string": True}
    return _common(out, doc=doc, default=None, rules=())


def resource_list(doc: str | None = None) -> Schema:
    """A ``corev1.ResourceList``: resource name -> quantity."""
    return str_map(quantity(), doc=doc)


def walk(schema: Schema, path: str = "") -> list[tuple[str, Schema]]:
    """Every node of ``schema`` with its path (``spec.template.spec.taints[].key``, ``tags{}``)."""
    out = [(path, schema)]
    for key, sub in (schema.get("properties") or {}).items():
        out.extend(walk(sub, f"{path}.{key}" if path else key))
    if isinstance(schema.get("items"), dict):
        out.extend(walk(schema["items"], f"{path}[]"))
    if isinstance(schema.get("additionalProperties"), dict):
        out.extend(walk(schema["additionalProperties"], f"{path}{{}}"))
    return out
