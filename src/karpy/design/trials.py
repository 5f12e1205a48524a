"""One trial of ``karpy design``: a design's NodePools simulated with several seeds, and its summary.

:func:`simulate` runs the unchanged simulator (:class:`karpy.simulator.engine.Simulation`) on the
workload with the base NodePool replaced by the design's (:mod:`karpy.design.nodepools`) and measures
one seed's :class:`Outcome`:

* ``cost``: average $/h over the run (dollars accrued by every instance, divided by the simulated hours);
* ``p95Pending``: the 95th percentile of pod pending time, from a pod's creation to its binding to a
  node (a pod still pending at the end counts until the end; one deleted while pending, until then;
  DaemonSet pods are not counted);
* ``disruptionsPerHour``: nodes karpy disrupted voluntarily (consolidation, emptiness, drift, expiration:
  every ``DisruptionTerminating`` event) per simulated hour;
* ``nodesLaunched``: instances launched.

:func:`summarise` gives a trial's mean over its seeds (what the search minimises) and its worst seed
(what the constraints bound). A caller may rely on: the same workload, design and seed give the same
outcome, in any process.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as clock_mod
from karpy.design import nodepools
from karpy.kube import interface
from karpy.simulator import engine, scenario

OBJECTIVES = ("cost", "p95Pending", "disruptionsPerHour", "nodesLaunched")
"""What every trial is measured by, all minimised."""
CONSTRAINED = ("p95Pending", "disruptionsPerHour")
"""The figures a bound may constrain (on the worst seed)."""
UNITS = {"cost": "$/h", "p95Pending": "s", "disruptionsPerHour": "/h", "nodesLaunched": ""}


@dataclass(frozen=True, slots=True)
class Context:
    """What every simulation of a search shares (sent once to each worker)."""

    scenario: scenario.Scenario
    target: nodepools.Target
    until: float


@dataclass(frozen=True, slots=True)
class Job:
    """One simulation: a design (variable -> value) with one seed."""

    key: str
    design: dict[str, Any]
    seed: int


@dataclass(frozen=True, slots=True)
class Outcome:
    seed: int
    figures: dict[str, float]
    """OBJECTIVES -> value."""
    timeline: tuple[tuple[float, int, float, int], ...]
    """(t, nodes, $/h, pending pods) samples."""
    disruptions: dict[str, int] = field(default_factory=dict)
    """Voluntary disruptions by reason (``Consolidation/Delete`` ...)."""


def design_key(design: Mapping[str, Any]) -> str:
    """A design's identity: its values as canonical JSON."""
    return json.dumps(dict(design), sort_keys=True, separators=(",", ":"))


def simulate(ctx: Context, job: Job) -> Outcome:
    """Run one design with one seed; see the module docstring."""
    pools = nodepools.apply(job.design, ctx.target)
    scn = nodepools.scenario_with(ctx.scenario, ctx.target, pools, job.design)
    sim = engine.Simulation(scn, seed=job.seed, until=ctx.until, scheduler_events=False)
    pending = PendingTimes(sim.clock)
    sim.cluster.watch("Pod", interface.Filtered(pending.handle, interface.MESSAGES_ONLY))
    result = sim.run()
    hours = ctx.until / 3600.0
    disruptions: dict[str, int] = {}
    for ev in result.events:
        if ev["reason"] == "DisruptionTerminating" and ev["involvedObject"].get("kind") == "Node":
            why = ev["message"].removeprefix("Disrupting Node: ")
            disruptions[why] = disruptions.get(why, 0) + 1
    figures = {
        "cost": result.accrued_cost / hours,
        "p95Pending": pending.p95(sim.clock.now()),
        "disruptionsPerHour": sum(disruptions.values()) / hours,
        "nodesLaunched": float(result.metrics["simulator"]["instancesLaunched"]),
    }
    timeline = tuple((round(s.t, 3), sum(s.nodes_by_nodepool.values()), round(s.cost_per_hour, 6), s.pending_pods)
                     for s in result.timeline)
    return Outcome(seed=job.seed, figures={k: round(v, 6) for k, v in figures.items()}, timeline=timeline,
                   disruptions=dict(sorted(disruptions.items())))


class PendingTimes:
    """Each workload pod's time from creation to binding (virtual seconds); DaemonSet pods, bound to their
    node when created, are not workload pods and not counted."""

    def __init__(self, clock: clock_mod.Clock) -> None:
        self.clock = clock
        self.created: dict[str, float] = {}
        self.waits: list[float] = []

    def handle(self, event: str, obj: dict[str, Any]) -> None:
        if any(r.get("kind") == "DaemonSet" for r in interface.owner_references(obj)):
            return
        uid = interface.uid_of(obj)
        now = self.clock.now()
        if event == interface.DELETED:
            start = self.created.pop(uid, None)
            if start is not None:
                self.waits.append(now - start)
            return
        if (obj.get("spec") or {}).get("nodeName"):
            start = self.created.pop(uid, None)
            if start is not None:
                self.waits.append(now - start)
            elif event == interface.ADDED:
                self.waits.append(0.0)
            return
        if event == interface.ADDED:
            self.created[uid] = now

    def p95(self, end: float) -> float:
        waits = sorted([*self.waits, *(end - t for t in self.created.values())])
        if not waits:
            return 0.0
        return percentile(waits, 95.0)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile of sorted values (NumPy's default method)."""
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


# ------------------------------------------------------------------------------------ summary


@dataclass(frozen=True, slots=True)
class Summary:
    """A design's figures over its seeds."""

    key: str
    design: dict[str, Any]
    outcomes: tuple[Outcome, ...]
    mean: dict[str, float]
    worst: dict[str, float]
    best: dict[str, float]
    violation: float = 0.0
    """How far the worst seed is beyond the constraints (0: feasible), in units of each bound."""
    constraints: tuple[float, ...] = ()
    """Optuna's constraint values (<= 0: satisfied), one per bound given, in :data:`CONSTRAINED` order:
    worst p95 pending - bound, worst disruptions/h - bound."""

    @property
    def feasible(self) -> bool:
        return self.violation <= 0

    def to_dict(self) -> dict[str, Any]:
        return {"design": self.design, "feasible": self.feasible,
                "mean": self.mean, "worst": self.worst, "best": self.best,
                "seeds": [{"seed": o.seed, **o.figures, "disruptions": o.disruptions} for o in self.outcomes]}


@dataclass(frozen=True, slots=True)
class Bounds:
    max_p95_pending: float | None = None
    max_disruptions_per_hour: float | None = None


def summarise(key: str, design: Mapping[str, Any], outcomes: Sequence[Outcome], bounds: Bounds) -> Summary:
    mean = {k: round(sum(o.figures[k] for o in outcomes) / len(outcomes), 6) for k in OBJECTIVES}
    worst = {k: max(o.figures[k] for o in outcomes) for k in OBJECTIVES}
    best = {k: min(o.figures[k] for o in outcomes) for k in OBJECTIVES}
    constraints: list[float] = []
    violation = 0.0
    for figure, bound in zip(CONSTRAINED, (bounds.max_p95_pending, bounds.max_disruptions_per_hour), strict=True):
        over = worst[figure] - bound if bound is not None else 0.0
        constraints.append(over)
        if bound is None:
            continue
        if over > 0:
            violation += over / max(bound, 1e-9)
    return Summary(key=key, design=dict(design), outcomes=tuple(outcomes), mean=mean, worst=worst, best=best,
                   violation=round(violation, 9), constraints=tuple(constraints))
