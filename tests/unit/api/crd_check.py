"""Helpers for checking manifests against karpy's CRD schemas, as an API server would.

``validator(kind)`` is a cached ``jsonschema`` validator over the kind's ``openAPIV3Schema`` made
strict the way ``kubectl apply`` (strict field validation) is: an unknown field is an error,
except under ``x-kubernetes-preserve-unknown-fields``. ``cel_violations`` evaluates every
``x-kubernetes-validations`` rule at its place in a manifest with cel-python, plus the Kubernetes
CEL string extensions the rules use (``find``, ``split``), with ``oldSelf`` = ``self`` (an
unchanged object).
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml
from celpy import celtypes

from karpy.api.schemas import crd

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "crds"


def fixture(name: str) -> dict[str, Any]:
    data = yaml.safe_load((FIXTURES / name).read_text())
    assert isinstance(data, dict)
    return data


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(schema)

    def visit(node: dict[str, Any]) -> None:
        if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node.setdefault("additionalProperties", False)
        for sub in (node.get("properties") or {}).values():
            visit(sub)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                visit(node[key])

    visit(out)
    out["properties"]["metadata"] = {"type": "object"}
    return out


@functools.cache
def validator(kind: str, version: str | None = None) -> jsonschema.protocols.Validator:
    schema = _strict(crd.schema_of(kind, version))
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=jsonschema.FormatChecker())


def schema_errors(manifest: dict[str, Any], version: str | None = None) -> list[str]:
    v = validator(str(manifest["kind"]), version)
    return sorted(f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in v.iter_errors(manifest))


# --------------------------------------------------------------------------------------------- CEL


def _find(s: celtypes.StringType, pattern: celtypes.StringType) -> celtypes.StringType:
    m = re.search(str(pattern), str(s))
    return celtypes.StringType(m.group(0) if m else "")


def _split(s: celtypes.StringType, sep: celtypes.StringType) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(p) for p in str(s).split(str(sep))])


_ENV = celpy.Environment()
_FUNCTIONS: dict[str, Any] = {"find": _find, "split": _split}


@functools.cache
def _program(expr: str) -> Any:
    return _ENV.program(_ENV.compile(expr), functions=_FUNCTIONS)


def compile_rule(expr: str) -> None:
    """Raises when ``expr`` is not valid CEL."""
    _program(expr)


def _rules_at(schema: dict[str, Any], value: Any, path: str) -> list[tuple[str, str, Any]]:
    out = [(path, r["rule"], value) for r in schema.get("x-kubernetes-validations") or ()]
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in value:
                out.extend(_rules_at(sub, value[key], f"{path}.{key}"))
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                out.extend(_rules_at(extra, item, f"{path}.{key}"))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            out.extend(_rules_at(schema["items"], item, f"{path}[{i}]"))
    return out


def cel_violations(manifest: dict[str, Any], version: str | None = None) -> list[str]:
    """Every rule of the kind's schema that ``manifest`` breaks (or that cannot be evaluated)."""
    schema = crd.schema_of(str(manifest["kind"]), version)
    bad: list[str] = []
    for path, expr, value in _rules_at(schema, manifest, ""):
        cel_value = celpy.adapter.json_to_cel(value)
        try:
            result = _program(expr).evaluate({"self": cel_value, "oldSelf": cel_value})
        except Exception as exc:  # an evaluation error counts as a violation
            bad.append(f"{path}: {expr}: {type(exc).__name__}")
            continue
        if isinstance(result, Exception) or not bool(result):
            bad.append(f"{path}: {expr}")
    return bad
