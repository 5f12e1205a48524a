"""Node selector requirements and label selectors, with Kubernetes' matching semantics.

* :class:`NodeSelectorRequirement` / :class:`NodeSelectorTerm`: ``nodeAffinity`` terms and
  Karpenter's NodePool ``requirements`` (which add ``Gte``/``Lte`` and ``minValues``). This module
  only reads and writes them; requirement algebra lives in the scheduling package.
* :class:`LabelSelector`: ``matchLabels`` + ``matchExpressions`` as used by workloads, PDBs, pod
  affinity and topology spread. :meth:`LabelSelector.matches` follows Kubernetes: every
  ``matchLabels`` pair and every expression must hold; an *empty* selector matches every object.
  An *absent* selector (``None`` from :func:`parse_optional`) is different: for a
  PodDisruptionBudget (policy/v1), a pod affinity term and a topology spread constraint it
  selects **no** pods, and callers must treat ``None`` that way.
* :func:`parse_selector_string`: kubectl's ``-l`` syntax (``app=web,tier!=db,env in (a,b),!legacy``).

Selectors are frozen and hashable so the scheduler may group pods by them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import errors, fields

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
"""Operators of a node selector requirement (Kubernetes' six plus Karpenter's ``Gte``/``Lte``)."""

LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
"""Operators of a label selector requirement."""


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """``{key, operator, values, minValues}``; ``values`` are strings (YAML numbers are converted)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    min_values: int | None = None

    @staticmethod
    def parse(f: fields.Fields) -> NodeSelectorRequirement:
        operator = f.req_str("operator")
        if operator not in OPERATORS:
            raise f.fail("operator", "one of " + ", ".join(OPERATORS), operator)
        return NodeSelectorRequirement(
            key=f.req_str("key"),
            operator=operator,
            values=tuple(f.str_list("values")),
            min_values=f.int("minValues"),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        if self.min_values is not None:
            out["minValues"] = self.min_values
        return out


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of ``nodeSelectorTerms``: its expressions are ANDed (terms are ORed by the caller)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    @staticmethod
    def parse(f: fields.Fields) -> NodeSelectorTerm:
        return NodeSelectorTerm(
            match_expressions=tuple(NodeSelectorRequirement.parse(e) for e in f.items("matchExpressions")),
            match_fields=tuple(NodeSelectorRequirement.parse(e) for e in f.items("matchFields")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.match_expressions:
            out["matchExpressions"] = [e.to_dict() for e in self.match_expressions]
        if self.match_fields:
            out["matchFields"] = [e.to_dict() for e in self.match_fields]
        return out


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    """``{key, operator, values}`` with operator ``In``, ``NotIn``, ``Exists`` or ``DoesNotExist``."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @staticmethod
    def parse(f: fields.Fields) -> LabelSelectorRequirement:
        operator = f.req_str("operator")
        if operator not in LABEL_SELECTOR_OPERATORS:
            raise f.fail("operator", "one of " + ", ".join(LABEL_SELECTOR_OPERATORS), operator)
        return LabelSelectorRequirement(
            key=f.req_str("key"), operator=operator, values=tuple(f.str_list("values"))
        )

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op == "NotIn":
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == "Exists":
            return self.key in labels
        return self.key not in labels  # DoesNotExist

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out

    def __str__(self) -> str:
        if self.operator == "Exists":
            return self.key
        if self.operator == "DoesNotExist":
            return "!" + self.key
        op = "in" if self.operator == "In" else "notin"
        return f"{self.key} {op} ({','.join(self.values)})"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """``matchLabels`` and ``matchExpressions``, all ANDed. Empty matches everything.

    ``match_labels`` must be treated as read-only; the selector hashes by its sorted items.
    """

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.match_labels.items())), self.match_expressions))

    @property
    def is_empty(self) -> bool:
        """True when the selector has no conditions and so matches every object."""
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        for k, v in self.match_labels.items():
            if labels.get(k) != v:
                return False
        return all(e.matches(labels) for e in self.match_expressions)

    @staticmethod
    def parse(f: fields.Fields) -> LabelSelector:
        return LabelSelector(
            match_labels=f.str_map("matchLabels"),
            match_expressions=tuple(LabelSelectorRequirement.parse(e) for e in f.items("matchExpressions")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.match_labels:
            out["matchLabels"] = dict(self.match_labels)
        if self.match_expressions:
            out["matchExpressions"] = [e.to_dict() for e in self.match_expressions]
        return out

    def __str__(self) -> str:
        """kubectl syntax, accepted back by :func:`parse_selector_string`."""
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        parts.extend(str(e) for e in self.match_expressions)
        return ",".join(parts)


EVERYTHING = LabelSelector()
"""The empty selector: matches every object."""


def parse_optional(f: fields.Fields, key: str) -> LabelSelector | None:
    """The selector at ``key`` of ``f``, or ``None`` when absent (or null).

    ``None`` selects **nothing** for PodDisruptionBudgets (policy/v1), pod (anti-)affinity terms and
    topology spread constraints; ``{}`` (present but empty) selects everything.
    """
    if f.raw(key) is None:
        return None
    return LabelSelector.parse(f.sub(key))


_SET_TERM = re.compile(r"^\s*([^\s!=<>(),]+)\s+(in|notin)\s*\(([^()]*)\)\s*$")
_EQ_TERM = re.compile(r"^\s*([^\s!=<>(),]+)\s*(==|=|!=)\s*([^\s!=<>(),]*)\s*$")
_EXISTS_TERM = re.compile(r"^\s*(!?)\s*([^\s!=<>(),]+)\s*$")


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def parse_selector_string(text: str) -> LabelSelector:
    """kubectl's label selector syntax: ``app=web,tier!=db,env in (a,b),env notin (c),!legacy,gpu``.

    ``k=v`` and ``k==v`` become ``matchLabels``; ``k!=v`` is ``NotIn`` (matches objects without
    ``k``). An empty string is the empty selector (matches everything). Raises
    :class:`errors.ValidationError` naming the offending term.
    """
    obj = f"label selector {text!r}"
    labels: dict[str, str] = {}
    exprs: list[LabelSelectorRequirement] = []
    if not text.strip():
        return LabelSelector()
    for i, term in enumerate(_split_terms(text)):
        if m := _SET_TERM.match(term):
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            op = "In" if m.group(2) == "in" else "NotIn"
            exprs.append(LabelSelectorRequirement(m.group(1), op, values))
        elif m := _EQ_TERM.match(term):
            key, op, value = m.group(1), m.group(2), m.group(3)
            if op == "!=":
                exprs.append(LabelSelectorRequirement(key, "NotIn", (value,)))
            elif key in labels and labels[key] != value:
                # two different equalities on one key can never both hold; keep both as In terms
                exprs.append(LabelSelectorRequirement(key, "In", (value,)))
            else:
                labels[key] = value
        elif m := _EXISTS_TERM.match(term):
            op = "DoesNotExist" if m.group(1) else "Exists"
            exprs.append(LabelSelectorRequirement(m.group(2), op))
        else:
            raise errors.ValidationError.single(
                obj, f"term {i}", "key=value, key!=value, key in (a,b), key notin (a,b), key or !key", term
            )
    return LabelSelector(match_labels=labels, match_expressions=tuple(exprs))
