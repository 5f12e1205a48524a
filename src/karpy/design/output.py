"""What ``karpy design`` prints: the Pareto front as a table or JSON, the recommended NodePools and a diff.

Each design's figures are the mean over its seeds with their spread (lowest .. highest seed). The
recommended design is written as ready-to-apply ``karpenter.sh/v1`` NodePool YAML, with a unified diff
against the input's NodePool it replaces. The input's own NodePools are simulated with the same seeds
and shown first (``input``), so every figure has a baseline.

A caller may rely on: :func:`to_dict` is the JSON form (stable keys, sorted designs: the front cheapest
first); the same search result gives the same text, byte for byte.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import IO, Any

import yaml

from karpy.design import nodepools, search, trials
from karpy.design import space as space_mod

_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def describe(design: Mapping[str, Any]) -> str:
    """A design in one line: ``instanceFamily=m5 consolidateAfter=30s``."""
    if not design:
        return "(the input's NodePools)"
    return " ".join(f"{k}={space_mod.label(v)}" for k, v in design.items())


def pools_yaml(pools: Sequence[Mapping[str, Any]]) -> str:
    return str(yaml.dump_all([dict(p) for p in pools], Dumper=_DUMPER, sort_keys=False))


def diff(target: nodepools.Target, pools: Sequence[Mapping[str, Any]]) -> str:
    """The unified diff from the input's NodePool to the design's."""
    before = pools_yaml([target.base]).splitlines(keepends=True)
    after = pools_yaml(pools).splitlines(keepends=True)
    name = str((target.base.get("metadata") or {}).get("name"))
    return "".join(difflib.unified_diff(before, after, fromfile=f"input: NodePool/{name}",
                                        tofile="recommended"))


def _figures(s: trials.Summary) -> dict[str, Any]:
    return {k: {"mean": s.mean[k], "min": s.best[k], "max": s.worst[k]} for k in trials.OBJECTIVES}


def _entry(s: trials.Summary, target: nodepools.Target) -> dict[str, Any]:
    return {"design": s.design, "label": describe(s.design), "feasible": s.feasible,
            "figures": _figures(s),
            "seeds": [{"seed": o.seed, **o.figures, "disruptions": o.disruptions} for o in s.outcomes],
            "nodePools": [p["metadata"]["name"] for p in nodepools.apply(s.design, target)]}


def to_dict(result: search.Result, baseline: trials.Summary | None, target: nodepools.Target,
            *, wall_seconds: float | None = None) -> dict[str, Any]:
    opts = result.options
    rec = result.recommended
    closest = None if rec is not None else search.closest(list(result.summaries.values()))
    out: dict[str, Any] = {
        "space": result.space.to_dict(),
        "options": {"trials": opts.trials, "seeds": search.sim_seeds(opts), "searchSeed": opts.seed,
                    "population": search.population_size(opts), "objective": opts.objective,
                    "maxP95Pending": opts.bounds.max_p95_pending,
                    "maxDisruptionsPerHour": opts.bounds.max_disruptions_per_hour},
        "designsSimulated": len(result.summaries),
        "feasibleDesigns": sum(1 for s in result.summaries.values() if s.feasible),
        "input": _entry(baseline, target) if baseline is not None else None,
        "front": [_entry(s, target) for s in result.front],
        "recommended": None,
    }
    if wall_seconds is not None:
        out["wallSeconds"] = round(wall_seconds, 3)
    if rec is not None:
        pools = nodepools.apply(rec.design, target)
        out["recommended"] = {**_entry(rec, target), "yaml": pools_yaml(pools), "diff": diff(target, pools)}
    elif closest is not None:
        out["closest"] = {**_entry(closest, target), "violation": closest.violation}
    return out


def render_json(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def _cell(f: Mapping[str, float], fmt: str) -> str:
    if f["min"] == f["max"]:
        return format(f["mean"], fmt)
    return f"{format(f['mean'], fmt)} ({format(f['min'], fmt)}..{format(f['max'], fmt)})"


def render_table(data: Mapping[str, Any], file: IO[str], *, width: int | None = None) -> None:
    """The input and the front as one table, then the recommended NodePools and their diff."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=file, width=width or 200, no_color=True, highlight=False, soft_wrap=True)
    opts = data["options"]
    table = Table(title=f"Pareto front: {len(data['front'])} of {data['designsSimulated']} designs "
                        f"({data['feasibleDesigns']} within the bounds), {opts['trials']} trials x "
                        f"{len(opts['seeds'])} seeds; mean (lowest..highest seed)")
    for col in ("#", "DESIGN", "$/H", "P95 PENDING S", "DISRUPTIONS/H", "NODES LAUNCHED"):
        table.add_column(col)
    rows: list[tuple[str, Mapping[str, Any]]] = []
    if data["input"] is not None:
        rows.append(("input", data["input"]))
    rec_label = (data["recommended"] or {}).get("label")
    rows.extend((("*" if e["label"] == rec_label else "") + str(i + 1), e) for i, e in enumerate(data["front"]))
    for tag, e in rows:
        f = e["figures"]
        table.add_row(tag, escape(e["label"]), _cell(f["cost"], ".3f"), _cell(f["p95Pending"], ".0f"),
                      _cell(f["disruptionsPerHour"], ".2f"), _cell(f["nodesLaunched"], ".0f"))
    console.print(table)
    rec = data["recommended"]
    if rec is None:
        closest = data.get("closest")
        console.print("No design kept the p95 pending time and disruptions within the bounds.")
        if closest is not None:
            console.print(escape(f"Closest: {closest['label']} (worst seed {closest['violation']:.0%} beyond)"))
        return
    base = data["input"]
    saving = ""
    if base is not None and base["figures"]["cost"]["mean"] > 0:
        ratio = rec["figures"]["cost"]["mean"] / base["figures"]["cost"]["mean"] - 1
        saving = f" ({ratio:+.1%} $/h against the input)"
    console.print(escape(f"Recommended (*, lowest {opts['objective']}): {rec['label']}{saving}"))
    file.write("\n" + rec["yaml"])
    file.write("\n# diff against the input\n" + rec["diff"])
    if not rec["diff"].endswith("\n"):
        file.write("\n")


def write(data: Mapping[str, Any], output: str, file: IO[str]) -> None:
    if output == "json":
        file.write(render_json(data))
    else:
        render_table(data, file)
