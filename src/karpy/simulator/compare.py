"""``karpy compare FILE``: the same scenario under karpy and under Cluster Autoscaler, side by side.

:func:`run` runs the scenario twice with the same seed: once with karpy's controllers, once with
:mod:`karpy.simulator.cluster_autoscaler` over node groups (``spec.clusterAutoscaler`` or derived, see
:mod:`karpy.simulator.ca_config`). For each it measures, from the cluster itself (a Pod watch):

* ``timeToAllRunningSeconds``: the longest any pod waited from its creation to Running (for a wave
  of pods created together: how long until every one of them runs); pods that never ran count until
  the end;
* ``podStartP50Seconds``: the median of the same waits, over pods that had to wait for a new node
  (waited more than 5 s);
* ``pendingPodSeconds``: the sum of those waits (pod-seconds spent pending);
* ``costSpent``: dollars the simulated cloud accrued (instances launched during the run; nodes that
  pre-existed in the scenario are not priced, for either autoscaler);
* ``maxNodes`` and ``finalNodes``; ``costPerHourEnd``; the timeline of nodes and $/h.

A caller may rely on: one seed gives the same figures; nothing but the returned data (and the report,
when asked) is written.
"""

from __future__ import annotations

import html
import io
import json
import pathlib
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from karpy.kube import interface
from karpy.simulator import engine, scenario

AUTOSCALERS = engine.AUTOSCALERS
WAITED = 5.0


@dataclass(slots=True)
class _PodTimes:
    sim: engine.Simulation
    created: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)

    def handle(self, event: str, obj: dict[str, Any]) -> None:
        if any(r.get("kind") == "DaemonSet" for r in interface.owner_references(obj)):
            return
        uid = interface.uid_of(obj)
        now = self.sim.clock.now() - self.sim.start
        if event == interface.ADDED:
            self.created.setdefault(uid, now)
        if event != interface.DELETED and (obj.get("status") or {}).get("phase") == "Running":
            self.running.setdefault(uid, now)
        if event == interface.DELETED and uid not in self.running:
            self.created.pop(uid, None)  # deleted before it ran (a scale-down): not a wait


@dataclass(slots=True)
class Run:
    autoscaler: str
    result: engine.Result
    waits: list[float]

    def figures(self) -> dict[str, Any]:
        waited = sorted(w for w in self.waits if w > WAITED)
        timeline = self.result.timeline
        return {
            "timeToAllRunningSeconds": round(max(self.waits, default=0.0), 3),
            "podStartP50Seconds": round(statistics.median(waited), 3) if waited else 0.0,
            "pendingPodSeconds": round(sum(self.waits), 3),
            "costSpent": round(self.result.accrued_cost, 6),
            "costPerHourEnd": round(self.result.cost_per_hour, 6),
            "maxNodes": max((sum(s.nodes_by_nodepool.values()) for s in timeline), default=0),
            "finalNodes": len(self.result.objects["nodes"]),
            "podsNeverRunning": sum(1 for p in self.result.objects["pods"]
                                    if (p.get("status") or {}).get("phase") != "Running"
                                    and not any(r.get("kind") == "DaemonSet" for r in interface.owner_references(p))),
            "timeline": [{"t": s.t, "nodes": sum(s.nodes_by_nodepool.values()),
                          "costPerHour": round(s.cost_per_hour, 6)} for s in timeline],
        }


def run_one(scn: scenario.Scenario, autoscaler: str, *, seed: int | None = None) -> Run:
    sim = engine.Simulation(scn, seed=seed, autoscaler=autoscaler)
    sim.wire()
    times = _PodTimes(sim)
    sim.cluster.watch("Pod", times.handle)
    for p in sim.cluster.list("Pod"):
        times.handle(interface.ADDED, p)
    result = sim.run()
    end = result.until
    waits = [times.running.get(uid, end) - created for uid, created in times.created.items()]
    return Run(autoscaler, result, waits)


def run(scn: scenario.Scenario, *, seed: int | None = None) -> dict[str, Run]:
    """Both runs, karpy first."""
    return {a: run_one(scn, a, seed=seed) for a in AUTOSCALERS}


def document(runs: Mapping[str, Run]) -> dict[str, Any]:
    return {name: r.figures() for name, r in runs.items()}


def render_json(runs: Mapping[str, Run]) -> str:
    return json.dumps(document(runs), indent=2) + "\n"


_ROWS = (("time until every pod runs", "timeToAllRunningSeconds", "{:.0f} s"),
         ("median wait of pods that waited", "podStartP50Seconds", "{:.0f} s"),
         ("pending pod-seconds", "pendingPodSeconds", "{:.0f}"),
         ("$ spent", "costSpent", "{:.4f}"),
         ("$/h at the end", "costPerHourEnd", "{:.4f}"),
         ("max nodes", "maxNodes", "{}"),
         ("nodes at the end", "finalNodes", "{}"),
         ("pods not running at the end", "podsNeverRunning", "{}"))


def render_table(runs: Mapping[str, Run], file: IO[str], *, width: int | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    figures = document(runs)
    first = next(iter(runs.values())).result
    table = Table(title=f"{first.scenario.name}: karpy and Cluster Autoscaler, {first.until / 60:g} simulated minutes")
    table.add_column("")
    for name in figures:
        table.add_column(name)
    for label, key, fmt in _ROWS:
        table.add_row(label, *(fmt.format(f[key]) for f in figures.values()))
    Console(file=file, width=width or 120, no_color=True, highlight=False).print(table)


def write_report(runs: Mapping[str, Run], directory: str | pathlib.Path) -> pathlib.Path:
    """An HTML page with the figures and two plots (nodes and $/h over time, both autoscalers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    figures = document(runs)
    plots = (("nodes", "Nodes", "compare-nodes.png"), ("costPerHour", "$ per hour", "compare-cost.png"))
    for key, title, name in plots:
        fig, ax = plt.subplots(figsize=(8, 3.2))
        for autoscaler, f in figures.items():
            ax.step([p["t"] / 60 for p in f["timeline"]], [p[key] for p in f["timeline"]], where="post",
                    label=autoscaler)
        ax.set_title(title)
        ax.set_xlabel("minutes since start")
        ax.legend(loc="upper left")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
        plt.close(fig)
        (out / name).write_bytes(buf.getvalue())
    rows = "".join(
        f"<tr><td>{html.escape(label)}</td>" + "".join(f"<td>{html.escape(fmt.format(f[key]))}</td>"
                                                       for f in figures.values()) + "</tr>"
        for label, key, fmt in _ROWS)
    heads = "".join(f"<th>{html.escape(n)}</th>" for n in figures)
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>karpy compare</title></head><body>"
            f"<h1>karpy and Cluster Autoscaler</h1><table border='1'><tr><th></th>{heads}</tr>{rows}</table>"
            f"<img src='compare-nodes.png' alt='nodes'><img src='compare-cost.png' alt='cost'></body></html>")
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index
