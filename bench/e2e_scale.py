"""End to end speed of ``karpy simulate`` on Karpenter's benchmark pod mix, as Deployments.

The scenario (generated, AWS catalog, one on-demand c/m/r NodePool): the five classes of
bench/scheduling.py - generic; zonal topology spread (maxSkew 1, DoNotSchedule, selector on a label
with 7 values); hostname spread (same); zonal self pod-affinity; hostname anti-affinity (all
``app=nginx``) - each as 7 Deployments (one per label value) of one seeded cpu/memory shape, all
scaled up at 10 s, run for 3 simulated minutes. The run goes through the same path as
``karpy simulate FILE`` (the YAML text is parsed by :func:`karpy.simulator.scenario.load_text`).

Prints, per size: pods, pods Running at the end, the simulated second at which the last pod ran,
wall seconds, pods per wall second, the process's peak resident memory (ru_maxrss, which only
grows: run one size per process for a clean peak figure; ``--one`` does that) and the CPU seconds
the process used (user + system: what to compare on a loaded machine, where wall time swings),
imports included, less what generating the scenario's YAML took (the bench's input, not part of
``karpy simulate``), up to the end of the rendering (not the ``--report``).

Issue 13's targets, checked in the last column (``ok`` / ``MISS``): every pod Running by 180
simulated seconds at >= 1,000 pods per wall second (the whole run, YAML parsing included), and
under 2 GB peak memory (checked from 100,000 pods up).

Run: ``python bench/e2e_scale.py [--counts 1000,10000] [--big]`` (``--big`` adds 100,000 pods, long),
``--profile`` prints the cProfile hot spots of each run (``--profile-out FILE`` with ``--one N``
keeps them for pstats); ``--pdbs`` adds a PodDisruptionBudget (``maxUnavailable: 1``) per Deployment
(what budgets cost the disruption controller's passes); ``--trace`` prints wall, CPU seconds and peak
memory every 10 simulated seconds (where a big run spends its time and memory: the first solve, nodes registering...).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import resource
import subprocess
import sys
from typing import Any

import yaml

from karpy import clock
from karpy.simulator import engine, limits, output, scenario

CPUS = ["100m", "250m", "500m", "1000m", "1500m"]
MEMS = ["100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"]
VALUES = [f"value-{i}" for i in range(7)]
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _deployment(name: str, replicas: int, labels: dict[str, str], requests: dict[str, str],
                extra: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "app:1",
                                            "resources": {"requests": requests}}], **extra}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"deployment": name}},
                     "template": {"metadata": {"labels": {"deployment": name, **labels}}, "spec": spec}}}


def _spread(key: str, value: str) -> dict[str, Any]:
    return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"my-label": value}}}]}


def _affinity(kind: str, key: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": key, "labelSelector": {"matchLabels": labels}}]}}}


def deployments(n: int, seed: int = 42) -> list[dict[str, Any]]:
    """The five classes, 7 Deployments each, ``n`` replicas in total."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    per_class = n // 5
    for c, kind in enumerate(("generic", "zonal", "hostname", "affinity", "anti")):
        total = n - 4 * per_class if c == 0 else per_class
        for i, value in enumerate(VALUES):
            replicas = total // 7 + (1 if i < total % 7 else 0)
            requests = {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMS)}
            labels, extra = _class_shape(kind, value)
            out.append(_deployment(f"{kind}-{i}", replicas, labels, requests, extra))
            out[-1]["_replicas"] = replicas
    return out


DIVERSE_VALUES = VALUES[:4]


def diverse_deployments(n: int, seed: int = 42) -> list[dict[str, Any]]:
    """Karpenter's benchmark mix at realistic diversity: one Deployment per class x cpu x memory x
    label value (5 x 5 x 6 x 4 = 600 Deployments), ``n`` replicas in total shared out by seeded
    weights (1 to 8), so Deployments range from a handful of pods to a few dozen."""
    rng = random.Random(seed)
    shapes = [(kind, cpu, mem, i, value) for kind in ("generic", "zonal", "hostname", "affinity", "anti")
              for cpu in CPUS for mem in MEMS for i, value in enumerate(DIVERSE_VALUES)]
    weights = [rng.randint(1, 8) for _ in shapes]
    total_w = sum(weights)
    counts = [n * w // total_w for w in weights]
    for i in range(n - sum(counts)):
        counts[i % len(counts)] += 1
    out: list[dict[str, Any]] = []
    for (kind, cpu, mem, i, value), replicas in zip(shapes, counts, strict=True):
        labels, extra = _class_shape(kind, value)
        name = f"{kind}-{cpu}-{mem.lower()}-{i}"
        out.append(_deployment(name, replicas, labels, {"cpu": cpu, "memory": mem}, extra))
        out[-1]["_replicas"] = replicas
    return out


def _class_shape(kind: str, value: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The pod labels and scheduling constraints of one class of the mix."""
    if kind == "zonal":
        return {"my-label": value}, _spread(ZONE, value)
    if kind == "hostname":
        return {"my-label": value}, _spread(HOST, value)
    if kind == "affinity":
        labels = {"my-affinity": value}
        return labels, _affinity("podAffinity", ZONE, labels)
    if kind == "anti":
        labels = {"app": "nginx"}
        return labels, _affinity("podAntiAffinity", HOST, labels)
    return {"my-label": value}, {}


WHOLE_CATALOG = [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]
"""The diverse case's NodePool: every instance type, both capacity types, only linux required."""
CMR_ON_DEMAND = [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
    {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]}]


def scenario_text(n: int, until: str = "3m", pdbs: bool = False, diverse: bool = False) -> str:
    """The scenario; ``pdbs``: also a PodDisruptionBudget (``maxUnavailable: 1``) per Deployment;
    ``diverse``: the 600-Deployment mix on a whole-catalog NodePool (:func:`diverse_deployments`)."""
    deps = diverse_deployments(n) if diverse else deployments(n)
    budgets = [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": d["metadata"]["name"], "namespace": "default"},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"deployment": d["metadata"]["name"]}}}}
               for d in deps] if pdbs else []
    steps = [{"at": "10s", "scale": {"kind": "Deployment", "namespace": "default", "name": d["metadata"]["name"],
                                     "replicas": d.pop("_replicas")}} for d in deps]
    docs: list[dict[str, Any]] = [
        {"apiVersion": "karpy.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "e2e-scale"},
         "spec": {"cloud": {"provider": "aws", "region": "us-east-1",
                            "zones": ["us-east-1a", "us-east-1b", "us-east-1c"]},
                  "settings": {"clusterName": "bench"}, "until": until, "seed": 1, "steps": steps}},
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole-bench",
                  "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
                  "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}]}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
         "spec": {"template": {"spec": {
             "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
             "requirements": WHOLE_CATALOG if diverse else CMR_ON_DEMAND}}}},
        *deps,
        *budgets,
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


def _tracer(start: float) -> engine.Progress:
    """A progress callback printing, every 10 simulated seconds, the wall and CPU seconds and the peak
    resident memory so far (to stderr): where in the run time and memory go."""
    last = [-1]

    def progress(done: float, _total: float) -> None:
        if int(done // 10) == last[0]:
            return
        last[0] = int(done // 10)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        print(f"  t={done:6.0f}s wall={clock.perf_counter() - start:8.1f}s cpu={usage.ru_utime + usage.ru_stime:8.1f}s "
              f"peak={usage.ru_maxrss / 1024:7.0f}MB", file=sys.stderr, flush=True)

    return progress


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_one(n: int, profile: bool, profile_out: str | None = None, trace: bool = False,
            pdbs: bool = False, diverse: bool = False, render: str | None = None,
            report_dir: str | None = None) -> dict[str, Any]:
    """One run; ``render``: also write the result as ``karpy simulate --output`` does (to /dev/null),
    timed as part of the run (``render_s`` says how much of it)."""
    text_cpu = _cpu()
    text = scenario_text(n, pdbs=pdbs, diverse=diverse)
    text_cpu = _cpu() - text_cpu  # the bench's own input generation: not part of `karpy simulate`
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    start = clock.perf_counter()
    # As `karpy simulate --max-pods N --max-nodes N` (the default limits stop at 100,000 pods, 10,000 nodes).
    scn = scenario.load_text(text, source="e2e", limits=limits.Limits(
        max_pods=max(n, limits.DEFAULT_MAX_PODS), max_nodes=max(n, limits.DEFAULT_MAX_NODES)))
    result = engine.Simulation(scn, progress=_tracer(start) if trace else None).run()
    rendered = clock.perf_counter()
    if render is not None:
        with open(os.devnull, "w", encoding="utf-8") as sink:
            output.render(result, render, sink)
    wall = clock.perf_counter() - start
    render_s = clock.perf_counter() - rendered
    cpu = _cpu() - text_cpu
    report_s = None
    if report_dir is not None:  # karpy simulate --report: timed on its own, not part of wall
        from karpy.simulator import report

        began = clock.perf_counter()
        report.write(result, report_dir)
        report_s = clock.perf_counter() - began
    if profiler is not None:
        profiler.disable()
        if profile_out:
            profiler.dump_stats(profile_out)
        for order in ("cumulative", "tottime"):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(30)
            print(f"--- top 30 by {order}\n{out.getvalue()}", file=sys.stderr)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    last = result.timeline[-1]
    all_running = next((s.t for s in result.timeline if s.running_pods >= n and s.pending_pods == 0), None)
    return {"pods": n, "running": last.running_pods, "nodes": sum(last.nodes_by_nodepool.values()),
            "all_running_at": all_running, "wall": wall, "cpu": cpu,
            "peak_mb": usage.ru_maxrss / 1024, "render_s": render_s, "diverse": diverse,
            "report_s": report_s}


TARGET_PODS_PER_SECOND = 1000.0
TARGET_ALL_RUNNING_BY = 180.0
TARGET_PEAK_MB = 2048.0


def meets_targets(r: dict[str, Any]) -> bool:
    """Issue 13's targets for one run (memory only counts from 100,000 pods)."""
    at = r["all_running_at"]
    return at is not None and at <= TARGET_ALL_RUNNING_BY and r["pods"] / r["wall"] >= TARGET_PODS_PER_SECOND \
        and (r["pods"] < 100_000 or r["peak_mb"] < TARGET_PEAK_MB)


TARGET_CPU_RATIO = 0.75
"""Issue 27: the diverse mix costs at most 1/0.75 of the 35-Deployment case's CPU per pod."""

HEADER = (f"{'case':>8} {'pods':>7} {'running':>8} {'nodes':>6} {'all-ran':>9} {'wall-s':>8} {'pods/s':>8} "
          f"{'peak-MB':>8} {'targets':>7} {'cpu-s':>7} {'pods/cpu-s':>10} {'render-s':>8}")


def _line(r: dict[str, Any]) -> str:
    at = "never" if r["all_running_at"] is None else f"{r['all_running_at']:.0f}s"
    return (f"{'diverse' if r['diverse'] else '35-deps':>8} {r['pods']:>7} {r['running']:>8} {r['nodes']:>6} {at:>9} "
            f"{r['wall']:>8.1f} {r['pods'] / r['wall']:>8.0f} {r['peak_mb']:>8.0f} "
            f"{'ok' if meets_targets(r) else 'MISS':>7} {r['cpu']:>7.1f} {r['pods'] / r['cpu']:>10.0f} "
            f"{r['render_s']:>8.1f}")


def _run_child(n: int, args: argparse.Namespace, diverse: bool) -> dict[str, Any] | None:
    """One size in a fresh process (a clean peak memory figure); its result line is echoed."""
    cmd = [sys.executable, __file__, "--one", str(n), "--json-line"] + (["--profile"] if args.profile else []) \
        + (["--trace"] if args.trace else []) + (["--pdbs"] if args.pdbs else []) \
        + (["--diverse"] if diverse else []) + (["--output", args.output] if args.output else [])
    done = subprocess.run(cmd, check=False, stdout=subprocess.PIPE, text=True)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        print(f"{n}: the run failed (exit {done.returncode})", flush=True)
        return None
    r: dict[str, Any] = json.loads(lines[-1])
    print(_line(r), flush=True)
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="1000,10000")
    ap.add_argument("--big", action="store_true", help="also run 100,000 pods")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--profile-out", help="with --one --profile: also write the cProfile data to this file")
    ap.add_argument("--trace", action="store_true",
                    help="print wall, CPU seconds and peak memory every 10 simulated seconds (stderr)")
    ap.add_argument("--pdbs", action="store_true",
                    help="a PodDisruptionBudget (maxUnavailable: 1) per Deployment: what budgets cost the loop")
    ap.add_argument("--diverse", action="store_true",
                    help="issue 27: the 600-Deployment mix on a whole-catalog NodePool, each size beside the "
                         "35-Deployment case, both rendered as --output json; prints the CPU-per-pod ratio")
    ap.add_argument("--output", choices=output.OUTPUTS,
                    help="also render the result as karpy simulate --output does (timed; default with --diverse: json)")
    ap.add_argument("--report", metavar="DIR", help="with --one: also write the HTML report (timed apart)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--json-line", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.diverse and args.output is None and not args.one:
        args.output = "json"
    if args.one:
        r = run_one(args.one, args.profile, args.profile_out, args.trace, args.pdbs, args.diverse, args.output,
                    args.report)
        print(json.dumps(r) if args.json_line else _line(r), flush=True)
        if r["report_s"] is not None:
            print(f"report: {r['report_s']:.1f} s", flush=True)
        return 0 if r["all_running_at"] is not None else 1
    counts = [int(c) for c in args.counts.split(",")] + ([100_000] if args.big else [])
    print(HEADER, flush=True)
    for n in counts:
        base = _run_child(n, args, diverse=False)
        if not args.diverse:
            continue
        mixed = _run_child(n, args, diverse=True)
        if base is not None and mixed is not None:
            ratio = (mixed["pods"] / mixed["cpu"]) / (base["pods"] / base["cpu"])
            verdict = "ok" if ratio >= TARGET_CPU_RATIO else "MISS"
            print(f"{'':>8} {n:>7} diverse/35-deps pods per CPU-second: {ratio:.2f} "
                  f"(target >= {TARGET_CPU_RATIO}) {verdict}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
