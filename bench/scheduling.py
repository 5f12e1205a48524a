"""Karpenter's scheduling benchmark, reproduced on karpy's scheduling core.

Shape (as Karpenter's scheduling_benchmark_test.go): the benchmark catalog with 400 instance
types, one NodePool without limits, no existing nodes, no DaemonSets. Pods come in five equal
parts: generic; zonal topology spread (maxSkew 1, DoNotSchedule, selector on a label with 7
random values); hostname spread (same); zonal self pod-affinity (label with random values);
hostname anti-affinity (all app=nginx, one per node). cpu in {100, 250, 500, 1000, 1500}m,
memory in {100, 256, 512, 1024, 2048, 4096}Mi, seeded.

Run: ``python bench/scheduling.py [--counts 1,100,1000,5000,10000,20000] [--repeat 3]``.
Prints pods, nodes, seconds (median of the repeats) and pods/s per size.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from typing import Any

from karpy import clock
from karpy.api import nodepool, pod
from karpy.cloudprovider.fake import instancetypes
from karpy.provisioning import scheduler

CPUS = ["100m", "250m", "500m", "1000m", "1500m"]
MEMS = ["100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"]
VALUES = [f"value-{i}" for i in range(7)]


def _pod(rng: random.Random, name: str, labels: dict[str, str], **spec: Any) -> pod.Pod:
    return pod.build(name, namespace="default", labels=labels,
                     requests={"cpu": rng.choice(CPUS), "memory": rng.choice(MEMS)}, **spec)


def make_pods(n: int, seed: int = 42) -> list[pod.Pod]:
    rng = random.Random(seed)
    per = n // 5
    rest = n - 4 * per
    out: list[pod.Pod] = []
    for i in range(rest):
        out.append(_pod(rng, f"generic-{i}", {"my-label": rng.choice(VALUES)}))
    for key, kind in (("topology.kubernetes.io/zone", "zonal"), ("kubernetes.io/hostname", "hostname")):
        for i in range(per):
            value = rng.choice(VALUES)
            spread = [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                       "labelSelector": {"matchLabels": {"my-label": value}}}]
            out.append(_pod(rng, f"{kind}-spread-{i}", {"my-label": value}, topologySpreadConstraints=spread))
    for i in range(per):
        value = rng.choice(VALUES)
        affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"my-affinity": value}}}]}}
        out.append(_pod(rng, f"affinity-{i}", {"my-affinity": value}, affinity=affinity))
    for i in range(per):
        affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "nginx"}}}]}}
        out.append(_pod(rng, f"anti-{i}", {"app": "nginx"}, affinity=affinity))
    return out


def default_nodepool() -> Any:
    return nodepool.NodePool.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"requirements": [],
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}})


def run_once(pods: list[pod.Pod], types: list[Any], np_: Any) -> tuple[float, int, int, int]:
    start = clock.perf_counter()
    res = scheduler.Scheduler([np_], {"default": types}).solve(pods)
    took = clock.perf_counter() - start
    return took, len(res.new_claims), res.placed_count(), len(res.errors)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="1,100,1000,5000,10000,20000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    types = instancetypes.benchmark(400)
    np_ = default_nodepool()
    print(f"{'pods':>7} {'nodes':>6} {'placed':>7} {'failed':>6} {'seconds':>8} {'pods/s':>9}")
    for n in (int(c) for c in args.counts.split(",")):
        pods = make_pods(n)
        runs = [run_once(pods, types, np_) for _ in range(args.repeat)]
        secs = statistics.median(r[0] for r in runs)
        _, nodes, placed, failed = runs[0]
        print(f"{n:>7} {nodes:>6} {placed:>7} {failed:>6} {secs:>8.3f} {n / secs:>9.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
