"""Packing quality: $/h of karpy's NodeClaims against the fluid LP lower bound.

Generic pods (cpu in {100, 250, 500, 1000, 1500}m, memory in {100, 256, 512, 1024, 2048,
4096}Mi, seeded) on the realistic AWS catalog, a DaemonSet (200m / 256Mi) on every node, one
on-demand NodePool. For each size, karpy's scheduler runs once; its cost is the sum of each new
NodeClaim's cheapest instance type. The bound is the fluid LP
``min sum_t price_t x_t  s.t.  sum_t x_t (allocatable_t - daemonset) >= total requests, x >= 0``
over cpu, memory and pods, solved with SciPy's HiGHS: no packing of whole pods into whole nodes
can cost less.

Run: ``python bench/cost.py [--counts 100,1000,5000,10000]``.
"""

from __future__ import annotations

import argparse
import random
import sys
from typing import Any

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from karpy import clock
from karpy.api import nodepool, pod, quantity
from karpy.cloudprovider import catalog
from karpy.provisioning import scheduler

CPUS = ["100m", "250m", "500m", "1000m", "1500m"]
MEMS = ["100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"]
DIMS = ("cpu", "memory", "pods")


def make_pods(n: int, seed: int = 7) -> list[pod.Pod]:
    rng = random.Random(seed)
    return [pod.build(f"p-{i}", namespace="default", labels={"app": f"a{i % 10}"},
                      requests={"cpu": rng.choice(CPUS), "memory": rng.choice(MEMS)}) for i in range(n)]


def daemonset_pod() -> pod.Pod:
    return pod.Pod.from_manifest({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "agent-template", "namespace": "kube-system",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                          "uid": "ds-1", "controller": True}]},
        "spec": {"containers": [{"name": "agent", "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}]},
    })


NODEPOOLS: dict[str, list[dict[str, Any]]] = {
    # Karpenter's getting-started NodePool (on-demand): c/m/r families, generation > 2, amd64
    "getting-started": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
    ],
    # every on-demand type of the catalog, burstable and tiny ones included
    "any": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
}


def on_demand_nodepool(requirements: list[dict[str, Any]]) -> Any:
    return nodepool.NodePool.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "requirements": requirements,
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}})


def lp_bound(pods: list[pod.Pod], types: list[Any], ds: pod.Pod) -> float:
    """The fluid assignment LP: pods of each shape may be split across node types fractionally and
    nodes may be fractional, but a pod's cpu, memory and pod slot go to the same node type.

    Variables: x_t (nodes of type t) and y_ct (pods of shape c on type t).
    min sum_t price_t x_t  s.t.  sum_c y_ct r_c <= x_t (allocatable_t - daemonset) per type and
    resource; sum_t y_ct = n_c per shape; all >= 0. Every integral packing is a feasible point, so
    its optimum is a lower bound on any packing's cost.
    """
    shapes: dict[tuple[int, ...], int] = {}
    for p in pods:
        key = tuple(p.requests.get(d, 0) for d in DIMS)
        shapes[key] = shapes.get(key, 0) + 1
    overhead = np.array([ds.requests.get(d, 0) for d in DIMS], dtype=float)
    avail, prices = [], []
    for t in types:
        price = t.cheapest_price(capacity_types=frozenset({"on-demand"}))
        if price is None:
            continue
        a = np.array([t.allocatable.get(d, 0) for d in DIMS], dtype=float) - overhead
        if (a <= 0).any():
            continue
        avail.append(a)
        prices.append(price)
    n_t, n_c, n_d = len(avail), len(shapes), len(DIMS)
    req = np.array(list(shapes), dtype=float)
    counts = np.array(list(shapes.values()), dtype=float)
    scale = req.max(axis=0)
    scale[scale == 0] = 1
    req_s = req / scale
    avail_s = np.array(avail) / scale
    # variable layout: x (n_t), then y (n_c * n_t) as y[c, t] at n_t + c * n_t + t
    n_var = n_t + n_c * n_t
    cost_vec = np.concatenate([np.array(prices), np.zeros(n_c * n_t)])
    a_ub = sparse.lil_matrix((n_t * n_d, n_var))
    for t in range(n_t):
        for d in range(n_d):
            row = t * n_d + d
            a_ub[row, t] = -avail_s[t, d]
            for c in range(n_c):
                a_ub[row, n_t + c * n_t + t] = req_s[c, d]
    a_eq = sparse.lil_matrix((n_c, n_var))
    for c in range(n_c):
        a_eq[c, n_t + c * n_t: n_t + (c + 1) * n_t] = 1.0
    res = linprog(cost_vec, A_ub=a_ub.tocsr(), b_ub=np.zeros(n_t * n_d), A_eq=a_eq.tocsr(), b_eq=counts,
                  bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"LP failed: {res.message}")
    return float(res.fun)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="100,1000,5000,10000")
    ap.add_argument("--nodepool", choices=[*NODEPOOLS, "both"], default="both")
    args = ap.parse_args(argv)
    names = list(NODEPOOLS) if args.nodepool == "both" else [args.nodepool]
    for name in names:
        print(f"NodePool {name!r}: {NODEPOOLS[name]}")
        run(name, [int(c) for c in args.counts.split(",")])
    return 0


def run(name: str, counts: list[int]) -> None:
    all_types = catalog.load("aws")
    ds = daemonset_pod()
    np_ = on_demand_nodepool(NODEPOOLS[name])
    from karpy.provisioning import templates

    reqs = templates.nodepool_requirements(np_)
    types = [t for t in all_types if templates._type_compatible(reqs, t)]
    print(f"{'pods':>6} {'nodes':>6} {'karpy $/h':>10} {'LP bound':>9} {'ratio':>6} {'seconds':>8}  top types")
    for n in counts:
        pods = make_pods(n)
        start = clock.perf_counter()
        res = scheduler.Scheduler([np_], {"default": types}, daemonsets=[ds]).solve(pods)
        took = clock.perf_counter() - start
        if res.errors:
            print(f"  {len(res.errors)} pods unplaced: {next(iter(res.errors.values()))}")
        cost = res.cost()
        bound = lp_bound(pods, types, ds)
        names: dict[str, int] = {}
        for c in res.new_claims:
            names[c.instance_types[0].name] = names.get(c.instance_types[0].name, 0) + 1
        top = ", ".join(f"{k} x{v}" for k, v in sorted(names.items(), key=lambda kv: -kv[1])[:3])
        print(f"{n:>6} {len(res.new_claims):>6} {cost:>10.3f} {bound:>9.3f} {cost / bound:>6.3f} {took:>8.3f}  {top}",
              flush=True)
    _ = quantity


if __name__ == "__main__":
    sys.exit(main())
