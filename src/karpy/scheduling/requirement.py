"""One node selector requirement as a set: what values one label key may take on a node.

:mod:`karpy.scheduling.requirements` combines them per key into :class:`Requirements`.

This is the core of Karpenter's scheduling: a NodePool, a NodeClaim, an instance type and a pod
each constrain node labels, and a pod fits a node shape when the constraints on every shared key
still admit something. A :class:`Requirement` is the set of values one key may take (plus whether
the label may be *absent*); :class:`Requirements` maps keys to requirements.

What a caller may rely on:

* Both classes are immutable, hashable and compared by value, so they can key caches.
* ``Requirement.new`` accepts the Kubernetes operators ``In``, ``NotIn``, ``Exists``,
  ``DoesNotExist``, ``Gt``, ``Lt`` and Karpenter's ``Gte`` / ``Lte`` (``Gte n`` is ``Gt n-1``), and
  normalises deprecated keys (``failure-domain.beta.kubernetes.io/zone`` -> ``topology...``).
* Integer bounds (``Gt`` / ``Lt``) only admit values that parse as integers (Go ``strconv.Atoi``
  syntax: optional sign, decimal digits); every other value fails them.
* Intersection is commutative, associative and idempotent, and ``(a & b).has(v)`` is exactly
  ``a.has(v) and b.has(v)`` (the property tests check these laws).
* ``compatible`` / ``intersects`` return ``None`` when fine, otherwise a reason a user can act on.

Where karpy is *more exact* than Karpenter (Karpenter derives "may the label be absent" from the
operator of the combined requirement; karpy tracks it as a flag, which changes only corner cases):

1. ``Exists`` and ``NotIn [a]`` on the same key combine, in Karpenter, to ``NotIn [a]``, which then
   admits an absent label again; karpy keeps "must exist" (rendered ``Exists NotIn [a]``), so a
   ``DoesNotExist`` on the other side does not intersect it.
2. ``In []`` (e.g. ``In [a]`` combined with ``In [b]`` or ``DoesNotExist``) is, in Karpenter, a
   ``DoesNotExist`` and so "negative": two such sides always intersect. In karpy it admits nothing
   and intersects nothing.
3. Bounds that leave no integer (``Gt 4`` with ``Lt 5``) admit nothing in karpy; Karpenter only
   notices when ``gt >= lt``.

With requirements built from one operator each (what NodePools and pods write) the rule
"``a.intersects(b)`` is ``None`` iff ``a & b`` admits some value or absence" coincides with
Karpenter's "some value, or both sides are ``NotIn`` / ``DoesNotExist``" except for case 3.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterable

from karpy.api import labels

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
GTE = "Gte"
LTE = "Lte"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)
"""Every operator :meth:`Requirement.new` accepts."""

INFINITE = sys.maxsize
"""``len()`` of a requirement admitting unboundedly many values is ``INFINITE - len(excluded)``."""

_EMPTY: frozenset[str] = frozenset()
_INT_RE = re.compile(r"[+-]?[0-9]+")
DESCRIBE_MAX = 5


@functools.lru_cache(maxsize=16384)
def parse_int(value: str) -> int | None:
    """``value`` as an integer the way Go's ``strconv.Atoi`` reads it, or ``None``."""
    if _INT_RE.fullmatch(value) is None:
        return None
    return int(value)


def _within(value: str, gt: int | None, lt: int | None) -> bool:
    if gt is None and lt is None:
        return True
    n = parse_int(value)
    if n is None:
        return False
    return (gt is None or n > gt) and (lt is None or n < lt)


def _render_values(values: Iterable[str], max_values: int | None) -> str:
    ordered = sorted(values)
    if max_values is not None and len(ordered) > max_values:
        extra = len(ordered) - max_values
        ordered = [*ordered[:max_values], f"and {extra} others"]
    return "[" + " ".join(ordered) + "]"


class Requirement:
    """The values one label key may take on a node, and whether the label may be absent.

    ``complement`` False: exactly ``values`` are admitted (an "In set"; integer bounds are already
    applied and dropped). ``complement`` True: every value except ``values`` is admitted, within the
    exclusive integer bounds ``greater_than`` / ``less_than`` when set. Build with :meth:`new`.
    """

    __slots__ = ("_absent", "complement", "greater_than", "key", "less_than", "min_values", "values")

    key: str
    complement: bool
    values: frozenset[str]
    greater_than: int | None
    less_than: int | None
    min_values: int | None
    _absent: bool

    def __init__(self) -> None:
        raise TypeError("build a Requirement with Requirement.new(key, operator, values)")

    @classmethod
    def new(cls, key: str, operator: str, values: Iterable[str] = (),
            min_values: int | None = None) -> Requirement:
        """A requirement from a Kubernetes ``NodeSelectorRequirement`` (plus Karpenter's extras).

        Raises ``ValueError`` naming the operator and values when they do not fit together.
        """
        key = labels.NORMALIZED_LABELS.get(key, key)
        vals = values if isinstance(values, frozenset) else frozenset(values)
        if min_values is not None and (isinstance(min_values, bool) or min_values < 1):
            raise ValueError(f"minValues for key {key} must be a positive integer, got {min_values!r}")
        if operator == IN:
            return make(key, False, vals, None, None, min_values, False)
        if operator == NOT_IN:
            if not vals:
                raise ValueError(f"operator NotIn on key {key} needs at least one value, got []")
            return make(key, True, vals, None, None, min_values, True)
        if operator in (EXISTS, DOES_NOT_EXIST):
            if vals:
                raise ValueError(f"operator {operator} on key {key} takes no values, got "
                                 f"{_render_values(vals, None)}")
            if operator == EXISTS:
                return make(key, True, _EMPTY, None, None, min_values, False)
            return make(key, False, _EMPTY, None, None, min_values, True)
        if operator in (GT, LT, GTE, LTE):
            n = parse_int(next(iter(vals))) if len(vals) == 1 else None
            if n is None:
                raise ValueError(f"operator {operator} on key {key} needs exactly one integer value, got "
                                 f"{_render_values(vals, None)}")
            if operator == GT:
                return make(key, True, _EMPTY, n, None, min_values, False)
            if operator == GTE:
                return make(key, True, _EMPTY, n - 1, None, min_values, False)
            if operator == LT:
                return make(key, True, _EMPTY, None, n, min_values, False)
            return make(key, True, _EMPTY, None, n + 1, min_values, False)
        raise ValueError(f"unknown operator {operator!r} on key {key}; "
                         f"expected one of {', '.join(OPERATORS)}")

    # -- queries -------------------------------------------------------------------------------

    def has(self, value: str) -> bool:
        """True when a node labelled ``key=value`` satisfies the requirement."""
        if self.complement:
            return value not in self.values and _within(value, self.greater_than, self.less_than)
        return value in self.values

    def admits_absence(self) -> bool:
        """True when a node *without* the label satisfies the requirement (DoesNotExist, NotIn)."""
        return self._absent

    def admits_value(self) -> bool:
        """True when some label value satisfies the requirement (``len(self) > 0``)."""
        return self.complement or bool(self.values)

    def is_empty(self) -> bool:
        """True when nothing satisfies the requirement: no value, and the label may not be absent."""
        return not self.complement and not self.values and not self._absent

    def __len__(self) -> int:
        """How many values are admitted; Karpenter's "infinite" ``INFINITE - len(values)`` for complements.

        A complement with bounds is infinite too: ``5``, ``05`` and ``005`` are distinct label values.
        """
        if self.complement:
            return INFINITE - len(self.values)
        return len(self.values)

    def operator(self) -> str:
        """Karpenter's operator for the set: ``In``, ``NotIn``, ``Exists`` or ``DoesNotExist``.

        ``Gt`` / ``Lt`` bounds render as ``Exists`` (with bounds); an ``In`` set that admits nothing
        (not even absence) is ``In`` with no values.
        """
        if self.complement:
            return NOT_IN if self.values else EXISTS
        if self.values or not self._absent:
            return IN
        return DOES_NOT_EXIST

    def is_negative(self) -> bool:
        """Same as :meth:`admits_absence`: the ``NotIn`` / ``DoesNotExist`` forms."""
        return self._absent

    def any(self) -> str | None:
        """Some admitted value (deterministic: the smallest for ``In``), or ``None`` if there is none."""
        if not self.complement:
            return min(self.values) if self.values else None
        gt, lt, excluded = self.greater_than, self.less_than, self.values
        if gt is not None:
            n, step = gt + 1, 1
        elif lt is not None:
            n, step = min(0, lt - 1), -1
        else:
            n, step = 0, 1
        first = n
        for _ in range(len(excluded) + 1):
            if (lt is not None and n >= lt) or (gt is not None and n <= gt):
                break
            if str(n) not in excluded:
                return str(n)
            n += step
        # Every plain spelling in a short range is excluded: "05" is another value for 5.
        for zeros in range(1, len(excluded) + 2):
            candidate = "0" * zeros + str(first) if first >= 0 else "-" + "0" * zeros + str(-first)
            if candidate not in excluded:
                return candidate
        return None  # pragma: no cover - unreachable: excluded is finite

    def values_sorted(self) -> tuple[str, ...]:
        """The listed values (admitted for ``In``, excluded for ``NotIn``), sorted."""
        return tuple(sorted(self.values))

    # -- algebra -------------------------------------------------------------------------------

    def intersection(self, other: Requirement) -> Requirement:
        """Values admitted by both; bounds merge; ``min_values`` is the larger of the two."""
        if other is self:
            return self
        if other.key != self.key:
            raise ValueError(f"cannot intersect requirements on different keys {self.key} and {other.key}")
        gt = self.greater_than
        if other.greater_than is not None and (gt is None or other.greater_than > gt):
            gt = other.greater_than
        lt = self.less_than
        if other.less_than is not None and (lt is None or other.less_than < lt):
            lt = other.less_than
        mv = self.min_values
        if other.min_values is not None and (mv is None or other.min_values > mv):
            mv = other.min_values
        absent = self._absent and other._absent
        if self.complement:
            if other.complement:
                return make(self.key, True, self.values | other.values, gt, lt, mv, absent)
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        if (gt is not None or lt is not None) and values:
            values = frozenset(v for v in values if _within(v, gt, lt))
        # The result is a subset of every In-set operand: equal sizes mean equal sets, so reuse it.
        n = len(values)
        if not self.complement and n == len(self.values) and absent is self._absent and mv == self.min_values:
            return self
        if (not other.complement and n == len(other.values) and absent is other._absent
                and mv == other.min_values):
            return other
        return make(self.key, False, values, None, None, mv, absent)

    __and__ = intersection

    def overlaps(self, other: Requirement) -> bool:
        """``not self.intersection(other).is_empty()``, without building the intersection."""
        if self._absent and other._absent:
            return True
        if self.complement:
            if other.complement:
                gt = self.greater_than
                if other.greater_than is not None and (gt is None or other.greater_than > gt):
                    gt = other.greater_than
                lt = self.less_than
                if other.less_than is not None and (lt is None or other.less_than < lt):
                    lt = other.less_than
                return gt is None or lt is None or lt - gt > 1
            return any(self.has(v) for v in other.values)
        if other.complement:
            return any(other.has(v) for v in self.values)
        return not self.values.isdisjoint(other.values)

    # -- rendering -----------------------------------------------------------------------------

    def describe(self, max_values: int | None = None) -> str:
        """A human form: ``In [a b]``, ``NotIn [x]``, ``Exists``, ``DoesNotExist``, ``Gt 4 Lt 16``.

        With ``max_values``, longer value lists end in ``and N others``.
        """
        if not self.complement:
            if self.values or not self._absent:
                return "In " + _render_values(self.values, max_values)
            return DOES_NOT_EXIST
        if self._absent:
            return "NotIn " + _render_values(self.values, max_values)
        parts: list[str] = []
        if self.greater_than is not None:
            parts.append(f"Gt {self.greater_than}")
        if self.less_than is not None:
            parts.append(f"Lt {self.less_than}")
        if not parts:
            parts.append(EXISTS)
        if self.values:
            parts.append("NotIn " + _render_values(self.values, max_values))
        return " ".join(parts)

    def to_node_selector_requirement(self) -> tuple[str, str, tuple[str, ...]]:
        """``(key, operator, values)`` for a NodeClaim spec, choosing the one term Karpenter writes.

        Bounds win (``Gt`` first, then ``Lt``), then ``NotIn`` / ``Exists`` / ``In`` /
        ``DoesNotExist``. Use :meth:`to_node_selector_requirements` to lose nothing.
        """
        if self.greater_than is not None:
            return (self.key, GT, (str(self.greater_than),))
        if self.less_than is not None:
            return (self.key, LT, (str(self.less_than),))
        return (self.key, self.operator(), self.values_sorted())

    def to_node_selector_requirements(self) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
        """The terms whose conjunction is exactly this requirement (``Gt`` and ``Lt`` and ``NotIn``)."""
        if not self.complement or self._absent:
            return ((self.key, self.operator(), self.values_sorted()),)
        terms: list[tuple[str, str, tuple[str, ...]]] = []
        if self.greater_than is not None:
            terms.append((self.key, GT, (str(self.greater_than),)))
        if self.less_than is not None:
            terms.append((self.key, LT, (str(self.less_than),)))
        if not terms:
            terms.append((self.key, EXISTS, ()))
        if self.values:
            terms.append((self.key, NOT_IN, self.values_sorted()))
        return tuple(terms)

    def __repr__(self) -> str:
        mv = f" minValues {self.min_values}" if self.min_values is not None else ""
        return f"<Requirement {self.key} {self.describe(DESCRIBE_MAX)}{mv}>"

    # -- identity ------------------------------------------------------------------------------

    def _state(self) -> tuple[str, bool, frozenset[str], int | None, int | None, int | None, bool]:
        return (self.key, self.complement, self.values, self.greater_than, self.less_than,
                self.min_values, self._absent)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, Requirement):
            return NotImplemented
        return self._state() == other._state()

    def __hash__(self) -> int:
        return hash(self._state())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Requirement is immutable (tried to set {name})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Requirement is immutable (tried to delete {name})")

    def __reduce__(self) -> tuple[object, ...]:
        return (make, self._state())


_set = object.__setattr__


def make(key: str, complement: bool, values: frozenset[str], gt: int | None,
          lt: int | None, min_values: int | None, absent: bool) -> Requirement:
    """Build a requirement in canonical form (the form ``__eq__`` compares).

    Positional on purpose: this runs in the scheduler's inner loop (every intersection).
    """
    if gt is not None or lt is not None:
        if gt is not None and lt is not None and lt - gt <= 1:
            # No integer lies strictly between the bounds: nothing is admitted.
            complement, values, gt, lt = False, _EMPTY, None, None
        elif values:
            values = frozenset(v for v in values if _within(v, gt, lt))
        if not complement:
            gt = lt = None
    r = object.__new__(Requirement)
    _set(r, "key", key)
    _set(r, "complement", complement)
    _set(r, "values", values)
    _set(r, "greater_than", gt)
    _set(r, "less_than", lt)
    _set(r, "min_values", min_values)
    _set(r, "_absent", absent)
    return r


def min_values_satisfied(req: Requirement, values_present: Iterable[str]) -> bool:
    """True when ``values_present`` holds at least ``req.min_values`` distinct values ``req`` admits."""
    if req.min_values is None:
        return True
    return len({v for v in values_present if req.has(v)}) >= req.min_values
