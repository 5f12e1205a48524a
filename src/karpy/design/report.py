"""``karpy design --report DIR``: an HTML page of a search, with plots (matplotlib's Agg backend).

:func:`write` creates ``DIR/index.html`` and the plots beside it as PNG files (also embedded, so the
page alone can be shared):

* ``pareto.png``: every design simulated, mean $/h against mean p95 pending time, coloured by mean
  voluntary disruptions per hour; the front circled, the recommended design a star, the input a cross;
* ``timeline-N.png``: for front design N (the 30 cheapest at most), nodes and $/h over time (each seed
  one line);
* ``effects.png``: for each variable, the mean $/h of the designs simulated with each of its values
  (how each variable moved cost), with the number of designs behind each bar;

then the front as a table (the same figures as ``--output table``), the recommended NodePools and
their diff against the input. ``docs/design.md`` explains how to read it.
"""

from __future__ import annotations

import base64
import html
import io
import pathlib
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from karpy.design import search, trials
from karpy.design import space as space_mod

MAX_TIMELINES = 30
"""Timelines drawn at most (the cheapest front designs)."""


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    _plt().close(fig)
    return buf.getvalue()


def pareto_png(result: search.Result, baseline: trials.Summary | None) -> bytes:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 5.5))
    everything = list(result.summaries.values())
    feasible = [s for s in everything if s.feasible]
    infeasible = [s for s in everything if not s.feasible]
    if infeasible:
        ax.scatter([s.mean["p95Pending"] for s in infeasible], [s.mean["cost"] for s in infeasible], marker="x",
                   color="#bbbbbb", label="beyond the bounds", s=18)
    if feasible:
        points = ax.scatter([s.mean["p95Pending"] for s in feasible], [s.mean["cost"] for s in feasible],
                            c=[s.mean["disruptionsPerHour"] for s in feasible], cmap="viridis", s=24)
        fig.colorbar(points, ax=ax, label="voluntary disruptions per hour (mean)")
    if result.front:
        ax.scatter([s.mean["p95Pending"] for s in result.front], [s.mean["cost"] for s in result.front],
                   facecolors="none", edgecolors="#e15759", s=90, label="Pareto front")
        for i, s in enumerate(result.front):
            ax.annotate(str(i + 1), (s.mean["p95Pending"], s.mean["cost"]), textcoords="offset points",
                        xytext=(5, 5), fontsize=8)
    if result.recommended is not None:
        r = result.recommended
        ax.scatter([r.mean["p95Pending"]], [r.mean["cost"]], marker="*", s=260, color="#f28e2b",
                   edgecolors="black", label="recommended", zorder=5)
    if baseline is not None:
        ax.scatter([baseline.mean["p95Pending"]], [baseline.mean["cost"]], marker="P", s=140, color="#4e79a7",
                   edgecolors="black", label="input", zorder=5)
    ax.set_xlabel("p95 pod pending time, seconds (mean over seeds)")
    ax.set_ylabel("$/h (mean over seeds)")
    ax.set_title("Designs: cost against startup")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return _png(fig)


def timeline_png(s: trials.Summary, title: str) -> bytes:
    plt = _plt()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 4.5), sharex=True)
    for o in s.outcomes:
        xs = [p[0] / 3600 for p in o.timeline]
        top.step(xs, [p[1] for p in o.timeline], where="post", linewidth=1, label=f"seed {o.seed}")
        bottom.step(xs, [p[2] for p in o.timeline], where="post", linewidth=1)
    top.set_ylabel("nodes")
    bottom.set_ylabel("$/h")
    bottom.set_xlabel("hours since start")
    top.set_title(textwrap.fill(title, 110), fontsize=8)
    top.legend(fontsize=7, loc="upper left")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    return _png(fig)


def effects(result: search.Result) -> dict[str, list[tuple[str, float, int]]]:
    """variable -> [(value, mean $/h of the designs with it, how many designs)] in the space's order."""
    out: dict[str, list[tuple[str, float, int]]] = {}
    everything = list(result.summaries.values())
    for var in result.space.variables:
        rows = []
        for value in var.values:
            costs = [s.mean["cost"] for s in everything if space_mod.label(s.design.get(var.name)) ==
                     space_mod.label(value)]
            if costs:
                rows.append((space_mod.label(value), sum(costs) / len(costs), len(costs)))
        out[var.name] = rows
    return out


def effects_png(table: Mapping[str, Sequence[tuple[str, float, int]]]) -> bytes:
    plt = _plt()
    names = [n for n, rows in table.items() if rows]
    fig, axes = plt.subplots(len(names) or 1, 1, figsize=(9, 1.6 + 1.3 * max(1, len(names))), squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=False):
        rows = table[name]
        ax.barh([r[0] for r in rows], [r[1] for r in rows], color="#4e79a7")
        for i, r in enumerate(rows):
            ax.text(r[1], i, f" {r[1]:.2f} (n={r[2]})", va="center", fontsize=7)
        ax.set_title(name, fontsize=9, loc="left")
        ax.tick_params(labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("mean $/h of the designs simulated with this value")
    return _png(fig)


def _img(name: str, data: bytes, alt: str) -> str:
    return (f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'
            f'<br><a href="{name}">{name}</a></p>')


def write(result: search.Result, baseline: trials.Summary | None, data: Mapping[str, Any], directory: str) -> str:
    """Write the report into ``directory``; returns the path of ``index.html``."""
    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>karpy design</title>",
             "<style>body{font-family:sans-serif;max-width:1000px;margin:auto}td,th{padding:2px 8px;"
             "border-bottom:1px solid #ddd;font-size:13px}pre{background:#f6f6f6;padding:8px;overflow:auto}"
             "</style></head><body>",
             f"<h1>karpy design: {html.escape(result.space.name)}</h1>",
             f"<p>{len(result.trial_keys)} trials, {len(result.summaries)} distinct designs, seeds "
             f"{html.escape(str(search.sim_seeds(result.options)))}, objective {html.escape(result.options.objective)}."
             "</p>"]
    images: list[tuple[str, bytes, str]] = [("pareto.png", pareto_png(result, baseline), "Pareto plot")]
    parts.append("<h2>Cost against pending time</h2>")
    parts.append(_img(*images[0]))
    parts.append("<h2>The front</h2>" + _front_table(data))
    rec = data.get("recommended")
    if rec:
        parts.append(f"<h2>Recommended: {html.escape(rec['label'])}</h2><pre>{html.escape(rec['yaml'])}</pre>"
                     f"<h3>Diff against the input</h3><pre>{html.escape(rec['diff'])}</pre>")
    parts.append("<h2>Each front design over time</h2>")
    if len(result.front) > MAX_TIMELINES:
        parts.append(f"<p>The first {MAX_TIMELINES} of {len(result.front)} front designs (cheapest first).</p>")
    for i, s in enumerate(result.front[:MAX_TIMELINES]):
        name = f"timeline-{i + 1}.png"
        images.append((name, timeline_png(s, f"{i + 1}: {_label(s.design)}"), f"timeline of design {i + 1}"))
        parts.append(_img(*images[-1]))
    table = effects(result)
    images.append(("effects.png", effects_png(table), "per-variable effect on cost"))
    parts.append("<h2>How each variable moved cost</h2>")
    parts.append(_img(*images[-1]))
    parts.append("</body></html>")
    for name, png, _ in images:
        (out / name).write_bytes(png)
    index = out / "index.html"
    index.write_text("\n".join(parts), encoding="utf-8")
    return str(index)


def _label(design: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={space_mod.label(v)}" for k, v in design.items()) or "(input)"


def _front_table(data: Mapping[str, Any]) -> str:
    rows = ["<table><tr><th>#</th><th>design</th><th>$/h</th><th>p95 pending s</th><th>disruptions/h</th>"
            "<th>nodes launched</th></tr>"]
    entries = ([("input", data["input"])] if data.get("input") else []) + \
        [(str(i + 1), e) for i, e in enumerate(data["front"])]
    for tag, e in entries:
        f = e["figures"]
        cells = [f"{f[k]['mean']:.3f} ({f[k]['min']:.3f}..{f[k]['max']:.3f})" for k in trials.OBJECTIVES]
        rows.append(f"<tr><td>{tag}</td><td>{html.escape(e['label'])}</td>" + "".join(f"<td>{c}</td>" for c in cells)
                    + "</tr>")
    return "".join(rows) + "</table>"
