"""The packer's solvers: the fluid LP by type generation, the pattern LP and its integral bound,
and the plans the packer builds from them (checked by the independent validator)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from karpy.api import nodepool, pod
from karpy.cloudprovider import catalog
from karpy.provisioning import fluid, patterns, scheduler, templates

from . import validator
from .test_plan_validity import plan_of

GI = 2**30 * 1000


def _instance(seed: int, types: int, shapes: int) -> tuple[Any, Any, Any, Any]:
    """Random types (cpu, memory, pods) with roughly linear prices and pod shapes that fit."""
    rng = np.random.default_rng(seed)
    cpu = rng.choice([2000, 4000, 8000, 16000, 32000], size=types)
    mem = cpu * rng.choice([2, 4, 8], size=types) * GI // 1000
    pods = rng.choice([8, 17, 29, 58, 110], size=types) * 1000
    cap = np.stack([cpu, mem, pods], axis=1).astype(np.int64)
    price = (cpu / 1000 * 0.02 + mem / GI * 0.005) * rng.uniform(0.9, 1.1, size=types)
    reqs = np.stack([rng.choice([100, 250, 500, 1000, 1500], size=shapes),
                     rng.choice([1, 2, 4, 8], size=shapes) * GI // 8,
                     np.full(shapes, 1000)], axis=1).astype(np.int64)
    counts = rng.integers(1, 40, size=shapes).astype(np.int64)
    return cap, price, reqs, counts


def _full_lp(cap: Any, price: Any, reqs: Any, counts: Any) -> float:
    """The assignment LP over every type, written out directly."""
    m, c_n, k_n = len(cap), len(reqs), cap.shape[1]
    a_ub = sparse.lil_matrix((m * k_n, m + c_n * m))
    for t in range(m):
        for d in range(k_n):
            a_ub[t * k_n + d, t] = -cap[t, d] / 1e9
            for c in range(c_n):
                a_ub[t * k_n + d, m + c * m + t] = reqs[c, d] / 1e9
    a_eq = sparse.lil_matrix((c_n, m + c_n * m))
    for c in range(c_n):
        a_eq[c, m + c * m:m + (c + 1) * m] = 1
    res = linprog(np.concatenate([price, np.zeros(c_n * m)]), A_ub=a_ub.tocsr(), b_ub=np.zeros(m * k_n),
                  A_eq=a_eq.tocsr(), b_eq=counts.astype(float), bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize("seed", range(6))
def test_type_generation_reaches_the_optimum_of_the_lp_over_every_type(seed: int) -> None:
    cap, price, reqs, counts = _instance(seed, types=40, shapes=8)
    sol = fluid.solve(cap, price, reqs, counts)
    assert sol is not None
    assert sol.value == pytest.approx(_full_lp(cap, price, reqs, counts), rel=1e-6)
    assert sol.pods.sum(axis=1) == pytest.approx(counts.astype(float))
    load = reqs.T.astype(float) @ sol.pods
    assert (load <= sol.nodes * cap.T * (1 + 1e-6) + 1e-3).all()


def test_owned_nodes_are_free_capacity_for_the_lp() -> None:
    cap, price, reqs, counts = _instance(3, types=20, shapes=5)
    base = fluid.solve(cap, price, reqs, counts)
    assert base is not None
    t = int(np.argmax(base.nodes))
    owned = np.zeros(len(cap), dtype=np.int64)
    owned[t] = int(np.floor(base.nodes[t]))
    again = fluid.solve(cap, price, reqs, counts, owned)
    assert again is not None
    assert again.value + owned[t] * price[t] == pytest.approx(base.value, rel=1e-6)


def _integral_optimum(cap: Any, price: Any, reqs: Any, counts: Any, per_type: int) -> float:
    """The best packing, by a MILP with ``per_type`` node slots per type (small instances only)."""
    m, c_n, k_n = len(cap), len(reqs), cap.shape[1]
    scale = reqs.max(axis=0).astype(float)
    slots = [(t, s) for t in range(m) for s in range(per_type)]
    n_s = len(slots)
    n_var = n_s + n_s * c_n  # open_j, then pods y[j, c]
    cost = np.concatenate([np.array([price[t] for t, _ in slots]), np.zeros(n_s * c_n)])
    rows = []
    lo: list[float] = []
    hi: list[float] = []
    for j, (t, _) in enumerate(slots):
        for d in range(k_n):
            row = np.zeros(n_var)
            row[j] = -cap[t, d] / scale[d]
            row[n_s + j * c_n:n_s + (j + 1) * c_n] = reqs[:, d] / scale[d]
            rows.append(row)
            lo.append(-np.inf)
            hi.append(0.0)
    for c in range(c_n):
        row = np.zeros(n_var)
        row[n_s + c::c_n] = 1
        rows.append(row)
        lo.append(float(counts[c]))
        hi.append(float(counts[c]))
    upper = np.concatenate([np.ones(n_s), np.full(n_s * c_n, 1e6)])
    res = milp(cost, integrality=np.ones(n_var), bounds=Bounds(0, upper),
               constraints=LinearConstraint(np.array(rows), lo, hi))
    assert res.status == 0
    return float(res.fun)


def test_the_pattern_bound_lies_between_the_fluid_bound_and_the_best_packing() -> None:
    # pods that are large next to the nodes: two fit by cpu, the fluid LP packs 2.5
    cap = np.array([[2500, 4 * GI, 10_000], [5000, 8 * GI, 20_000]], dtype=np.int64)
    price = np.array([1.0, 2.05])
    reqs = np.array([[1000, GI, 1000], [700, GI // 2, 1000]], dtype=np.int64)
    counts = np.array([5, 4], dtype=np.int64)
    fl = fluid.solve(cap, price, reqs, counts)
    assert fl is not None
    start = patterns.single_shape_columns(cap, reqs, counts)
    res = patterns.solve(price, counts, start, patterns.exact_pricing(cap, price, reqs, counts), 50, True)
    assert res is not None and res.converged
    best = _integral_optimum(cap, price, reqs, counts, per_type=5)
    assert fl.value < res.lower_bound - 0.05
    assert res.lower_bound <= best + 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_the_pattern_bound_never_exceeds_a_packing_found_by_a_milp(seed: int) -> None:
    cap, price, reqs, counts = _instance(seed, types=3, shapes=3)
    counts = np.minimum(counts, 6)
    start = patterns.single_shape_columns(cap, reqs, counts)
    res = patterns.solve(price, counts, start, patterns.exact_pricing(cap, price, reqs, counts), 2, True)
    assert res is not None
    fl = fluid.solve(cap, price, reqs, counts)
    assert fl is not None
    assert res.lower_bound <= _integral_optimum(cap, price, reqs, counts, per_type=4) + 1e-9
    assert res.value >= fl.value - 1e-9


def test_a_pattern_plan_opens_nodes_that_hold_their_pods_and_no_more_pods_than_asked() -> None:
    cap, price, reqs, counts = _instance(5, types=30, shapes=10)
    out = patterns.plan(cap, price, reqs, counts, np.arange(len(cap), dtype=np.int64))
    taken = np.zeros(len(reqs), dtype=np.int64)
    for t, y, k in out:
        assert k >= 1
        assert (reqs.T @ y <= cap[t]).all()
        taken += k * y
    assert (taken <= counts).all()
    assert taken.sum() > 0


def _daemonset() -> pod.Pod:
    return pod.Pod.from_manifest({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "agent", "namespace": "kube-system",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                          "uid": "ds-1", "controller": True}]},
        "spec": {"containers": [{"name": "agent", "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}]},
    })


@pytest.mark.parametrize(("requirements", "n"), [
    ([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}], 300),
    ([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
      {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]}], 1200),
])
def test_packer_plans_on_the_aws_catalog_place_every_pod_and_hold_at_bind_time(
        requirements: list[dict[str, Any]], n: int) -> None:
    np_ = nodepool.NodePool.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"requirements": requirements, "nodeClassRef": {
            "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}})
    reqs = templates.nodepool_requirements(np_)
    types = [t for t in catalog.load("aws") if templates._type_compatible(reqs, t)]
    rng = random.Random(11)
    pods = [pod.build(f"p-{i}", namespace="default", labels={"app": f"a{i % 7}"},
                      requests={"cpu": rng.choice(["100m", "250m", "500m", "1000m", "1500m"]),
                                "memory": rng.choice(["100Mi", "512Mi", "2048Mi", "4096Mi"])})
            for i in range(n)]
    ds = _daemonset()
    res = scheduler.Scheduler([np_], {"default": types}, daemonsets=[ds]).solve(pods)
    assert res.placed_count() == n and not res.errors
    nodes, placements = plan_of(res)
    for node in nodes:  # every new node also runs the DaemonSet's pod
        placements.append((ds.to_manifest(), node["name"]))
    found = validator.violations(nodes, placements)
    assert found == [], f"{len(found)} violations, first: {found[:5]}"
    again = scheduler.Scheduler([np_], {"default": types}, daemonsets=[ds]).solve(pods)
    assert [(c.instance_type_names()[0], sorted(p.name for p in c.pods)) for c in again.new_claims] == \
        [(c.instance_type_names()[0], sorted(p.name for p in c.pods)) for c in res.new_claims]


def test_a_pattern_plan_leaves_shapes_its_start_types_cannot_hold_and_plans_the_rest() -> None:
    cap = np.array([[2000, 4 * GI, 10_000], [8000, 32 * GI, 50_000]], dtype=np.int64)
    price = np.array([0.1, 0.4])
    reqs = np.array([[500, GI, 1000], [4000, 16 * GI, 1000]], dtype=np.int64)
    counts = np.array([12, 3], dtype=np.int64)
    out = patterns.plan(cap, price, reqs, counts, np.array([0], dtype=np.int64))
    assert out
    assert all(y[1] == 0 for _, y, _ in out)
    assert sum(k * y[0] for _, y, k in out) <= 12


def _greedy_fill_every_step(cap: Any, reqs: Any, value: Any, left: Any, order: Any) -> tuple[Any, Any]:
    """greedy_fill as it was written first: every step of ``order``, useful or not."""
    m = len(cap)
    rem = cap.copy()
    val = np.zeros(m)
    take = np.zeros((m, len(reqs)), dtype=np.int64)
    rows = np.arange(m)
    for j in range(order.shape[1]):
        c = order[:, j]
        r = reqs[c]
        per = np.where(r > 0, rem // np.maximum(r, 1), 1 << 40)
        k = np.maximum(np.minimum(per.min(axis=1), left[c]), 0)
        k = np.where(value[c] > 0, k, 0)
        rem -= k[:, None] * r
        val += k * value[c]
        take[rows, c] += k
    return val, take


@pytest.mark.parametrize("seed", range(40))
def test_greedy_fill_skipping_steps_no_type_takes_gives_the_same_fill(seed: int) -> None:
    cap, _price, reqs, counts = _instance(seed, types=1 + seed % 17, shapes=1 + seed % 9)
    rng = np.random.default_rng(seed)
    value = rng.uniform(-0.5, 1.0, size=len(reqs)) * (rng.random(len(reqs)) < 0.7)  # zero, negative, positive
    left = counts * (rng.random(len(reqs)) < 0.8)
    order = np.argsort(rng.random((len(cap), len(reqs))), axis=1)
    got, want = patterns.greedy_fill(cap, reqs, value, left, order), _greedy_fill_every_step(cap, reqs, value, left,
                                                                                             order)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
