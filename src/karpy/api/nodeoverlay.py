"""``karpenter.sh/v1alpha1`` NodeOverlay: price and capacity overrides of the instance types it selects.

Karpenter v1.14's NodeOverlay (feature gate ``NodeOverlay``, off by default) changes what the scheduling
simulation believes about instance types; karpy reads it field for field:

* ``requirements`` select instance types and offerings (capacity type, zone), like a NodePool's, plus
  ``karpenter.sh/nodepool`` and the NodePool's template labels; empty selects every type;
* ``price`` (an absolute override, ``"5.00"``) or ``priceAdjustment`` (``"+0.1"`` / ``"-0.1"`` absolute,
  ``"+10%"`` / ``"-10%"`` relative; never below 0), not both;
* ``capacity``: extended resources added to the selected types (``hugepages-2Mi``, ``smarter-devices/fuse``);
  ``cpu``, ``memory``, ``ephemeral-storage`` and ``pods`` are refused;
* ``weight`` (1 to 10000, unset = 0): higher weights win; equal weights that touch the same offering
  price or the same resource conflict (:mod:`karpy.cloudprovider.overlay`).

A caller may rely on: :meth:`NodeOverlay.from_manifest` raises :class:`karpy.api.errors.ValidationError`
on a wrong type; :func:`validate` returns every rule Karpenter's CRD and its runtime validation enforce
as :class:`karpy.api.errors.FieldError` values naming the object, the field, what was expected and what
was found; :func:`adjusted_price` is Karpenter's arithmetic; :func:`order_by_weight` Karpenter's order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import errors, fields, labels, meta, nodeclaim, quantity, selectors

API_VERSION = "karpenter.sh/v1alpha1"
KIND = "NodeOverlay"
GATE = "NodeOverlay"
"""The feature gate (Karpenter v1.14: off by default)."""

PRICE_OVERLAY_APPLIED = "karpenter.sh/price-overlay-applied"
CAPACITY_OVERLAY_APPLIED = "karpenter.sh/capacity-overlay-applied"
"""NodeClaim annotations: a type of the claim had its price / capacity changed by an overlay."""

VALIDATION_SUCCEEDED = "ValidationSucceeded"
READY = "Ready"
REASON_CONFLICT = "Conflict"
REASON_RUNTIME = "RuntimeValidation"
CONFLICT_MESSAGE = "conflict with another overlay"
"""Karpenter's status condition for an overlay that conflicts with another of the same weight."""

PRICE_PATTERN = re.compile(r"^\d+(\.\d+)?$")
ADJUSTMENT_PATTERN = re.compile(r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$")
"""Karpenter's CRD patterns: a percentage decrease is at most ``-100%``."""
PRICE_EXPECTED = "a non-negative decimal price such as '5.00'"
ADJUSTMENT_EXPECTED = ("a signed adjustment: '+0.5' / '-0.5' (absolute) or '+10%' / '-10%' (percent, "
                       "a decrease at most -100%)")
RESTRICTED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
MAX_REQUIREMENTS = 100
MIN_WEIGHT, MAX_WEIGHT = 1, 10_000
ALLOWED_KARPENTER_KEYS = (labels.CAPACITY_TYPE, labels.NODEPOOL)
INT_OPERATORS = ("Gt", "Lt", "Gte", "Lte")


@dataclass(frozen=True, slots=True)
class NodeOverlay:
    """One NodeOverlay; ``capacity`` in milli-units (:mod:`karpy.api.quantity`)."""

    metadata: meta.ObjectMeta
    requirements: tuple[selectors.NodeSelectorRequirement, ...] = ()
    price: str | None = None
    price_adjustment: str | None = None
    capacity: Mapping[str, int] = field(default_factory=dict)
    weight: int | None = None

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def effective_weight(self) -> int:
        """Karpenter's: an unset weight counts as 0."""
        return self.weight or 0

    @property
    def price_change(self) -> str | None:
        """``price`` or ``priceAdjustment`` (the one set), as :func:`adjusted_price` takes it."""
        return self.price if self.price is not None else self.price_adjustment

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any]) -> NodeOverlay:
        f = meta.reader(KIND, d)
        spec = f.sub("spec")
        return cls(
            metadata=meta.ObjectMeta.parse(f.sub("metadata"), namespaced=False),
            requirements=nodeclaim.parse_requirements(spec),
            price=_decimal_text(spec, "price"),
            price_adjustment=_decimal_text(spec, "priceAdjustment"),
            capacity=quantity.read_list(spec, "capacity"),
            weight=spec.int("weight"),
        )

    def to_manifest(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"requirements": [r.to_dict() for r in self.requirements]}
        if self.price is not None:
            spec["price"] = self.price
        if self.price_adjustment is not None:
            spec["priceAdjustment"] = self.price_adjustment
        if self.capacity:
            spec["capacity"] = quantity.format_list(self.capacity)
        if self.weight is not None:
            spec["weight"] = self.weight
        return {"apiVersion": API_VERSION, "kind": KIND, "metadata": self.metadata.to_dict(), "spec": spec}


def _decimal_text(f: fields.Fields, key: str) -> str | None:
    """A string field; a YAML number is taken as its text (``price: 5`` means ``"5"``)."""
    raw = f.data.get(key)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise f.fail(key, "a string", raw)
    return raw if isinstance(raw, str) else str(raw)


def label(o: NodeOverlay) -> str:
    return f"{KIND} {o.name}"


def validate(o: NodeOverlay) -> list[errors.FieldError]:
    """Every rule of Karpenter's NodeOverlay CRD and runtime validation that ``o`` breaks (empty when valid)."""
    obj = label(o)
    out: list[errors.FieldError] = []

    def add(path: str, expected: str, found: object) -> None:
        out.append(errors.FieldError(obj, path, expected, found))

    if o.price is not None and o.price_adjustment is not None:
        add("spec", "at most one of price and priceAdjustment (cannot set both 'price' and 'priceAdjustment')",
            {"price": o.price, "priceAdjustment": o.price_adjustment})
    if o.price is not None and not PRICE_PATTERN.match(o.price):
        add("spec.price", PRICE_EXPECTED, o.price)
    if o.price_adjustment is not None and not ADJUSTMENT_PATTERN.match(o.price_adjustment):
        add("spec.priceAdjustment", ADJUSTMENT_EXPECTED, o.price_adjustment)
    if o.weight is not None and not MIN_WEIGHT <= o.weight <= MAX_WEIGHT:
        add("spec.weight", f"an integer from {MIN_WEIGHT} to {MAX_WEIGHT} (unset: 0)", o.weight)
    for name in o.capacity:
        if name in RESTRICTED_RESOURCES:
            add(f"spec.capacity.{name}", "an extended resource (not cpu, memory, ephemeral-storage or pods: "
                "invalid resource restricted)", name)
    out.extend(_requirement_errors(obj, o.requirements))
    return out


def _requirement_errors(obj: str, reqs: Sequence[selectors.NodeSelectorRequirement]) -> list[errors.FieldError]:
    from karpy.api import validation

    out: list[errors.FieldError] = []
    if len(reqs) > MAX_REQUIREMENTS:
        out.append(errors.FieldError(obj, "spec.requirements", f"at most {MAX_REQUIREMENTS} requirements",
                                     len(reqs)))
    for i, r in enumerate(reqs):
        at = f"spec.requirements[{i}]"
        problem = validation.qualified_name_problem(r.key)
        normalized = labels.NORMALIZED_LABELS.get(r.key, r.key)
        if problem:
            out.append(errors.FieldError(obj, f"{at}.key", problem, r.key))
        elif normalized not in ALLOWED_KARPENTER_KEYS and labels.is_restricted(normalized):
            out.append(errors.FieldError(obj, f"{at}.key", validation.RESTRICTED_KEY_EXPECTED, r.key))
        if r.min_values is not None:
            out.append(errors.FieldError(obj, f"{at}.minValues", "no minValues (a NodeOverlay requirement "
                                         "has key, operator and values)", r.min_values))
        if r.operator in ("In", "NotIn") and not r.values:
            out.append(errors.FieldError(obj, f"{at}.values", f"at least one value for operator {r.operator} "
                                         f"(key {r.key})", []))
        elif r.operator in ("Exists", "DoesNotExist") and r.values:
            out.append(errors.FieldError(obj, f"{at}.values", f"no values for operator {r.operator} (key {r.key})",
                                         list(r.values)))
        elif r.operator in INT_OPERATORS and (len(r.values) != 1 or not r.values[0].isdigit()):
            out.append(errors.FieldError(obj, f"{at}.values", "a single positive integer value for operator "
                                         f"{r.operator} (key {r.key})", list(r.values)))
        if r.operator not in INT_OPERATORS:
            for j, v in enumerate(r.values):
                bad = validation.label_value_problem(v)
                if bad:
                    out.append(errors.FieldError(obj, f"{at}.values[{j}]", bad, v))
    return out


def adjusted_price(price: float, change: str | None) -> float:
    """Karpenter's ``AdjustedPrice``: ``change`` unsigned is the new price; ``+x`` / ``-x`` adds; ``+x%`` /
    ``-x%`` scales; the result is never below 0. ``None`` or ``""`` leaves ``price`` as it is."""
    if not change:
        return price
    if change[0] not in "+-":
        return float(change)
    if change.endswith("%"):
        out = price * (1 + float(change[:-1]) / 100)
    else:
        out = price + float(change)
    return out if out >= 0 else 0.0


def order_by_weight(overlays: Iterable[NodeOverlay]) -> list[NodeOverlay]:
    """Karpenter's ``OrderByWeight``: higher weight first; equal weights by name, later in the alphabet first."""
    return sorted(overlays, key=lambda o: (-o.effective_weight, _Reverse(o.name)))


class _Reverse:
    """Sorts strings in reverse order inside an ascending sort key."""

    __slots__ = ("s",)

    def __init__(self, s: str) -> None:
        self.s = s

    def __lt__(self, other: _Reverse) -> bool:
        return self.s > other.s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reverse) and self.s == other.s

    def __hash__(self) -> int:
        return hash(self.s)
