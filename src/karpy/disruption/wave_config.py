"""karpy's drift wave annotations on a NodePool: what they say, read without I/O.

Two ``metadata.annotations`` of a ``karpenter.sh/v1`` NodePool (karpy's API, not Karpenter's; see
``docs/drift-waves.md`` and :mod:`karpy.disruption.waves`, which rolls drift out by them):

* :data:`MAX_SURGE` (``karpy.io/drift-max-surge``): the drifted nodes one wave takes, so the
  replacement nodes in flight at once: ``"3"``, or a percentage of the pool's nodes (``"25%"``,
  rounded up, never below 1), as a Deployment's ``maxSurge``;
* :data:`WAVE_SETTLE` (``karpy.io/drift-wave-settle``): a Go duration (``"2m"``) the next wave waits
  once the previous one is done; ``0s`` when absent.

:func:`parse` gives the :class:`Config` and the problems (each a :class:`karpy.api.errors.FieldError`
naming object, field, expected and found); a field karpy cannot read keeps its default
(:func:`default_kept`). :func:`wave_size`: the stricter of max surge and the ``Drifted`` budget.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import duration
from karpy.api import errors as api_errors
from karpy.api import nodepool as nodepool_mod

MAX_SURGE = "karpy.io/drift-max-surge"
WAVE_SETTLE = "karpy.io/drift-wave-settle"
EXPECTED_SURGE = "a positive whole number of nodes (\"3\") or a percentage of the NodePool's nodes (\"1%\"-\"100%\")"
EXPECTED_SETTLE = "a non-negative duration such as \"0s\", \"90s\" or \"2m\""
DEFAULT_SURGE = "1"
"""Without a readable max surge (a settle given): waves of one drifted node."""
_SURGE = re.compile(r"\s*([0-9]{1,9})(%?)\s*")


@dataclass(frozen=True, slots=True)
class Config:
    """A NodePool's wave settings (read by :func:`parse`)."""

    max_surge: str = DEFAULT_SURGE
    """``"3"`` or ``"25%"`` (validated)."""
    settle: float = 0.0
    """Seconds between a wave being done and the next one starting."""

    def surge(self, total: int) -> int:
        """The nodes one wave may take out of a NodePool of ``total`` nodes (see :func:`surge_nodes`)."""
        return surge_nodes(self.max_surge, total)


def surge_nodes(text: str, total: int) -> int:
    """``"3"`` -> 3; ``"25%"`` -> ceil(25% of ``total``), at least 1. Raises ``ValueError`` on anything else."""
    m = _SURGE.fullmatch(text)
    if m is None:
        raise ValueError(f"expected {EXPECTED_SURGE}, found {text!r}")
    value = int(m.group(1))
    if m.group(2):
        if not 1 <= value <= 100:
            raise ValueError(f"expected {EXPECTED_SURGE}, found {text!r}")
        return max(1, math.ceil(value * total / 100))
    if value < 1:
        raise ValueError(f"expected {EXPECTED_SURGE}, found {text!r}")
    return value


def wave_size(surge: int, budget_allowed: int, drifted: int) -> int:
    """How many drifted nodes the next wave takes: the stricter of max surge and the budget, at most all."""
    return max(0, min(surge, budget_allowed, drifted))


def parse(pool: str, annotations: Mapping[str, str]) -> tuple[Config | None, list[api_errors.FieldError]]:
    """``pool``'s :class:`Config` (None when neither annotation is set, or neither can be read) and the
    problems found (each field that cannot be read keeps its default)."""
    surge_text = annotations.get(MAX_SURGE)
    settle_text = annotations.get(WAVE_SETTLE)
    if surge_text is None and settle_text is None:
        return None, []
    obj = f"{nodepool_mod.KIND} {pool}"
    problems: list[api_errors.FieldError] = []
    surge: str | None = None
    settle: float | None = None
    if surge_text is not None:
        try:
            surge_nodes(surge_text, 1)
            surge = surge_text.strip()
        except ValueError:
            problems.append(api_errors.FieldError(obj, f"metadata.annotations.{MAX_SURGE}", EXPECTED_SURGE,
                                                  surge_text))
    if settle_text is not None:
        try:
            settle = duration.parse_duration(settle_text)
        except ValueError:
            settle = None
        if settle is None:  # "Never" is not a settle time either
            problems.append(api_errors.FieldError(obj, f"metadata.annotations.{WAVE_SETTLE}", EXPECTED_SETTLE,
                                                  settle_text))
    if surge is None and settle is None:
        return None, problems
    return Config(max_surge=surge or DEFAULT_SURGE, settle=settle or 0.0), problems


def default_kept(problem: api_errors.FieldError) -> str:
    """What karpy does instead of a value it cannot read."""
    if problem.path.endswith(MAX_SURGE):
        return "the annotation is ignored (no max surge: waves of one drifted node)"
    return "the annotation is ignored (the next wave starts as soon as the previous one is done: 0s)"


def annotations_of(manifest: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The two wave annotations of a NodePool manifest as written (None when absent)."""
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    if not isinstance(annotations, Mapping):
        return None, None
    surge, settle = annotations.get(MAX_SURGE), annotations.get(WAVE_SETTLE)
    return (None if surge is None else str(surge)), (None if settle is None else str(settle))


def problems_of(manifests: Iterable[Mapping[str, Any]]) -> list[str]:
    """The wave annotation problems of the NodePool manifests among ``manifests`` (``karpy simulate``'s
    warnings), each with the default kept."""
    out: list[str] = []
    for m in manifests:
        if m.get("kind") != nodepool_mod.KIND:
            continue
        md = m.get("metadata") or {}
        annotations = md.get("annotations") or {}
        if not isinstance(annotations, Mapping):
            continue
        _, problems = parse(str(md.get("name", "")), {str(k): str(v) for k, v in annotations.items()})
        out.extend(f"{p}; {default_kept(p)}" for p in problems)
    return out
