"""Draining that never ends is visible.

Karpenter waits for a ``karpenter.sh/do-not-disrupt`` pod on a Node being terminated; when the
NodeClaim has no ``terminationGracePeriod`` nothing ever forces it out, and the Node drains forever.
A caller may rely on:

* :func:`blocking` lists the pods of ``waiting`` that hold the drain that way (protected from
  eviction, and no termination deadline);
* :func:`message` says which pods, since when, and why (a Warning ``FailedDraining`` event on the
  Node); the duration is rounded to a step of :data:`STEPS` so that the event aggregates and a new
  one appears only as the wait grows (5m, 15m, 30m, 1h, 2h, 4h, ...).
"""

from __future__ import annotations

from collections.abc import Iterable

from karpy.api import duration
from karpy.api import pod as pod_mod

STEPS = (0.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 57600.0, 86400.0)


def blocking(waiting: Iterable[pod_mod.Pod], now: float, expiry: float | None) -> list[pod_mod.Pod]:
    """The waiting pods nothing will ever evict: protected by do-not-disrupt, with no deadline."""
    if expiry is not None:
        return []
    return [p for p in waiting if not p.is_terminating and p.protected(now)]


def rounded_age(seconds: float) -> float:
    """``seconds`` down to the last step of :data:`STEPS` (then whole days)."""
    if seconds >= STEPS[-1]:
        return seconds - seconds % 86400.0
    return max(s for s in STEPS if s <= max(0.0, seconds))


def message(node: str, pods: list[pod_mod.Pod], since: float | None, now: float) -> str:
    names = ", ".join(f"{p.namespace}/{p.name}" for p in pods[:5]) + (" ..." if len(pods) > 5 else "")
    age = "" if since is None else f" for over {duration.format_duration(rounded_age(now - since))}"
    return (f"Draining node {node} has been blocked{age} by pod(s) {names} (karpenter.sh/do-not-disrupt); "
            "the NodeClaim has no terminationGracePeriod, so they are waited for until they go")
