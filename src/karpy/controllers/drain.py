"""What a drain evicts, in which order, by when, and how a drain that never ends is reported.

The termination controller (:mod:`karpy.controllers.termination`) drains a Node in Karpenter's groups
(:data:`EVICTION_ORDER`, :func:`eviction_group`): non-critical non-DaemonSet pods, then non-critical
DaemonSet pods, then critical (priority class ``system-cluster-critical`` / ``system-node-critical``)
non-DaemonSet pods, then critical DaemonSet pods. :func:`is_drain_ignored` says which pods are not
drained at all; :func:`termination_time` when every pod must be gone (deletion time plus the
NodeClaim's ``terminationGracePeriod``).

Draining that never ends is visible. Karpenter waits for a ``karpenter.sh/do-not-disrupt`` pod on a
Node being terminated; when the NodeClaim has no ``terminationGracePeriod`` nothing ever forces it out,
and the Node drains forever. A caller may rely on:

* :func:`blocking` lists the pods of ``waiting`` that hold the drain that way (protected from
  eviction, and no termination deadline);
* :func:`message` says which pods, since when, and why (a Warning ``FailedDraining`` event on the
  Node); the duration is rounded to a step of :data:`STEPS` so that the event aggregates and a new
  one appears only as the wait grows (5m, 15m, 30m, 1h, 2h, 4h, ...);
* :class:`RecentEvictions` keeps a drain from evicting a pod twice while the cache has not yet seen the
  first eviction's deletion (the real cluster's watch delivers it a moment after the answer).
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterable

from karpy import clock as clock_mod
from karpy.api import duration
from karpy.api import labels as wk
from karpy.api import node as node_mod
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import pod as pod_mod

DISRUPTED_TAINT = node_mod.Taint(key=wk.TAINT_DISRUPTED, effect="NoSchedule")

NON_CRITICAL_NON_DAEMON = "non-critical"
NON_CRITICAL_DAEMON = "non-critical-daemon"
CRITICAL_NON_DAEMON = "critical"
CRITICAL_DAEMON = "critical-daemon"
EVICTION_ORDER = (NON_CRITICAL_NON_DAEMON, NON_CRITICAL_DAEMON, CRITICAL_NON_DAEMON, CRITICAL_DAEMON)
"""Karpenter's eviction groups, first to last (sigs.k8s.io/karpenter ``Terminator.Evict``)."""

CRITICAL_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")

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


def eviction_group(p: pod_mod.Pod) -> str:
    """Karpenter's ``groupPodsByPriority``: critical by priority class name only."""
    daemon = p.owner_kind == "DaemonSet"
    if p.priority_class_name in CRITICAL_PRIORITY_CLASSES:
        return CRITICAL_DAEMON if daemon else CRITICAL_NON_DAEMON
    return NON_CRITICAL_DAEMON if daemon else NON_CRITICAL_NON_DAEMON


def is_drain_ignored(p: pod_mod.Pod) -> bool:
    """Terminal pods, static pods and pods tolerating the disrupted taint are not drained."""
    if p.is_terminal or p.owner_kind == "Node" or pod_mod.MIRROR_POD_ANNOTATION in p.annotations:
        return True
    return any(t.tolerates(DISRUPTED_TAINT) for t in p.tolerations)


def termination_time(claim: nodeclaim_mod.NodeClaim | None) -> float | None:
    """When every pod of the claim's node must be gone: deletion time + terminationGracePeriod."""
    if claim is None:
        return None
    text = claim.metadata.annotations.get(wk.NODECLAIM_TERMINATION_TIMESTAMP)
    if text:
        with contextlib.suppress(ValueError):
            return clock_mod.parse_rfc3339(text)
    tgp = claim.spec.termination_grace_period
    deleted = claim.metadata.deletion_timestamp
    if tgp is None or deleted is None:
        return None
    return deleted + tgp


EVICTED_MEMORY = 10.0
"""Seconds a granted eviction is remembered (:class:`RecentEvictions`)."""


class RecentEvictions:
    """Pods whose eviction was granted in the last :data:`EVICTED_MEMORY` seconds: a drain does not evict
    them again meanwhile, whatever the cache still says (the real adapter's cache learns of the deletion
    through the watch, a moment after the eviction's answer). Keyed by uid (else namespace/name); entries
    expire oldest first, so each look costs what expired."""

    def __init__(self) -> None:
        self._at: collections.OrderedDict[str, float] = collections.OrderedDict()

    def remember(self, p: pod_mod.Pod, now: float) -> None:
        key = p.metadata.uid or p.key
        self._at[key] = now
        self._at.move_to_end(key)

    def holds(self, p: pod_mod.Pod, now: float) -> bool:
        while self._at:
            oldest = next(iter(self._at.values()))
            if now - oldest < EVICTED_MEMORY:
                break
            self._at.popitem(last=False)
        return (p.metadata.uid or p.key) in self._at

    def __len__(self) -> int:
        return len(self._at)
