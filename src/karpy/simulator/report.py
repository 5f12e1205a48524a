"""``karpy simulate --report DIR``: an HTML report of one run, with plots.

:func:`write` creates ``DIR/index.html`` and, next to it, the plots as PNG files (also embedded in
the page, so ``index.html`` alone is enough to share):

* ``nodes-by-nodepool.png`` and ``nodes-by-instance-type.png`` - stacked areas over time (the ten
  most frequent instance types, the rest as "other");
* ``pending-pods.png`` - pods in phase Pending over time;
* ``cost.png`` - US dollars per hour of karpy's nodes over time;

followed by the step list and the event log (every event, karpenter's and the kube-scheduler's).
Plots are drawn with matplotlib's Agg backend (no display needed); the same result gives the
same files.
"""

from __future__ import annotations

import base64
import html
import io
import pathlib
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib import ticker

from karpy.api import duration
from karpy.simulator import engine, timefmt

TOP_TYPES = 10
_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac", "#86bcb6", "#d37295"]


def _axis(timeline: Sequence[engine.Sample]) -> tuple[list[float], str]:
    end = timeline[-1].t if timeline else 0.0
    if end > 3 * 3600:
        return [s.t / 3600 for s in timeline], "hours since start"
    return [s.t / 60 for s in timeline], "minutes since start"


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.subplots_adjust(left=0.08, right=0.78, bottom=0.17, top=0.88)  # the same frame for every plot
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _steps_on(ax: Any, result: engine.Result, scale: float) -> None:
    """A dotted line at each time a step happens (one line per time, however many steps share it: a
    scenario scaling 600 Deployments at once drew 600 lines, most of the report's time)."""
    times = sorted({s.at for s in result.scenario.steps if s.at <= result.until})
    if times:
        ax.vlines([t / scale for t in times], 0, 1, transform=ax.get_xaxis_transform(), colors="#888888",
                  linestyles=":", linewidth=1)


def _stacked(result: engine.Result, series: dict[str, list[int]], title: str) -> bytes:
    xs, label = _axis(result.timeline)
    scale = 3600.0 if label.startswith("hours") else 60.0
    fig, ax = plt.subplots(figsize=(10, 3.4))
    names = list(series)
    if names:
        ax.stackplot(xs, [series[n] for n in names], labels=names, step="post",
                     colors=[_COLORS[i % len(_COLORS)] for i in range(len(names))], alpha=0.9)
        handles, names_ = ax.get_legend_handles_labels()  # top of the stack first, as drawn
        ax.legend(handles[::-1], names_[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                  frameon=False)
    _steps_on(ax, result, scale)
    ax.set_title(title)
    ax.set_xlabel(label)
    ax.set_ylabel("nodes")
    ax.set_xlim(0, xs[-1] if xs else 1)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def _line(result: engine.Result, values: list[float], title: str, ylabel: str, color: str) -> bytes:
    xs, label = _axis(result.timeline)
    scale = 3600.0 if label.startswith("hours") else 60.0
    fig, ax = plt.subplots(figsize=(10, 3.4))
    ax.step(xs, values, where="post", color=color, linewidth=1.6)
    ax.fill_between(xs, values, step="post", color=color, alpha=0.15)
    _steps_on(ax, result, scale)
    ax.set_title(title)
    ax.set_xlabel(label)
    ax.set_ylabel(ylabel)
    ax.set_xlim(0, xs[-1] if xs else 1)
    top = max(values) if values else 0
    ax.set_ylim(0, top * 1.15 if top > 0 else 1)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def plots(result: engine.Result) -> dict[str, bytes]:
    """File name -> PNG bytes of every plot."""
    tl = result.timeline
    pools = sorted({k for s in tl for k in s.nodes_by_nodepool})
    by_pool = {p: [s.nodes_by_nodepool.get(p, 0) for s in tl] for p in pools}
    totals: dict[str, int] = {}
    for s in tl:
        for k, v in s.nodes_by_instance_type.items():
            totals[k] = totals.get(k, 0) + v
    top = sorted(totals, key=lambda k: (-totals[k], k))[:TOP_TYPES]
    by_type = {t: [s.nodes_by_instance_type.get(t, 0) for s in tl] for t in sorted(top)}
    rest = [sum(v for k, v in s.nodes_by_instance_type.items() if k not in top) for s in tl]
    if any(rest):
        by_type["other"] = rest
    return {
        "nodes-by-nodepool.png": _stacked(result, by_pool, "Nodes by NodePool"),
        "nodes-by-instance-type.png": _stacked(result, by_type, "Nodes by instance type"),
        "pending-pods.png": _line(result, [float(s.pending_pods) for s in tl], "Pending pods", "pods",
                                  "#e15759"),
        "cost.png": _line(result, [s.cost_per_hour for s in tl], "Cost of karpy's nodes", "US$ per hour",
                          "#59a14f"),
        **_commitments_plot(result),
    }


def _commitments_plot(result: engine.Result) -> dict[str, bytes]:
    """With commitments: on-demand equivalent and paid $/h, and RI / Savings Plan utilisation, over time."""
    bill = (result.metrics.get("simulator") or {}).get("commitments")
    if not bill or not bill.get("overTime"):
        return {}
    points = [*bill["overTime"], {**bill["overTime"][-1], "t": result.until}]
    _, label = _axis(result.timeline)
    scale = 3600.0 if label.startswith("hours") else 60.0
    ts = [p["t"] / scale for p in points]
    fig, (cost_ax, use_ax) = plt.subplots(1, 2, figsize=(10, 3.4))
    cost_ax.step(ts, [p["onDemandEquivalent"] for p in points], where="post", label="on-demand equivalent")
    cost_ax.step(ts, [p["paid"] for p in points], where="post", label="paid")
    cost_ax.set_title("$/h: list price and what is paid")
    cost_ax.set_xlabel(label)
    cost_ax.legend(fontsize=8, frameon=False)
    use_ax.step(ts, [100 * p["reservedInstanceUtilization"] for p in points], where="post", label="Reserved Instances")
    use_ax.step(ts, [100 * p["savingsPlanUtilization"] for p in points], where="post", label="Savings Plans")
    use_ax.set_title("Commitment utilisation (%)")
    use_ax.set_xlabel(label)
    use_ax.set_ylim(0, 105)
    use_ax.legend(fontsize=8, frameon=False)
    return {"commitments.png": _png(fig)}


_CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.meta { color: #555; margin-top: 0; }
.cards { display: flex; gap: 1em; flex-wrap: wrap; margin: 1em 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 0.6em 1em; min-width: 9em; }
.card b { display: block; font-size: 1.3em; }
img { max-width: 100%; display: block; margin: 0.5em 0 1em; }
table { border-collapse: collapse; width: 100%; font-size: 0.85em; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eee; vertical-align: top; }
th { background: #f5f5f5; position: sticky; top: 0; }
td.t { white-space: nowrap; font-family: monospace; }
tr.Warning td.type { color: #b00020; font-weight: bold; }
"""


def render_html(result: engine.Result, images: dict[str, bytes]) -> str:
    scn = result.scenario
    sim = result.metrics.get("simulator", {})
    e = html.escape
    nodes_end = result.timeline[-1].nodes_by_nodepool if result.timeline else {}
    cards = [
        ("simulated", duration.format_duration(result.until)),
        ("nodes at the end", str(sum(nodes_end.values()))),
        ("launched / terminated", f"{sim.get('instancesLaunched', 0)} / {sim.get('instancesTerminated', 0)}"),
        ("max pending pods", str(max((s.pending_pods for s in result.timeline), default=0))),
        ("$/h at the end", f"{result.cost_per_hour:.3f}"),
        ("$ spent", f"{result.accrued_cost:.3f}"),
    ]
    parts = [
        "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>karpy simulate: {e(scn.name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>karpy simulate: {e(scn.name)}</h1>",
        f"<p class='meta'>{e(scn.source)} &middot; cloud {e(scn.cloud.provider)}"
        f"{' ' + e(scn.cloud.region) if scn.cloud.region else ''} &middot; seed {result.seed}</p>",
        "<div class='cards'>" + "".join(f"<div class='card'>{e(k)}<b>{e(v)}</b></div>" for k, v in cards)
        + "</div>",
        "<p class='meta'>Dotted vertical lines mark the scenario's steps.</p>",
    ]
    for name, title in (("nodes-by-nodepool.png", "Nodes by NodePool"),
                        ("nodes-by-instance-type.png", "Nodes by instance type"),
                        ("pending-pods.png", "Pending pods"), ("cost.png", "Cost per hour"),
                        ("commitments.png", "Commitments")):
        if name not in images:
            continue
        data = base64.b64encode(images[name]).decode("ascii")
        parts.append(f"<h2>{e(title)}</h2><img alt='{e(title)}' src='data:image/png;base64,{data}'>")
    parts.append("<h2>Steps</h2><table><tr><th>at</th><th>step</th></tr>")
    for s in scn.steps:
        parts.append(f"<tr><td class='t'>{e(timefmt.offset(s.at))}</td><td>{e(s.describe)}</td></tr>")
    parts.append("</table>")
    parts.append(f"<h2>Events ({len(result.events)})</h2><table><tr><th>time</th><th>type</th><th>reason</th>"
                 "<th>object</th><th>source</th><th>message</th></tr>")
    for ev in result.events:
        obj = ev["involvedObject"]
        count = f" (x{ev['count']})" if ev["count"] > 1 else ""
        parts.append(
            f"<tr class='{e(ev['type'])}'><td class='t'>{e(timefmt.offset(ev['t']))}</td>"
            f"<td class='type'>{e(ev['type'])}</td><td>{e(ev['reason'])}</td>"
            f"<td>{e(str(obj.get('kind', '')).lower())}/{e(str(obj.get('name', '')))}</td>"
            f"<td>{e(ev['source'])}</td><td>{e(ev['message'] + count)}</td></tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts) + "\n"


def write(result: engine.Result, directory: str | pathlib.Path) -> pathlib.Path:
    """Write the report into ``directory`` (created if needed); returns the path of index.html."""
    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    images = plots(result)
    for name, data in images.items():
        (out / name).write_bytes(data)
    index = out / "index.html"
    index.write_text(render_html(result, images), encoding="utf-8")
    return index
