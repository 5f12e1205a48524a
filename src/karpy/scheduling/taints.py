"""Taints and tolerations with Kubernetes' matching rules, as the scheduler's hard filter.

A toleration matches a taint when (Kubernetes ``Toleration.ToleratesTaint``):

* its effect is empty (matches every effect) or equal to the taint's, and
* its key is empty (matches every key; only valid with ``Exists``) or equal to the taint's, and
* its operator is ``Exists``, or ``Equal`` / empty with an equal value.

Any other operator matches nothing. ``PreferNoSchedule`` taints are soft: :func:`first_untolerated`
ignores them by default; the scheduler relaxes a pod by first passing :data:`ALL_EFFECTS` (treating
them as hard) and then dropping back to :data:`HARD_EFFECTS`.

The functions take anything with the right attributes (:class:`TolerationLike`, :class:`TaintLike`),
so they work on ``karpy.api`` objects and on test doubles alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"

EXISTS = "Exists"
EQUAL = "Equal"

HARD_EFFECTS: tuple[str, ...] = (NO_SCHEDULE, NO_EXECUTE)
"""Effects that keep a pod off a node."""
ALL_EFFECTS: tuple[str, ...] = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)
"""Hard effects plus ``PreferNoSchedule``, for the scheduler's strict first attempt."""


class TolerationLike(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def operator(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def effect(self) -> str: ...


class TaintLike(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def effect(self) -> str: ...


TaintT = TypeVar("TaintT", bound=TaintLike)


def toleration_matches(toleration: TolerationLike, taint: TaintLike) -> bool:
    """True when this one toleration tolerates ``taint``."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    op = toleration.operator
    if op == EXISTS:
        return True
    if op in (EQUAL, ""):
        return toleration.value == taint.value
    return False


def tolerates(tolerations: Iterable[TolerationLike], taint: TaintLike) -> bool:
    """True when some toleration in ``tolerations`` tolerates ``taint``."""
    return any(toleration_matches(t, taint) for t in tolerations)


def first_untolerated(tolerations: Sequence[TolerationLike], taints: Iterable[TaintT],
                      effects: Sequence[str] = HARD_EFFECTS) -> TaintT | None:
    """The first taint with an effect in ``effects`` that no toleration tolerates, or ``None``."""
    for taint in taints:
        if taint.effect in effects and not tolerates(tolerations, taint):
            return taint
    return None


def untolerated(tolerations: Sequence[TolerationLike], taints: Iterable[TaintT],
                effects: Sequence[str] = HARD_EFFECTS) -> list[TaintT]:
    """Every taint with an effect in ``effects`` that no toleration tolerates, in order."""
    return [t for t in taints if t.effect in effects and not tolerates(tolerations, t)]


def describe(taint: TaintLike) -> str:
    """``key=value:Effect`` (``key:Effect`` when the value is empty), as ``kubectl`` prints it."""
    if taint.value:
        return f"{taint.key}={taint.value}:{taint.effect}"
    return f"{taint.key}:{taint.effect}"


def reason(taint: TaintLike) -> str:
    """The user-facing reason for a pod that does not tolerate ``taint``."""
    return f"did not tolerate taint {describe(taint)}"


def same_taint(a: TaintLike, b: TaintLike) -> bool:
    """Kubernetes ``MatchTaint``: same key and effect (a node holds at most one such taint)."""
    return a.key == b.key and a.effect == b.effect


def merge(taints: Iterable[TaintT], extra: Iterable[TaintT]) -> list[TaintT]:
    """``taints`` followed by each taint of ``extra`` whose key and effect are not already present."""
    out = list(taints)
    seen = {(t.key, t.effect) for t in out}
    for t in extra:
        if (t.key, t.effect) not in seen:
            seen.add((t.key, t.effect))
            out.append(t)
    return out
