"""A NodeClaim's status as the lifecycle writes it: its conditions and the write itself.

* :func:`set_condition` puts one condition into a status dict; an unchanged status keeps its transition
  time, a message is cut at :data:`MAX_MESSAGE` characters (:func:`truncate`).
* :func:`settle_conditions`: every lifecycle condition (Launched, Registered, Initialized) is present,
  ``Unknown`` until known, and ``Ready`` follows them (True when all are, False when one is).
* :func:`write`: mutate the status and write it, as a merge patch from the watch-fed copy when a merge patch
  can say the change (:func:`merge_patch_says`), else the whole status; a stale copy is redone on a fresh read.
  :mod:`karpy.controllers.termination` and :mod:`karpy.disruption.drift_marking` set conditions through here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.kube import errors as kube_errors
from karpy.kube import interface

MAX_MESSAGE = 300


def truncate(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE] + "..."


def set_condition(status: dict[str, Any], type_: str, value: str, now: float, reason: str = "",
                  message: str = "") -> None:
    """Put condition ``type_`` into a status dict; an unchanged status keeps its transition time.

    ``status["conditions"]`` becomes a new list; the other conditions' dicts are not copied (they
    are never changed, only replaced), and a condition that would not change stays the same dict."""
    conditions = list(status.get("conditions") or ())
    new: dict[str, Any] = {"type": type_, "status": value,
                           "reason": reason or (type_ if value == "True" else "AwaitingReconciliation"),
                           "lastTransitionTime": clock_mod.rfc3339(now)}
    if message:
        new["message"] = truncate(message)
    for i, c in enumerate(conditions):
        if c.get("type") == type_:
            if c.get("status") == value and c.get("lastTransitionTime"):
                new["lastTransitionTime"] = c["lastTransitionTime"]
            if new != c:
                conditions[i] = new
            break
    else:
        conditions.append(new)
    status["conditions"] = conditions


def settle_conditions(status: dict[str, Any], now: float) -> None:
    """Every lifecycle condition is present (Unknown until known) and Ready follows the others."""
    have: dict[Any, str] = {}
    for c in status.get("conditions") or ():  # one pass; the first condition of a type counts
        have.setdefault(c.get("type"), str(c.get("status")))
    parts = []
    for type_ in (nodeclaim_mod.LAUNCHED, nodeclaim_mod.REGISTERED, nodeclaim_mod.INITIALIZED):
        if type_ not in have:
            set_condition(status, type_, "Unknown", now)
        parts.append(have.get(type_, "Unknown"))
    if all(p == "True" for p in parts):
        set_condition(status, nodeclaim_mod.READY, "True", now)
    elif any(p == "False" for p in parts):
        set_condition(status, nodeclaim_mod.READY, "False", now, "NotReady")
    else:
        set_condition(status, nodeclaim_mod.READY, "Unknown", now)


ABSENT = object()
"""What ``old.get(key, ABSENT)`` gives for a key ``old`` lacks."""


def merge_patch_says(old: Mapping[str, Any], new: Mapping[str, Any], patch: Mapping[str, Any]) -> bool:
    """Merging ``patch`` (``new``'s entries that are not ``old``'s own) into ``old`` gives ``new``:
    nothing was removed, nothing is null (a merge patch's "remove"), and no mapping would be merged
    into an existing one (which would keep entries the new mapping dropped)."""
    if any(k not in new for k in old):
        return False
    return all(v is not None and (type(v) is not dict or (old.get(k) is None and _no_nulls(v)))
               for k, v in patch.items())


def _no_nulls(value: Mapping[str, Any]) -> bool:
    return all(v is not None and (type(v) is not dict or _no_nulls(v)) for v in value.values())


def write(cluster: interface.Cluster, clock: clock_mod.Clock, cached: Mapping[str, Any] | None, name: str,
          mutate: Callable[[dict[str, Any], float], None]) -> dict[str, Any]:
    """Mutate NodeClaim ``name``'s status (``mutate(status, now)``, then :func:`settle_conditions`) and write it
    (optimistic: the watch-fed copy ``cached`` first, a fresh read when that copy was stale or is ``None``).

    From the watch-fed copy the write is a merge patch of the changed status fields with the
    copy's resourceVersion (Karpenter's optimistic-lock status patch): the fields it leaves
    alone (capacity, allocatable after launch) are neither copied nor looked at again. When a
    merge patch could not say it (a field removed or set to null, a mapping that would be
    merged into an existing one) the whole status is written, as from a fresh read."""
    if cached is not None:
        old = cached.get("status") or {}
        status = dict(old)  # shared: mutate a copy of the one level a write changes
        now = clock.now()
        mutate(status, now)
        settle_conditions(status, now)
        patch = {k: v for k, v in status.items() if old.get(k, ABSENT) is not v}
        try:
            if merge_patch_says(old, status, patch):
                return cluster.patch_status("NodeClaim", name, {
                    "metadata": {"resourceVersion": cached["metadata"]["resourceVersion"]}, "status": patch})
            obj = dict(cached)
            obj["metadata"] = dict(cached.get("metadata") or {})
            obj["status"] = status
            return cluster.update_status(obj)
        except kube_errors.Conflict:
            pass
    fresh = cluster.get("NodeClaim", name)
    status = fresh.setdefault("status", {})
    now = clock.now()
    mutate(status, now)
    settle_conditions(status, now)
    return cluster.update_status(fresh)
