"""Speed of ``karpy simulate``: 24 simulated hours of a ~1,000-node cluster.

The scenario is generated: the aws catalog, one NodePool that may launch on-demand m5.xlarge only
(three 1-CPU pods per node), ``--deployments`` deployments whose replicas total ``3 * --nodes``,
and every 30 minutes one deployment scaled up or down by 10% (deterministic pattern). Prints the
simulated seconds, the wall and CPU seconds of the run, the speed-up factor (target: >= 10,000x on a
quiet machine, issue 27) and the load average before and after (on a loaded machine the CPU seconds
are the steadier figure: wall time is mostly waiting for a core), and with
``--profile`` the functions with the most cumulative and own time (cProfile).

Run: ``python bench/simulate.py [--hours 24] [--nodes 1000] [--profile [--profile-out FILE]]``
(``--profile-out`` also writes the cProfile data to FILE, for ``python -m pstats`` or a side-by-side
comparison with another branch).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time

import yaml

from karpy import clock
from karpy.simulator import engine, scenario

PODS_PER_NODE = 3


def scenario_text(nodes: int, deployments: int, hours: float) -> str:
    total = nodes * PODS_PER_NODE
    base = total // deployments
    steps = []
    t = 1800
    i = 0
    while t < hours * 3600:
        d = i % deployments
        factor = 1.1 if (i // deployments) % 2 == 0 else 1.0
        steps.append({"at": f"{t}s", "scale": {"kind": "Deployment", "namespace": "default",
                                               "name": f"app-{d}", "replicas": int(base * factor)}})
        t += 1800
        i += 1
    docs = [
        {"apiVersion": "karpy.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "bench"},
         "spec": {"cloud": {"provider": "aws", "region": "us-east-1",
                            "zones": ["us-east-1a", "us-east-1b", "us-east-1c"]},
                  "settings": {"clusterName": "bench"}, "until": f"{int(hours * 3600)}s", "seed": 1,
                  "steps": steps}},
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole-bench",
                  "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
                  "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}]}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
         "spec": {"template": {"spec": {
             "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
             "requirements": [
                 {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                 {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge"]}]}}}},
    ]
    for d in range(deployments):
        labels = {"app": f"app-{d}"}
        docs.append({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": f"app-{d}", "namespace": "default"},
                     "spec": {"replicas": base, "selector": {"matchLabels": labels},
                              "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                                  {"name": "app", "image": "app:1",
                                   "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}}}})
    return yaml.safe_dump_all(docs, sort_keys=False)


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--deployments", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="print cProfile hot spots")
    parser.add_argument("--profile-out", help="with --profile: also write the cProfile data to this file")
    args = parser.parse_args()

    scn = scenario.load_text(scenario_text(args.nodes, args.deployments, args.hours), source="bench")
    sim = engine.Simulation(scn)
    profiler = cProfile.Profile() if args.profile else None
    load_before = _loadavg()
    start, cpu_start = clock.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    result = sim.run()
    if profiler is not None:
        profiler.disable()
    wall, cpu = clock.perf_counter() - start, time.process_time() - cpu_start
    last = result.timeline[-1]
    print(f"simulated seconds: {result.until:.0f}")
    print(f"wall seconds:      {wall:.2f} (CPU seconds {cpu:.2f}; {os.cpu_count()} cores, load average "
          f"{load_before} before, {_loadavg()} after)")
    print(f"speed-up:          {result.until / wall:.0f}x wall, {result.until / cpu:.0f}x per CPU second "
          f"(target >= 10000x)")
    print(f"nodes at the end:  {sum(last.nodes_by_nodepool.values())}, pods running {last.running_pods}, "
          f"pending {last.pending_pods}; reconciles {result.reconciles}; "
          f"kube-scheduler runs {result.metrics['simulator']['kubeSchedulerRuns']}")
    if profiler is not None:
        if args.profile_out:
            profiler.dump_stats(args.profile_out)
        for order in ("cumulative", "tottime"):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(25)
            print(f"--- top 25 by {order}")
            print(out.getvalue())


if __name__ == "__main__":
    main()
