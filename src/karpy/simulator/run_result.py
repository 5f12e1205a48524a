"""What one simulation run produced: the timeline's :class:`Sample` and the whole :class:`Result`.

:class:`karpy.simulator.engine.Simulation` fills them; :mod:`karpy.simulator.output` and
:mod:`karpy.simulator.report` render them. Plain data: a caller may read every field and rely on
``Sample.to_dict`` being the JSON form of a timeline point. :func:`event_record` is how an Event
appears in a report and :func:`karpenter_metrics` which metrics a report carries (only those whose
values do not depend on the wall clock, so a report stays byte-deterministic).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.simulator import scenario


@dataclass(frozen=True, slots=True)
class Sample:
    """The state of the world at one time of the timeline."""

    t: float
    """Seconds since the start."""
    nodes_by_nodepool: Mapping[str, int]
    nodes_by_instance_type: Mapping[str, int]
    pending_pods: int
    running_pods: int
    nodeclaims: int
    cost_per_hour: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "t": round(self.t, 3),
            "nodes": sum(self.nodes_by_nodepool.values()),
            "nodesByNodePool": dict(sorted(self.nodes_by_nodepool.items())),
            "nodesByInstanceType": dict(sorted(self.nodes_by_instance_type.items())),
            "pendingPods": self.pending_pods,
            "runningPods": self.running_pods,
            "nodeClaims": self.nodeclaims,
            "costPerHour": round(self.cost_per_hour, 6),
        }


@dataclass
class Result:
    """Everything one run produced; :mod:`karpy.simulator.output` renders it."""

    scenario: scenario.Scenario
    seed: int
    until: float
    start: float
    objects: dict[str, list[dict[str, Any]]]
    """``nodes``, ``nodeclaims``, ``pods``, ``nodepools`` -> objects as the API returns them: the final
    stored objects of the run, shared and read-only (copy one before changing it)."""
    events: list[dict[str, Any]]
    """Every Event, in the order they were first published."""
    metrics: dict[str, Any]
    timeline: list[Sample]
    notes: list[dict[str, Any]] = field(default_factory=list)
    """What the simulator itself did or could not do: ``{"t", "message"}``."""
    reconciles: int = 0
    cost_per_hour: float = 0.0
    accrued_cost: float = 0.0
    karpy_controllers: list[str] = field(default_factory=list)
    reconcile_errors: list[dict[str, Any]] = field(default_factory=list)
    """Reconcile failures by controller and error type (:mod:`karpy.controllers.reconcile_errors`)."""
    unexpected_errors: int = 0
    """How many reconciles failed with something other than a retryable API/cloud error."""
    error_lines: list[str] = field(default_factory=list)
    nodeclaims: list[dict[str, Any]] = field(default_factory=list)
    """Every NodeClaim created during the run, gone or not (:class:`karpy.simulator.history.NodeClaimHistory`);
    the table's story of what karpy did. Not part of the JSON / YAML document."""

    @property
    def end(self) -> float:
        return self.start + self.until


_PER_OBJECT = ("karpenter_pods_state", "karpenter_pods_unbound_time_seconds", "karpenter_pods_unstarted_time_seconds",
               "karpenter_pods_provisioning_un", "karpenter_pods_provisioning_scheduling_undecided",
               "karpenter_nodes_allocatable", "karpenter_nodes_total_", "karpenter_nodes_system_overhead",
               "karpenter_nodes_current_lifetime_seconds", "karpenter_cloudprovider_instance_type_")
_WALL_CLOCK = ("karpenter_scheduler_scheduling_duration_seconds", "karpenter_cloudprovider_duration_seconds",
               "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
               "controller_runtime_reconcile_time",
               "karpenter_cloudprovider_batcher_batch_time_seconds")


def reported(name: str) -> bool:
    """Whether samples of ``name`` are in a report: not one sample per pod or node, nor a wall-clock
    duration (neither is deterministic)."""
    return not (name.startswith(_PER_OBJECT) or name == "karpenter_build_info" or
                (name.startswith(_WALL_CLOCK) and not name.endswith("_count")))


def karpenter_metrics(samples: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Karpenter's metrics for a report: the deterministic ones only (:func:`reported`), rows sorted by label."""
    karpenter: dict[str, Any] = {}
    for name in sorted(samples):
        if not reported(name):
            continue
        rows = [{"labels": dict(sorted(s["labels"].items())), "value": s["value"]} for s in samples[name]]
        rows.sort(key=lambda r: sorted(r["labels"].items()))
        karpenter[name] = rows
    return karpenter


_INVOLVED = ("kind", "namespace", "name")


def event_record(seq: int, t: float, obj: Mapping[str, Any], start: float,
                 shared: dict[tuple[Any, ...], dict[str, Any]] | None = None) -> dict[str, Any]:
    """An Event as the simulator reports it: time, type, reason, involved object, message.

    ``shared``: records made with the same mapping share equal ``involvedObject`` dicts (read-only).
    """
    ref = obj.get("involvedObject") or {}
    if shared is None:
        involved = {k: ref[k] for k in _INVOLVED if ref.get(k)}
    else:  # the key first: most events involve an object an earlier event did (a pod's retries)
        key = tuple(ref.get(k) or "" for k in _INVOLVED)
        found = shared.get(key)
        if found is None:
            found = shared[key] = {k: ref[k] for k in _INVOLVED if ref.get(k)}
        involved = found
    last = str(obj.get("lastTimestamp") or obj.get("firstTimestamp") or "")
    return {
        "time": str(obj.get("firstTimestamp") or ""),
        "t": round(t, 3),
        "lastTime": last,
        "count": int(obj.get("count") or 1),
        "type": str(obj.get("type") or ""),
        "reason": str(obj.get("reason") or ""),
        "source": str((obj.get("source") or {}).get("component") or obj.get("reportingComponent") or ""),
        "involvedObject": involved,
        "message": str(obj.get("message") or ""),
    }


def default_sample_interval(until: float) -> float:
    """A run's timeline step: 10 s for runs up to an hour, then about 360 samples in whole multiples of 10 s."""
    if until <= 3600:
        return 10.0
    return float(max(10, int(until / 360 / 10) * 10))
