"""``karpy design`` at scale: 200 trials x 3 seeds of 24 simulated hours of a ~300-node workload.

The workload is generated: the aws catalog in three zones, eight Deployments of four pod shapes
(general 1 CPU / 2 GiB, compute 2 CPU / 2 GiB, memory 1 CPU / 8 GiB, small 500m / 1 GiB) whose replica
counts follow a diurnal trace every 30 minutes (night ~35 % of the peak; the peak needs ~300 xlarge
nodes), and an input NodePool ``general`` (on-demand m5/c5/r5/m6i/c6i/r6i, large..4xlarge,
WhenEmptyOrUnderutilized after 5m).

Three figures:

1. **search**: ``karpy design``'s search (NSGA-II) over a wide space (families and family mixes, spot
   share, consolidation policy and delay, budgets) with ``--trials`` x ``--seeds`` on ``--parallel``
   processes: wall time, trials per minute, the recommended design's cost against the input's;
2. **brute force**: every design of a small space (one instance family each, x consolidateAfter), all
   simulated with the same seeds: the best single-family design;
3. **checks**: the search's recommended cost must be within 2 % of (or below) the brute-force best
   (the wide space contains the small one, so the search has to find that optimum or a better design);
   and NSGA-II run on the small space itself with half its size in trials must come within 2 % of the
   brute-force best (answered from the brute force's simulations: no extra simulation).

Run: ``python bench/design.py [--trials 200] [--seeds 3] [--hours 24] [--nodes 300] [--parallel 2]``
(smaller figures for a quick look: ``--trials 40 --seeds 2 --hours 6 --nodes 100``). Prints the figures
and exits 1 when the check fails.
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import time
from collections.abc import Sequence

import yaml

from karpy.design import inputs, nodepools, output, runners, search, space, trials

SHAPES = {  # name: (cpu, memory, share of the peak CPU)
    "general": ("1", "2Gi", 0.35),
    "compute": ("2", "2Gi", 0.25),
    "memory": ("1", "8Gi", 0.25),
    "small": ("500m", "1Gi", 0.15),
}
DEPLOYMENTS_PER_SHAPE = 2
NODE_CPU = 4  # an xlarge
SMALL_FAMILIES = ["m5", "c5", "r5", "m6i", "c6i", "r6i", "m6a", "m7i"]
INPUT_FAMILIES = ["m5", "c5", "r5", "m6i", "c6i", "r6i"]


def _cpu(text: str) -> float:
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def workload(nodes: int, hours: float) -> tuple[str, str]:
    """(scenario YAML, trace CSV)."""
    peak_cpu = nodes * NODE_CPU * 0.85
    docs: list[dict[str, object]] = [
        {"apiVersion": "karpy.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "design-bench"},
         "spec": {"cloud": {"provider": "aws", "region": "us-east-1",
                            "zones": ["us-east-1a", "us-east-1b", "us-east-1c"]},
                  "settings": {"clusterName": "bench"}, "until": f"{int(hours * 3600)}s"}},
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole-bench",
                  "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
                  "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}]}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
         "spec": {"template": {"spec": {
             "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
             "requirements": [
                 {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                 {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                 {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": INPUT_FAMILIES},
                 {"key": "karpenter.k8s.aws/instance-size", "operator": "In",
                  "values": ["large", "xlarge", "2xlarge", "4xlarge"]}]}},
             "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m"}}},
    ]
    rows = ["at,namespace,deployment,replicas"]
    peaks: dict[str, int] = {}
    for shape, (cpu, mem, share) in SHAPES.items():
        for i in range(DEPLOYMENTS_PER_SHAPE):
            name = f"{shape}-{i}"
            peaks[name] = max(1, round(peak_cpu * share / DEPLOYMENTS_PER_SHAPE / _cpu(cpu)))
            labels = {"app": name, "shape": shape}
            docs.append({"apiVersion": "apps/v1", "kind": "Deployment",
                         "metadata": {"name": name, "namespace": "default"},
                         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                                  "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                                      {"name": "app", "image": f"{shape}:1",
                                       "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}}}})
    steps = int(hours * 2)
    for half in range(steps):
        h = half / 2
        for k, (name, peak) in enumerate(sorted(peaks.items())):
            phase = (h - 4 - k * 0.5) / 24 * 2 * math.pi  # each Deployment's day a little later
            level = 0.35 + 0.65 * (0.5 - 0.5 * math.cos(phase))
            rows.append(f"{half * 30}m,default,{name},{max(1, round(peak * level))}")
    return yaml.safe_dump_all(docs, sort_keys=False), "\n".join(rows) + "\n"


WIDE_SPACE = {
    "apiVersion": "karpy.io/v1alpha1", "kind": "DesignSpace", "metadata": {"name": "wide"},
    "spec": {"nodePool": "general", "variables": {
        "instanceFamily": [*SMALL_FAMILIES, ["m5", "c5", "r5"], ["m6i", "c6i", "r6i"], ["m7i", "c7i", "r7i"],
                           ["m6a", "c6a", "r6a"]],
        "spotShare": {"min": 0, "max": 1, "step": 0.25},
        "consolidationPolicy": ["WhenEmpty", "WhenEmptyOrUnderutilized"],
        "consolidateAfter": ["30s", "5m", "30m"],
        "budgets": ["10%", "25%"]}},
}
SMALL_SPACE = {
    "apiVersion": "karpy.io/v1alpha1", "kind": "DesignSpace", "metadata": {"name": "single-family"},
    "spec": {"nodePool": "general", "variables": {
        "instanceFamily": SMALL_FAMILIES, "consolidateAfter": ["30s", "5m", "30m"]}},
}


class Cached:
    """A runner answering from the brute force's outcomes (a search on the small space simulates nothing)."""

    workers = 1

    def __init__(self, outcomes: dict[tuple[str, int], trials.Outcome]) -> None:
        self.outcomes = outcomes

    def run(self, jobs: Sequence[trials.Job], done: runners.Done) -> list[trials.Outcome]:
        out = [self.outcomes[(j.key, j.seed)] for j in jobs]
        for _ in out:
            done()
        return out

    def close(self) -> None:
        pass


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its finished workers (a loaded machine slows wall time, not this)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--nodes", type=int, default=300, help="nodes at the peak (xlarge equivalents)")
    parser.add_argument("--parallel", type=int, default=runners.default_parallel())
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    until = args.hours * 3600
    scn_text, trace_text = workload(args.nodes, args.hours)
    scn = inputs.load([("bench", scn_text)], trace=("trace.csv", trace_text), until=until)
    wide = space.from_mapping(WIDE_SPACE, source="wide")
    small = space.from_mapping(SMALL_SPACE, source="small")
    opts = search.Options(trials=args.trials, seeds=args.seeds, seed=args.seed)
    print(f"workload: {len(scn.steps)} trace steps, peak {nodepools.resolve(wide, scn).peak_cpu['']:.0f} CPU "
          f"requested, {args.hours:g} simulated hours; wide space {wide.size()} designs, small space {small.size()}")

    # 1. the input's design and the search over the wide space
    ctx = trials.Context(scn, nodepools.resolve(wide, scn), until)
    runner = runners.make(ctx, parallel=args.parallel, ray_address=None)
    try:
        t0, c0 = time.perf_counter(), _cpu_seconds()
        base = trials.summarise("{}", {}, runner.run([trials.Job("{}", {}, s) for s in search.sim_seeds(opts)],
                                                     lambda: None), opts.bounds)
        t_input = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = search.run(wide, runner, opts)
        wall = time.perf_counter() - t0
    finally:
        runner.close()
    cpu = _cpu_seconds() - c0
    rec = result.recommended
    assert rec is not None
    sims = len(result.summaries) * args.seeds
    print(f"input design: ${base.mean['cost']:.3f}/h (seeds {base.best['cost']:.3f}..{base.worst['cost']:.3f}), "
          f"p95 pending {base.mean['p95Pending']:.0f}s, {base.mean['disruptionsPerHour']:.2f} disruptions/h "
          f"({t_input:.1f}s for {args.seeds} simulations)")
    print(f"search: {args.trials} trials x {args.seeds} seeds ({len(result.summaries)} distinct designs, {sims} "
          f"simulations) on {runner.workers} processes: {wall:.1f}s wall, {args.trials / wall * 60:.1f} trials/min, "
          f"{sims / wall * 60:.1f} simulations/min; {cpu:.0f} CPU seconds with the input's "
          f"({cpu / (sims + args.seeds):.2f} per simulation)")
    print(f"recommended: {output.describe(rec.design)}: ${rec.mean['cost']:.3f}/h "
          f"({rec.mean['cost'] / base.mean['cost'] - 1:+.1%} against the input), p95 pending "
          f"{rec.mean['p95Pending']:.0f}s, {rec.mean['disruptionsPerHour']:.2f} disruptions/h; front of "
          f"{len(result.front)}")

    # 2. brute force over the small space
    ctx_small = trials.Context(scn, nodepools.resolve(small, scn), until)
    runner = runners.make(ctx_small, parallel=args.parallel, ray_address=None)
    try:
        t0 = time.perf_counter()
        brute = search.grid(small, runner, opts)
        t_brute = time.perf_counter() - t0
    finally:
        runner.close()
    best = min(brute.summaries.values(), key=lambda s: (s.mean["cost"], s.key))
    print(f"brute force: {small.size()} single-family designs x {args.seeds} seeds in {t_brute:.1f}s: best "
          f"{output.describe(best.design)} ${best.mean['cost']:.3f}/h "
          f"({best.mean['cost'] / base.mean['cost'] - 1:+.1%} against the input)")

    # 3. the checks: the wide search against the brute-force best; the search on the small space itself,
    # with half its size in trials (answered from the brute force's outcomes: the same simulations)
    ratio = rec.mean["cost"] / best.mean["cost"]
    cached = Cached({(s.key, o.seed): o for s in brute.summaries.values() for o in s.outcomes})
    budget = max(2, small.size() // 2)
    half = search.run(small, cached, search.Options(trials=budget, seeds=args.seeds, seed=args.seed))
    assert half.recommended is not None
    ratio_small = half.recommended.mean["cost"] / best.mean["cost"]
    ok = ratio <= 1.02 and ratio_small <= 1.02
    print(f"check: wide-space recommended / brute-force best = {ratio:.4f}; NSGA-II on the small space with "
          f"{budget} trials ({len(half.trial_keys)} proposals) found {output.describe(half.recommended.design)}: "
          f"/ brute-force best = {ratio_small:.4f} ({'both within' if ok else 'NOT within'} 2 %)")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
