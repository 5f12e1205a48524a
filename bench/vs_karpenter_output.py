"""The output side of bench/vs_karpenter.py: per-NodeClaim records, medians, the table, the API
breakdown and the HTML report (matplotlib)."""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path
from typing import Any

from support import realcluster

AUTOSCALERS = ("karpenter", "karpy")
NAMESPACE = "bench"


def _ts(s: str | None) -> float | None:
    from datetime import datetime
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() if s else None


def _count(xs: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return dict(sorted(out.items()))


def claim_records(cluster: realcluster.RealCluster, t0: float) -> list[dict[str, Any]]:
    """Per NodeClaim: its instance type, what it was launched for (``spec.resources.requests``, the sum both
    autoscalers write from the pods they planned onto it), when, and the bench pods bound to its node now."""
    pods = cluster.get_json("pods", "-n", NAMESPACE)["items"]
    on: dict[str, list[dict[str, Any]]] = {}
    for p in pods:
        node = p.get("spec", {}).get("nodeName")
        if node:
            on.setdefault(node, []).append(p)
    out = []
    for c in cluster.get_json("nodeclaims")["items"]:
        labels = c["metadata"].get("labels", {})
        node = c.get("status", {}).get("nodeName", "")
        bound = on.get(node, [])
        out.append({"name": c["metadata"]["name"], "type": labels.get("node.kubernetes.io/instance-type", ""),
                    "zone": labels.get("topology.kubernetes.io/zone", ""),
                    "created_s": round((_ts(c["metadata"].get("creationTimestamp")) or t0) - t0, 1),
                    "requests": c.get("spec", {}).get("resources", {}).get("requests", {}),
                    "capacity": {k: v for k, v in c.get("status", {}).get("allocatable", {}).items()
                                 if k in ("cpu", "memory", "pods")},
                    "pods_now": len(bound),
                    "classes_now": _count(p["metadata"].get("labels", {}).get("class", "") for p in bound)})
    return sorted(out, key=lambda r: (r["created_s"], r["name"]))


FIGURES = ("burst_s", "pending_p50_s", "pending_p95_s", "burst_claims", "burst_nodes", "burst_cost", "scale_down_s",
           "scale_down_within_5pct_s", "scale_down_nodes", "scale_down_cost", "drift_s", "drift_claims", "drift_cost",
           "claims_launched",
           "cpu_s", "peak_rss_mb", "api_requests", "restarts")


def summarise(runs: list[dict[str, Any]]) -> dict[int, dict[str, dict[str, float]]]:
    table: dict[int, dict[str, dict[str, float]]] = {}
    for size in sorted({r["pods"] for r in runs}):
        table[size] = {}
        for kind in AUTOSCALERS:
            mine = [r for r in runs if r["pods"] == size and r["autoscaler"] == kind]
            table[size][kind] = {f: statistics.median(float(r[f]) for r in mine)
                                 for f in FIGURES if mine and all(f in r for r in mine)}
    return table


def print_table(table: dict[int, dict[str, dict[str, float]]], repeats: int, version: str) -> None:
    print(f"\nkarpy vs Karpenter {version} (KWOK), {os.cpu_count()} cores, medians of {repeats}")
    for size, by in table.items():
        print(f"\n{size} pods   {'karpenter':>12} {'karpy':>12} {'karpy/karpenter':>16}")
        for f in FIGURES:
            a, b = by.get("karpenter", {}).get(f), by.get("karpy", {}).get(f)
            ratio = f"{b / a:.2f}" if a and b is not None and not (math.isnan(a) or math.isnan(b)) else "-"
            print(f"  {f:<16} {a if a is not None else '-':>12} {b if b is not None else '-':>12} {ratio:>16}")


def print_api_breakdown(runs: list[dict[str, Any]], top: int = 10) -> None:
    """Per size and autoscaler: the verbs and resources of its API requests, the mean over repeats."""
    for size in sorted({r["pods"] for r in runs}):
        print(f"\nAPI requests by verb and resource, {size} pods (mean of repeats)")
        for kind in AUTOSCALERS:
            mine = [r for r in runs if r["pods"] == size and r["autoscaler"] == kind and r.get("api_requests_by")]
            if not mine:
                continue
            total: dict[str, float] = {}
            for r in mine:
                for key, n in r["api_requests_by"].items():
                    total[key] = total.get(key, 0.0) + n / len(mine)
            ranked = sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
            print(f"  {kind}: " + ", ".join(f"{key} {n:.0f}" for key, n in ranked))


def report(runs: list[dict[str, Any]], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out.mkdir(parents=True, exist_ok=True)
    sizes = sorted({r["pods"] for r in runs})
    html = ["<html><head><title>karpy vs Karpenter</title></head><body><h1>karpy vs Karpenter</h1>"]
    for size in sizes:
        fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
        for kind, colour in zip(AUTOSCALERS, ("tab:orange", "tab:blue"), strict=True):
            run = next((r for r in runs if r["pods"] == size and r["autoscaler"] == kind), None)
            if run is None:
                continue
            t = [p["t"] for p in run["timeline"]]
            for ax, key in zip(axes, ("pending", "nodes", "cost"), strict=True):
                ax.plot(t, [p[key] for p in run["timeline"]], label=kind, color=colour)
                ax.set_ylabel("$/h" if key == "cost" else key)
        axes[0].legend()
        axes[-1].set_xlabel("seconds since the burst")
        fig.suptitle(f"{size} pods: burst, scale-down to 30%, drift")
        name = f"timeline-{size}.png"
        fig.savefig(out / name, dpi=80)
        plt.close(fig)
        html.append(f"<h2>{size} pods</h2><img src='{name}'>")
    html.append("</body></html>")
    (out / "index.html").write_text("\n".join(html))


def api_requests(cluster: realcluster.RealCluster, agent_prefix: str) -> tuple[int, dict[str, int]]:
    """The requests the audit log holds from ``agent_prefix``'s user agent: their number, and how many
    of each verb and resource (``"list pods"``, ``"patch nodes/status"``), most first."""
    path = cluster.workdir / "clusters" / cluster.name / "logs" / "audit.log"
    count = 0
    by: dict[str, int] = {}
    with path.open() as f:
        for line in f:
            if agent_prefix in line:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if not entry.get("userAgent", "").startswith(agent_prefix):
                    continue
                count += 1
                ref = entry.get("objectRef") or {}
                what = ref.get("resource", entry.get("requestURI", "?"))
                if ref.get("subresource"):
                    what += "/" + ref["subresource"]
                key = f"{entry.get('verb', '?')} {what}"
                by[key] = by.get(key, 0) + 1
    return count, dict(sorted(by.items(), key=lambda kv: (-kv[1], kv[0])))
