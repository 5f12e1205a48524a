"""How many pods and nodes one simulation run may hold.

A simulation keeps every pod and node in memory (about 4 KB a pod with its events and indexes): a
scenario asking for a million replicas would end in a ``MemoryError`` or worse after minutes. So a run
has a stated limit, :class:`Limits` (:data:`DEFAULT_MAX_PODS` pods and :data:`DEFAULT_MAX_NODES`
nodes; ``karpy simulate --max-pods / --max-nodes`` raise them). What a caller may rely on:

* :func:`requested_pods` is what a scenario asks for at its peak, read from its documents and steps
  before anything runs: for each Deployment, ReplicaSet and StatefulSet the largest ``replicas`` it is
  ever given (created, applied or scaled), a Job's ``parallelism``, one per bare Pod; DaemonSet pods
  (one per node) are bounded by the node limit instead.
* :func:`check` refuses, at load, a scenario whose requested pods exceed the limit, with a
  :class:`karpy.api.errors.ValidationError` naming the largest workloads and the flag that raises it.
* :class:`Watch` follows a running simulation: once pods or nodes pass :data:`NEAR` of their limit it
  says so once (``notify``); above the limit it stops the run with :class:`LimitExceededError` (a
  ``ValidationError``) rather than letting it exhaust the machine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import errors

log = logging.getLogger("karpy.simulator.limits")

DEFAULT_MAX_PODS = 100_000
DEFAULT_MAX_NODES = 10_000
NEAR = 0.8
"""The fraction of a limit from which a run says how close it is."""
_REPLICA_KINDS = ("Deployment", "ReplicaSet", "StatefulSet")


@dataclass(frozen=True, slots=True)
class Limits:
    max_pods: int = DEFAULT_MAX_PODS
    max_nodes: int = DEFAULT_MAX_NODES

    def __post_init__(self) -> None:
        for value, flag in ((self.max_pods, "--max-pods"), (self.max_nodes, "--max-nodes")):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise errors.ValidationError.single(flag, "(option)", "a positive integer", value)


DEFAULT = Limits()


class LimitExceededError(errors.ValidationError):
    """A running simulation went over its pod or node limit and was stopped."""


def _int(value: Any, default: int) -> int:
    if value is None:
        return default
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _demand(obj: Mapping[str, Any]) -> int:
    kind = obj.get("kind")
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if kind in _REPLICA_KINDS:
        return _int(spec.get("replicas"), 1)
    if kind == "Job":
        return _int(spec.get("parallelism"), 1)
    return 1 if kind == "Pod" else 0


def _key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    md = obj.get("metadata")
    md = md if isinstance(md, Mapping) else {}
    return str(obj.get("kind")), str(md.get("namespace") or "default"), str(md.get("name") or "")


def requested_pods(objects: Iterable[Mapping[str, Any]],
                   scales: Iterable[tuple[str, str, str, int]] = ()) -> dict[tuple[str, str, str], int]:
    """Peak pods per workload ``(kind, namespace, name)``: ``objects`` (created or applied at any time)
    and ``scales`` (``(kind, namespace, name, replicas)`` of every scale step)."""
    peak: dict[tuple[str, str, str], int] = {}
    for obj in objects:
        demand = _demand(obj)
        if demand:
            key = _key(obj)
            peak[key] = max(peak.get(key, 0), demand)
    for kind, ns, name, replicas in scales:
        key = (kind, ns or "default", name)
        peak[key] = max(peak.get(key, 0), replicas)
    return peak


def check(source: str, peak: Mapping[tuple[str, str, str], int], limits: Limits) -> None:
    """Raise :class:`errors.ValidationError` when ``peak`` (of :func:`requested_pods`) is over the limit."""
    total = sum(peak.values())
    if total <= limits.max_pods:
        return
    largest = sorted(peak.items(), key=lambda kv: -kv[1])[:3]
    named = ", ".join(f"{k[0]} {k[1]}/{k[2]}: {n}" for k, n in largest)
    raise errors.ValidationError.single(
        source, "(pods)", f"at most {limits.max_pods} pods in one simulation run (--max-pods raises the limit)",
        f"{total} pods requested ({named})")


class Watch:
    """Pods and nodes of a running simulation against its :class:`Limits` (see the module docstring)."""

    def __init__(self, limits: Limits, notify: Callable[[str], None] | None = None) -> None:
        self.limits = limits
        self.notify = notify or log.warning
        self._said: set[str] = set()

    def observe(self, pods: int, nodes: int, at: str) -> None:
        for what, count, limit, flag in (("pods", pods, self.limits.max_pods, "--max-pods"),
                                         ("nodes", nodes, self.limits.max_nodes, "--max-nodes")):
            if count > limit:
                raise LimitExceededError([errors.FieldError(
                    "simulation", f"({what})", f"at most {limit} {what} in one run ({flag} raises the limit)",
                    f"{count} {what} at {at}")])
            if count >= NEAR * limit and what not in self._said:
                self._said.add(what)
                self.notify(f"{count} {what} at {at}: {count * 100 // limit}% of this run's limit of {limit} "
                            f"({flag} raises it)")
