"""The scheduling core as the end-to-end loop calls it: the provisioner's and kube-scheduler's solves.

The pending pods are bench/e2e_scale.py's benchmark mix as Deployments (five classes, seven
Deployments each: the pods of one Deployment are identical but for their names), the AWS catalog,
e2e_scale's on-demand c/m/r NodePool, one DaemonSet. Cases, each a median of ``--repeat`` runs:

* ``first``: the provisioner's first solve of the burst: every pod pending, empty cluster. A new
  :class:`karpy.provisioning.reuse.SchedulingCache` each run (the cold first solve).
* ``inflight``: the provisioner's solves while the burst's NodeClaims launch: every pod still
  pending, the first solve's NodeClaims in flight (bins without pods, labels from their
  requirements, allocatable of their cheapest type). A kept cache (one untimed warm-up run),
  every node a new ExistingNode object each run (as ``state.existing_nodes`` builds them).
* ``mixed``: half of the NodeClaims registered as Nodes with their pods bound (full labels, own
  hostname), the other half in flight; the other half's pods pending. Kept cache.
* ``kubesched``: the simulated kube-scheduler: no NodePools, the NodeClaims as ready empty Nodes,
  ``--kube-pending`` (default: a fifth of the pods, at most 5,000) pods pending. Kept cache.
* ``whatif``: consolidation after the burst: every NodeClaim a Node running its pods; each run
  removes another node (spread over the cluster) and places its pods on the rest or new
  NodeClaims, as ``disruption.simulation.simulate_removal`` does, all runs sharing one cache (as
  the what-ifs over one snapshot do).

Prints, per case: pending pods, bins, seconds (median, min, max), placed pods, new NodeClaims, the
Python heap peak of one run in MB (tracemalloc, an extra untimed run) and the process's peak RSS.

Run: ``python bench/loop_solves.py [--counts 10000,100000] [--repeat 3] [--cases first,inflight,...]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

from karpy import clock
from karpy.api import labels as wk
from karpy.api import nodepool, pod
from karpy.cloudprovider import catalog
from karpy.provisioning import results, reuse, scheduler, templates

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import cost
import e2e_scale

CASES = ("first", "inflight", "mixed", "kubesched", "whatif")


def make_pods(n: int) -> list[pod.Pod]:
    """e2e_scale's Deployments' pods (``n`` in all), as the ReplicaSet controller names them."""
    out: list[pod.Pod] = []
    for d in e2e_scale.deployments(n):
        name = d["metadata"]["name"]
        tmpl = d["spec"]["template"]
        spec = dict(tmpl["spec"])
        requests = spec.pop("containers")[0]["resources"]["requests"]
        labels = {**tmpl["metadata"]["labels"], "pod-template-hash": "5d9c7f8b4"}
        for i in range(d["_replicas"]):
            out.append(pod.build(f"{name}-5d9c7f8b4-{i:05d}", namespace="default", labels=labels,
                                 requests=requests, **spec))
    return out


def the_nodepool() -> nodepool.NodePool:
    docs = e2e_scale.scenario_text(5).split("\n---\n")
    import yaml

    manifest = next(m for m in (yaml.safe_load(t) for t in docs) if m["kind"] == "NodePool")
    return nodepool.NodePool.from_manifest(manifest)


def claim_bin(c: results.NewNodeClaim, i: int, *, registered: bool, pods: list[pod.Pod] | None = None
              ) -> results.ExistingNode:
    """A planned NodeClaim as the provisioner's state shows it: in flight (labels from its decided
    requirements) or registered (a Node of its cheapest type, with its own hostname)."""
    labels = {**c.requirements.labels(), **c.labels, wk.NODEPOOL: c.nodepool}
    t = c.instance_types[0]
    if registered:
        zone = labels.get(wk.ZONE) or sorted(t.zones)[0]
        name = f"ip-10-0-{i // 256}-{i % 256}.ec2.internal"
        labels = {**labels, **t.labels, wk.ZONE: zone, wk.HOSTNAME: name, wk.CAPACITY_TYPE: "on-demand",
                  wk.INITIALIZED: "true"}
        return results.ExistingNode(name=name, labels=labels, taints=(), allocatable=dict(t.allocatable),
                                    pods=list(pods or ()), nodepool=c.nodepool)
    return results.ExistingNode(name=f"default-{i:05d}", labels=labels, taints=tuple(c.taints),
                                allocatable=dict(t.allocatable), pods=[], nodepool=c.nodepool, in_flight=True)


def renew(nodes: list[results.ExistingNode]) -> list[results.ExistingNode]:
    """Every node as a new ExistingNode object with the same content (as callers build them)."""
    return [results.ExistingNode(name=n.name, labels=n.labels, taints=n.taints, allocatable=n.allocatable,
                                 pods=n.pods, nodepool=n.nodepool, in_flight=n.in_flight,
                                 schedulable=n.schedulable) for n in nodes]


class Setup:
    def __init__(self, n: int) -> None:
        self.pool = the_nodepool()
        reqs = templates.nodepool_requirements(self.pool)
        self.types = {"default": [t for t in catalog.load("aws") if templates._type_compatible(reqs, t)]}
        self.ds = cost.daemonset_pod()
        self.pods = make_pods(n)
        first = self.provisioner([], None).solve(self.pods)
        self.claims = first.new_claims
        self.first_errors = len(first.errors)

    def provisioner(self, existing: list[results.ExistingNode], cache: reuse.SchedulingCache | None
                    ) -> scheduler.Scheduler:
        return scheduler.Scheduler([self.pool], self.types, existing, [self.ds], {}, cache=cache)

    def case(self, name: str, kube_pending: int) -> tuple[list[pod.Pod], list[results.ExistingNode],
                                                          Callable[[list[results.ExistingNode],
                                                                    reuse.SchedulingCache | None],
                                                                   scheduler.Scheduler], bool]:
        """(pending, bins, scheduler factory, keep a cache)."""
        if name == "first":
            return self.pods, [], self.provisioner, False
        if name == "inflight":
            return self.pods, [claim_bin(c, i, registered=False) for i, c in enumerate(self.claims)], \
                self.provisioner, True
        if name == "mixed":
            bins, pending = [], []
            for i, c in enumerate(self.claims):
                if i % 2 == 0:
                    bins.append(claim_bin(c, i, registered=True, pods=c.pods))
                else:
                    bins.append(claim_bin(c, i, registered=False))
                    pending.extend(c.pods)
            return pending, bins, self.provisioner, True
        bins = [claim_bin(c, i, registered=True) for i, c in enumerate(self.claims)]
        pending = self.pods[::max(1, len(self.pods) // kube_pending)][:kube_pending]
        return pending, bins, lambda ex, cache: scheduler.Scheduler(existing=ex, cache=cache), True


def whatif_case(setup: Setup, repeat: int) -> dict[str, Any]:
    nodes = [claim_bin(c, i, registered=True, pods=c.pods) for i, c in enumerate(setup.claims)]
    cache = reuse.SchedulingCache()
    step = max(1, len(nodes) // (repeat + 1))

    def once(k: int) -> tuple[float, results.Results, int]:
        gone = nodes[k]
        rest = [n for n in renew(nodes) if n.name != gone.name]
        start = clock.perf_counter()
        res = setup.provisioner(rest, cache).solve(gone.pods)
        return clock.perf_counter() - start, res, len(gone.pods)

    once(0)
    runs = [once(step * (r + 1)) for r in range(repeat)]
    secs = [r[0] for r in runs]
    tracemalloc.start()
    once(step)
    heap = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    res = runs[-1][1]
    return {"case": "whatif", "pending": runs[-1][2], "bins": len(nodes) - 1, "median": statistics.median(secs),
            "min": min(secs), "max": max(secs), "placed": res.placed_count(), "claims": len(res.new_claims),
            "errors": len(res.errors), "heap": heap}


def run_case(setup: Setup, name: str, repeat: int, kube_pending: int) -> dict[str, Any]:
    if name == "whatif":
        return whatif_case(setup, repeat)
    pending, bins, make, keep = setup.case(name, kube_pending)
    cache = reuse.SchedulingCache() if keep else None
    if cache is not None:
        make(renew(bins), cache).solve(pending)
    secs: list[float] = []
    res = results.Results()
    for _ in range(repeat):
        c = cache if keep else None
        existing = renew(bins)
        start = clock.perf_counter()
        res = make(existing, c).solve(pending)
        secs.append(clock.perf_counter() - start)
    tracemalloc.start()
    make(renew(bins), cache if keep else None).solve(pending)
    heap = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return {"case": name, "pending": len(pending), "bins": len(bins), "median": statistics.median(secs),
            "min": min(secs), "max": max(secs), "placed": res.placed_count(), "claims": len(res.new_claims),
            "errors": len(res.errors), "heap": heap}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--kube-pending", type=int, default=0, help="pending pods of the kubesched case")
    args = ap.parse_args(argv)
    print(f"{'pods':>7} {'case':>9} {'pending':>8} {'bins':>6} {'median-s':>9} {'min-s':>7} {'max-s':>7} "
          f"{'placed':>7} {'claims':>6} {'errors':>6} {'heap-MB':>8} {'rss-MB':>7}", flush=True)
    for n in (int(c) for c in args.counts.split(",")):
        setup = Setup(n)
        kube_pending = args.kube_pending or min(5000, n // 5)
        for name in args.cases.split(","):
            r = run_case(setup, name, args.repeat, kube_pending)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{n:>7} {r['case']:>9} {r['pending']:>8} {r['bins']:>6} {r['median']:>9.3f} {r['min']:>7.3f} "
                  f"{r['max']:>7.3f} {r['placed']:>7} {r['claims']:>6} {r['errors']:>6} {r['heap']:>8.0f} "
                  f"{rss:>7.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
