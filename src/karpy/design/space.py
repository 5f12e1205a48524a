"""The design space of ``karpy design``: which NodePool variables a search may change, and their values.

A space is one YAML document (``docs/design.md`` has the full schema)::

    apiVersion: karpy.io/v1alpha1
    kind: DesignSpace
    metadata: {name: web}
    spec:
      nodePool: general               # the input NodePool a design replaces (optional if there is one)
      variables:
        instanceFamily: [m5, c5, m6i, [m5, c5]]      # a choice per item; a list is one choice of several
        capacityType: [on-demand, spot]
        consolidationPolicy: [WhenEmpty, WhenEmptyOrUnderutilized, Balanced]
        consolidateAfter: [0s, 1m, 10m]
        spotShare: {min: 0.0, max: 1.0, step: 0.25}  # numeric variables may take a range

Every variable not given keeps the input NodePool's value (the constants). :func:`parse` validates
*everything* and raises :class:`karpy.api.errors.ValidationError` whose errors name the document, the
field, what was expected and what was found. A caller may rely on: a parsed :class:`Space` is plain,
picklable data; :meth:`Space.choices` lists each variable's values in the file's order (a search
samples them by index or label, never by Python identity).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.api import duration, errors, labels, manifest

API_VERSION = "karpy.io/v1alpha1"
KIND = "DesignSpace"

CAPACITY_TYPES = (labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_SPOT)
POLICIES = ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced")
"""Karpenter v1.14's consolidation policies (``Balanced``: a move only when its saving outweighs its disruption)."""
ARCHES = ("amd64", "arm64")
NO_SPLIT = "none"


def _word(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip()) and v == v.strip()


def _word_or_words(v: Any) -> bool:
    return _word(v) or (isinstance(v, list) and bool(v) and all(_word(x) for x in v))


def _in(allowed: Sequence[str]) -> Callable[[Any], bool]:
    def check(v: Any) -> bool:
        items = v if isinstance(v, list) else [v]
        return bool(items) and all(isinstance(x, str) and x in allowed for x in items)
    return check


def _duration(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    try:
        duration.parse_duration(v)
    except duration.DurationError:
        return False
    return True


def _budget(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return v >= 0
    if not isinstance(v, str):
        return False
    text = v[:-1] if v.endswith("%") else v
    return text.isdigit() and (not v.endswith("%") or int(text) <= 100)


def _label_key(v: Any) -> bool:
    return _word(v) and " " not in v


@dataclass(frozen=True, slots=True)
class VariableKind:
    """What one variable of the space means and which values it accepts."""

    name: str
    expected: str
    check: Callable[[Any], bool]
    numeric: tuple[float, float] | None = None
    """(lowest, highest) when the variable may be given as ``{min, max, step}``."""
    integer: bool = False


KINDS: dict[str, VariableKind] = {k.name: k for k in (
    VariableKind("instanceCategory", "an instance category such as m, or a list of them", _word_or_words),
    VariableKind("instanceFamily", "an instance family such as m5, or a list of them", _word_or_words),
    VariableKind("instanceGeneration", "the lowest instance generation, an integer from 1 to 20",
                 lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 20, (1, 20), True),
    VariableKind("instanceSize", "an instance size such as xlarge, or a list of them", _word_or_words),
    VariableKind("capacityType", "on-demand or spot, or a list of them", _in(CAPACITY_TYPES)),
    VariableKind("spotShare", "a share of the pool's peak CPU on spot, from 0 to 1",
                 lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1, (0, 1)),
    VariableKind("architecture", "amd64 or arm64, or a list of them", _in(ARCHES)),
    VariableKind("consolidationPolicy", "WhenEmpty, WhenEmptyOrUnderutilized or Balanced (one policy, not a list)",
                 lambda v: isinstance(v, str) and v in POLICIES),
    VariableKind("consolidateAfter", "a duration such as 30s or 10m, or Never", _duration),
    VariableKind("budgets", "a nodes budget: a count such as 1 or a percentage such as 10%", _budget),
    VariableKind("weight", "a NodePool weight, an integer from 1 to 100",
                 lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 100, (1, 100), True),
    VariableKind("expireAfter", "a duration such as 720h, or Never", _duration),
    VariableKind("split", f"{NO_SPLIT} (one pool) or a workload label key (one pool per value)", _label_key),
)}
"""The variables a space may have, in the order designs and tables show them."""


@dataclass(frozen=True, slots=True)
class Variable:
    name: str
    values: tuple[Any, ...]
    """The choices, in the file's order (lists as tuples are kept as lists: JSON-like values)."""

    def labels(self) -> list[str]:
        """One short, unique text per choice (what Optuna samples)."""
        return [label(v) for v in self.values]


def label(value: Any) -> str:
    """A choice as text: ``m5``, ``c,m``, ``0.25``."""
    if isinstance(value, list | tuple):
        return ",".join(str(x) for x in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass(frozen=True, slots=True)
class Space:
    name: str
    source: str
    nodepool: str | None
    variables: tuple[Variable, ...]

    def choices(self) -> dict[str, list[Any]]:
        return {v.name: list(v.values) for v in self.variables}

    def size(self) -> int:
        return math.prod(len(v.values) for v in self.variables)

    def variable(self, name: str) -> Variable | None:
        return next((v for v in self.variables if v.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "nodePool": self.nodepool,
                "variables": {v.name: [_plain(x) for x in v.values] for v in self.variables}}


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def load(path: str) -> Space:
    """Read and validate a space file; errors name the file."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.ValidationError.single(path, "(file)", "a readable UTF-8 YAML file", str(exc)) from None
    return parse(text, source=path)


def parse(text: str, *, source: str = "<space>") -> Space:
    docs = [d for d in manifest.parse_yaml(text, source) if d is not None]
    if len(docs) != 1:
        raise errors.ValidationError.single(source, "(documents)", f"exactly one {KIND} document", len(docs))
    return from_mapping(docs[0], source=source)


def from_mapping(doc: Any, *, source: str = "<space>") -> Space:
    """Validate one space document; every problem is reported, not only the first."""
    if not isinstance(doc, Mapping):
        raise errors.ValidationError.single(source, "(document)", f"a {KIND} mapping", doc)
    md = doc.get("metadata")
    name = str((md.get("name") if isinstance(md, Mapping) else None) or "(unnamed)")
    obj = f"{source}: {KIND}/{name}"
    problems: list[errors.FieldError] = []

    def fail(path: str, expected: str, found: Any) -> None:
        problems.append(errors.FieldError(obj, path, expected, found))

    if doc.get("apiVersion") != API_VERSION:
        fail("apiVersion", API_VERSION, doc.get("apiVersion"))
    if doc.get("kind") != KIND:
        fail("kind", KIND, doc.get("kind"))
    for key in doc:
        if key not in ("apiVersion", "kind", "metadata", "spec"):
            fail(str(key), "one of apiVersion, kind, metadata, spec", key)
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        fail("spec", "a mapping with variables (and optionally nodePool)", spec)
        raise errors.ValidationError(problems)
    for key in spec:
        if key not in ("nodePool", "variables"):
            fail(f"spec.{key}", "one of nodePool, variables", key)
    pool = spec.get("nodePool")
    if pool is not None and not _word(pool):
        fail("spec.nodePool", "the name of one of the input's NodePools", pool)
    raw_vars = spec.get("variables")
    variables: list[Variable] = []
    if not isinstance(raw_vars, Mapping) or not raw_vars:
        fail("spec.variables", "a non-empty mapping of variable name to values", raw_vars)
    else:
        for key, raw in raw_vars.items():
            kind = KINDS.get(str(key))
            path = f"spec.variables.{key}"
            if kind is None:
                fail(path, "a variable among " + ", ".join(KINDS), key)
                continue
            values = _values(kind, raw, path, fail)
            if values is not None:
                variables.append(Variable(kind.name, values))
    names = {v.name for v in variables}
    if "spotShare" in names and "capacityType" in names:
        fail("spec.variables.spotShare", "spotShare or capacityType, not both (spotShare splits the pool "
             "into a spot and an on-demand pool)", "both")
    if problems:
        raise errors.ValidationError(problems)
    order = list(KINDS)
    variables.sort(key=lambda v: order.index(v.name))
    return Space(name=name, source=source, nodepool=pool, variables=tuple(variables))


def _values(kind: VariableKind, raw: Any, path: str, fail: Callable[[str, str, Any], None]) -> tuple[Any, ...] | None:
    if isinstance(raw, Mapping):
        if kind.numeric is None:
            fail(path, f"a list of choices, each {kind.expected}", dict(raw))
            return None
        return _range(kind, raw, path, fail)
    if not isinstance(raw, list) or not raw:
        form = " or {min, max, step}" if kind.numeric else ""
        fail(path, f"a non-empty list of choices{form}, each {kind.expected}", raw)
        return None
    ok = True
    for i, v in enumerate(raw):
        if not kind.check(v):
            fail(f"{path}[{i}]", kind.expected, v)
            ok = False
    seen: dict[str, int] = {}
    for i, v in enumerate(raw):
        lab = label(v)
        if lab in seen:
            fail(f"{path}[{i}]", f"a choice different from {path}[{seen[lab]}]", v)
            ok = False
        seen.setdefault(lab, i)
    if not ok:
        return None
    if kind.name == "split":
        return tuple(raw)
    return tuple(json.loads(json.dumps(v)) for v in raw)


def _range(kind: VariableKind, raw: Mapping[str, Any], path: str,
           fail: Callable[[str, str, Any], None]) -> tuple[Any, ...] | None:
    assert kind.numeric is not None
    lo_limit, hi_limit = kind.numeric
    number = "an integer" if kind.integer else "a number"
    got: dict[str, float] = {}
    for key in raw:
        if key not in ("min", "max", "step"):
            fail(f"{path}.{key}", "one of min, max, step", key)
    for key in ("min", "max", "step"):
        v = raw.get(key)
        if not isinstance(v, int | float) or isinstance(v, bool) or (kind.integer and not isinstance(v, int)):
            fail(f"{path}.{key}", f"{number} (required)", v)
            continue
        got[key] = float(v)
    if len(got) < 3:
        return None
    lo, hi, step = got["min"], got["max"], got["step"]
    if not lo_limit <= lo <= hi_limit:
        fail(f"{path}.min", f"{number} from {lo_limit:g} to {hi_limit:g}", raw["min"])
        return None
    if not lo <= hi <= hi_limit:
        fail(f"{path}.max", f"{number} from min ({lo:g}) to {hi_limit:g}", raw["max"])
        return None
    if step <= 0 or (hi - lo) / step > 1000:
        fail(f"{path}.step", f"a positive step giving at most 1001 values from {lo:g} to {hi:g}", raw["step"])
        return None
    count = math.floor((hi - lo) / step + 1e-9) + 1
    if kind.integer:
        return tuple(int(lo + i * step) for i in range(count))
    return tuple(round(lo + i * step, 10) for i in range(count))
