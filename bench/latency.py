"""Decision latency: the scheduling core called directly, as the provisioner calls it.

Two cases (medians of ``--repeat`` runs, default 5):

* ``empty``: 1,000 pending generic pods (bench/cost.py's shapes), an empty cluster, the AWS
  catalog, Karpenter's getting-started pool (c/m/r on-demand, generation > 2, amd64), a DaemonSet.
* ``big``: the same 1,000 pending pods plus 10,000 existing nodes (m5.2xlarge, three zones, each
  with its own hostname) holding 100,000 running pods (10 per node). A new Scheduler each run,
  no cache: the first run of a process costs the same as the others.
* ``kept``: ``big`` as the provisioner and the simulated kube-scheduler run it, with a
  :class:`karpy.provisioning.reuse.SchedulingCache` kept between runs: before each timed run
  ``--changed`` nodes (default 10) get one more running pod and every node is given as a new
  ExistingNode object (as callers build them); one untimed run warms the cache first.

Prints seconds (median, min, max) and the cost of the new NodeClaims per case.

``--whole-catalog``: the NodePool requires only ``kubernetes.io/os: linux`` (every instance type,
spot and on-demand), as ``bench/e2e_scale.py --diverse``'s does. ``--diverse``: the pending pods are
``bench/e2e_scale.py --diverse``'s mix (600 Deployments' templates: generic, zonal and hostname
spread, zonal affinity, hostname anti-affinity) instead of generic ones.

Besides wall seconds, each case prints the median CPU seconds of the process (``cpu-s``: what to
compare on a loaded machine).

Run: ``python bench/latency.py [--repeat 5] [--nodes 10000] [--pending 1000] [--changed 10] [--whole-catalog]
[--diverse]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
from typing import Any

from karpy import clock
from karpy.api import labels as wk
from karpy.api import pod
from karpy.cloudprovider import catalog
from karpy.provisioning import results, reuse, scheduler, templates

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import cost
import e2e_scale

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
WHOLE_CATALOG = [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]


def existing_nodes(n: int, pods_per_node: int, types: list[Any]) -> list[results.ExistingNode]:
    it = next(t for t in types if t.name == "m5.2xlarge")
    out = []
    for i in range(n):
        name = f"ip-10-{i // 65536}-{(i // 256) % 256}-{i % 256}.ec2.internal"
        labels = {**it.labels, wk.ZONE: ZONES[i % 3], wk.CAPACITY_TYPE: "on-demand", wk.HOSTNAME: name,
                  wk.NODEPOOL: "default", wk.REGION: "us-east-1"}
        pods = [pod.build(f"run-{i}-{j}", namespace="default", labels={"app": f"r{j}"}, node_name=name,
                          requests={"cpu": "250m", "memory": "512Mi"}) for j in range(pods_per_node)]
        out.append(results.ExistingNode(name=name, labels=labels, taints=(), allocatable=dict(it.allocatable),
                                        pods=pods, nodepool="default"))
    return out


def timed(pods: list[pod.Pod], np_: Any, types: list[Any], ds: pod.Pod,
          existing: list[results.ExistingNode], cache: reuse.SchedulingCache | None = None
          ) -> tuple[float, float, float]:
    """(wall seconds, cost of the new NodeClaims, CPU seconds) of one decision."""
    cpu = _cpu()
    start = clock.perf_counter()
    res = scheduler.Scheduler([np_], {"default": types}, existing, [ds], cache=cache).solve(pods)
    return clock.perf_counter() - start, res.cost(), _cpu() - cpu


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def diverse_pods(n: int) -> list[pod.Pod]:
    """``n`` pending pods of bench/e2e_scale.py's diverse mix (its Deployments' templates)."""
    out: list[pod.Pod] = []
    for d in e2e_scale.diverse_deployments(n):
        template = d["spec"]["template"]
        name = d["metadata"]["name"]
        for i in range(d["_replicas"]):
            out.append(pod.Pod.from_manifest({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-{i}", "namespace": "default", "labels": template["metadata"]["labels"]},
                "spec": template["spec"]}))
    return out


def changed(existing: list[results.ExistingNode], run: int, count: int) -> list[results.ExistingNode]:
    """New ExistingNode objects for every node; ``count`` of them (spread over the cluster) with
    one more running pod."""
    step = max(1, len(existing) // max(count, 1))
    touched = set(range((run * 7) % step, len(existing), step)[:count])
    out = []
    for i, n in enumerate(existing):
        pods = list(n.pods)
        if i in touched:
            pods.append(pod.build(f"extra-{run}-{i}", namespace="default", labels={"app": "extra"}, node_name=n.name,
                                  requests={"cpu": "100m", "memory": "128Mi"}))
        out.append(results.ExistingNode(name=n.name, labels=n.labels, taints=n.taints, allocatable=n.allocatable,
                                        pods=pods, nodepool=n.nodepool))
    return out


def kept_runs(pods: list[pod.Pod], np_: Any, types: list[Any], ds: pod.Pod,
              existing: list[results.ExistingNode], repeat: int, count: int) -> list[tuple[float, float, float]]:
    cache = reuse.SchedulingCache()
    timed(pods, np_, types, ds, existing, cache)
    out = []
    for run in range(repeat):
        existing = changed(existing, run, count)
        out.append(timed(pods, np_, types, ds, existing, cache))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--pending", type=int, default=1000)
    ap.add_argument("--changed", type=int, default=10, help="nodes changed between kept runs")
    ap.add_argument("--whole-catalog", action="store_true",
                    help="a NodePool requiring only kubernetes.io/os=linux (every type, both capacity types: "
                         "bench/e2e_scale.py --diverse's) instead of Karpenter's getting-started one")
    ap.add_argument("--diverse", action="store_true",
                    help="the pending pods are bench/e2e_scale.py --diverse's mix (spread, affinity, anti-affinity)")
    args = ap.parse_args(argv)
    np_ = cost.on_demand_nodepool(WHOLE_CATALOG if args.whole_catalog else cost.NODEPOOLS["getting-started"])
    reqs = templates.nodepool_requirements(np_)
    types = [t for t in catalog.load("aws") if templates._type_compatible(reqs, t)]
    ds = cost.daemonset_pod()
    pods = diverse_pods(args.pending) if args.diverse else cost.make_pods(args.pending)
    big = existing_nodes(args.nodes, 10, types)
    cases = [("empty", []), ("big", big), ("kept", big)]
    print(f"{'case':>6} {'pending':>8} {'nodes':>7} {'median-s':>9} {'min-s':>7} {'max-s':>7} {'$/h':>9} {'cpu-s':>7}")
    for name, existing in cases:
        if name == "kept":
            runs = kept_runs(pods, np_, types, ds, existing, args.repeat, args.changed)
        else:
            runs = [timed(pods, np_, types, ds, existing) for _ in range(args.repeat)]
        secs = [r[0] for r in runs]
        print(f"{name:>6} {len(pods):>8} {len(existing):>7} {statistics.median(secs):>9.3f} {min(secs):>7.3f} "
              f"{max(secs):>7.3f} {runs[0][1]:>9.2f} {statistics.median(r[2] for r in runs):>7.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
