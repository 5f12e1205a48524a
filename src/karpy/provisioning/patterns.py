"""Whole-node patterns: the pattern (configuration) LP, solved by column generation.

A *pattern* is one node of one instance type with a whole number of pods of each shape that fits
its allocatable. The pattern LP chooses how many nodes of each pattern to open,
``min sum_j price_j z_j  s.t.  sum_j y_jc z_j >= n_c,  z >= 0``; unlike the fluid assignment LP
(:mod:`karpy.provisioning.fluid`) no node may hold a fraction of a pod, so where pods are large
next to the nodes (tiny instance types) its optimum is far closer to the best packing.

Columns are generated: from the master's duals ``u`` each round asks a *pricing* function for
patterns worth more than their price (``u . y > price_t``). Two pricings are given:

* :func:`greedy_pricing`: a fill of one node per type, NumPy over all types at once; fast, and
  good enough to pick patterns for the packer, but it may miss the best pattern, so the value
  it reaches is no bound;
* :func:`exact_pricing`: an integer knapsack per type (HiGHS through ``scipy.optimize.milp``,
  no time limit), which also returns an upper bound on every type's best pattern.

With exact pricing, :func:`solve` returns a *lower bound on the cost of any packing* (Farley's
bound ``value / max(1, max_t best_t / price_t)``, equal to the pattern LP optimum once no column
prices out). A caller may rely on: the same input gives the same output (no time limits; the
round limit is a count), and the module is pure (NumPy/SciPy only, no I/O).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Pricing = Callable[[FloatArray], tuple[list[tuple[int, IntArray]], FloatArray]]
"""duals -> (new columns as (type, pods per shape), upper bound of each type's best pattern value)."""
TOLERANCE = 1e-9
KNAPSACK_GAP = 1e-4
KNAPSACK_NODES = 2000
"""Branch-and-bound limits of one exact pricing knapsack (counts, not time: results do not depend
on machine speed); its dual bound stays a valid upper bound when a limit stops it."""


@dataclass(frozen=True)
class Result:
    """The last master LP and what it proves."""

    value: float
    """Optimum of the master LP over the generated columns (an upper bound on the pattern LP)."""
    lower_bound: float
    """A lower bound on any packing's cost when the pricing's bounds are exact; else 0."""
    types: IntArray
    """Per column, its instance type."""
    columns: IntArray
    """Columns x shapes: pods of each shape in one node of the column's pattern."""
    nodes: FloatArray
    """z_j, nodes of each column in the LP optimum."""
    rounds: int
    converged: bool
    """No column priced out in the last round."""


def single_shape_columns(cap: IntArray, reqs: IntArray, counts: IntArray) -> list[tuple[int, IntArray]]:
    """Starting columns: per type and shape, a node full of that shape alone (so the master is
    feasible whenever every shape fits some type)."""
    out: list[tuple[int, IntArray]] = []
    for c in range(len(reqs)):
        k = _fit(cap, reqs[c])
        k = np.minimum(k, counts[c])
        for t in np.flatnonzero(k > 0):
            y = np.zeros(len(reqs), dtype=np.int64)
            y[c] = k[t]
            out.append((int(t), y))
    return out


def solve(price: FloatArray, counts: IntArray, start: list[tuple[int, IntArray]], pricing: Pricing,
          max_rounds: int, exact: bool) -> Result | None:
    """Column generation from ``start`` until no column prices out or ``max_rounds`` rounds;
    None when the master is infeasible (some shape in no column)."""
    types = [t for t, _ in start]
    cols = [y for _, y in start]
    seen = {(t, y.tobytes()) for t, y in start}
    lower = 0.0
    rounds = 0
    converged = False
    while True:
        rounds += 1
        res = _master(price[np.array(types)], np.array(cols, dtype=np.int64), counts)
        if res is None:
            return None
        value, z, u = res
        new, best = pricing(u)
        ratio = max(1.0, float((best / price).max())) if len(best) else 1.0
        if exact:
            lower = max(lower, value / ratio)
        fresh = [(t, y) for t, y in new if (t, y.tobytes()) not in seen
                 and float(u @ y) > price[t] * (1 + TOLERANCE)]
        if not fresh or rounds >= max_rounds:
            converged = not fresh
            if converged and exact:
                lower = max(lower, value)
            return Result(value=value, lower_bound=lower, types=np.array(types, dtype=np.int64),
                          columns=np.array(cols, dtype=np.int64), nodes=z, rounds=rounds, converged=converged)
        for t, y in fresh:
            seen.add((t, y.tobytes()))
            types.append(t)
            cols.append(y)


def _master(price: FloatArray, cols: IntArray, counts: IntArray) -> tuple[float, FloatArray, FloatArray] | None:
    from karpy.provisioning import highs

    res = highs.solve(price, -cols.T.astype(np.float64), -counts.astype(np.float64))
    if res is None:
        return None
    u = np.maximum(-res.ineq_marginals, 0.0)
    return res.fun, res.x, u


def _fit(cap: IntArray, r: IntArray) -> IntArray:
    """How many pods of request ``r`` fit on each type alone."""
    nz = r > 0
    if not nz.any():
        return np.full(len(cap), 1 << 30, dtype=np.int64)
    out: IntArray = (cap[:, nz] // r[nz]).min(axis=1).astype(np.int64)
    return out


def relaxed_worth(cap: IntArray, reqs: IntArray, u: FloatArray) -> FloatArray:
    """Per type, an upper bound on ``u . y`` over patterns y: each resource alone, filled with the
    shape worth most per unit of it."""
    worth = np.full(len(cap), np.inf)
    for d in range(cap.shape[1]):
        use = reqs[:, d] > 0
        if not use.any():
            continue
        density = float((u[use] / reqs[use, d]).max())
        worth = np.minimum(worth, cap[:, d] * density)
    if np.isinf(worth).any():  # a shape using no resource at all: unbounded per type
        worth[np.isinf(worth)] = float(u.sum()) * 1e9
    return worth


def exact_pricing(cap: IntArray, price: FloatArray, reqs: IntArray, counts: IntArray,
                  max_knapsacks: int = 1 << 30) -> Pricing:
    """Pricing with proven bounds: every type's best pattern is bounded by its knapsack's LP
    relaxation (one block LP over all types), and the integer knapsack (HiGHS, no time limit) is
    solved lazily for the type whose bound per dollar is highest until that highest bound is an
    exact one, so the returned bounds are valid and their maximum ratio to price is exact.
    ``max_knapsacks`` caps the integer knapsacks per round (the bounds stay valid, only looser)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    hi_all = np.array([np.minimum(counts, _fit_each(cap[t], reqs)) for t in range(len(cap))], dtype=np.int64)
    scale = np.maximum(reqs.max(axis=0), 1).astype(np.float64)
    r_scaled = (reqs / scale).T

    def price_out(u: FloatArray) -> tuple[list[tuple[int, IntArray]], FloatArray]:
        upper = _relaxed_knapsacks(cap, reqs, hi_all, u)
        exact = np.zeros(len(cap), dtype=np.bool_)
        out: list[tuple[int, IntArray]] = []
        for _ in range(min(max_knapsacks, len(cap))):
            ratio = upper / price
            t = int(np.lexsort((np.arange(len(cap)), -ratio))[0])
            if exact[t] or ratio[t] <= 1 + TOLERANCE:
                break
            res = milp(-u, integrality=np.ones(len(u)), bounds=Bounds(0, hi_all[t].astype(np.float64)),
                       constraints=LinearConstraint(r_scaled, -np.inf, cap[t] / scale),
                       options={"mip_rel_gap": KNAPSACK_GAP, "node_limit": KNAPSACK_NODES, "presolve": False})
            exact[t] = True
            if res.x is None:
                continue
            dual = res.mip_dual_bound if res.mip_dual_bound is not None else res.fun
            upper[t] = min(upper[t], -float(dual))
            y = np.floor(np.asarray(res.x) + 0.5).astype(np.int64)
            if (reqs.T @ y <= cap[t]).all() and float(u @ y) > price[t] * (1 + TOLERANCE):
                out.append((t, y))
        return out, upper

    return price_out


def _relaxed_knapsacks(cap: IntArray, reqs: IntArray, hi: IntArray, u: FloatArray) -> FloatArray:
    """Per type, the LP relaxation of its knapsack ``max u . y, sum_c y_c r_c <= cap_t,
    0 <= y <= hi_t``: all types in one block LP (each block is optimal on its own). A little is
    added for the solver's tolerance, so every value is an upper bound."""
    from scipy import sparse

    from karpy.provisioning import highs

    m, c_n, k_n = len(cap), len(reqs), cap.shape[1]
    scale = np.maximum(reqs.max(axis=0), 1).astype(np.float64)
    r = reqs / scale
    rows, cols, vals = [], [], []
    for d in range(k_n):
        for c in range(c_n):
            if r[c, d] == 0:
                continue
            rows.append(np.arange(m) * k_n + d)
            cols.append(np.arange(m) * c_n + c)
            vals.append(np.full(m, r[c, d]))
    a_ub = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(m * k_n, m * c_n))
    res = highs.solve(-np.tile(u, m), a_ub, (cap / scale).reshape(-1), upper=hi.reshape(-1).astype(np.float64))
    if res is None:
        return relaxed_worth(cap, reqs, u)
    y = res.x.reshape(m, c_n)
    value: FloatArray = (y @ u) * (1 + 1e-7) + 1e-12
    return np.minimum(value, relaxed_worth(cap, reqs, u))


def _fit_each(cap_t: IntArray, reqs: IntArray) -> IntArray:
    big = np.int64(1 << 30)
    per = np.where(reqs > 0, cap_t // np.maximum(reqs, 1), big)
    out: IntArray = per.min(axis=1).astype(np.int64)
    return out


def greedy_pricing(cap: IntArray, price: FloatArray, reqs: IntArray, counts: IntArray) -> Pricing:
    """Pricing by greedy fills (shapes by dual value per unit of the type's scarcest resource, and
    by dual value alone), one node per type, all types at once; returns the relaxed worth as
    the (loose) bound."""
    m = len(cap)
    share = (reqs[None, :, :] / np.maximum(cap[:, None, :], 1)).max(axis=2)

    def price_out(u: FloatArray) -> tuple[list[tuple[int, IntArray]], FloatArray]:
        orders = [np.argsort(-(u[None, :] / np.maximum(share, 1e-12)), axis=1, kind="stable"),
                  np.tile(np.argsort(-u, kind="stable"), (m, 1))]
        best_val = np.zeros(m)
        best_take = np.zeros((m, len(reqs)), dtype=np.int64)
        for order in orders:
            val, take = greedy_fill(cap, reqs, u, counts, order)
            better = val > best_val
            best_val[better] = val[better]
            best_take[better] = take[better]
        out = [(int(t), best_take[t]) for t in np.flatnonzero(best_val > price * (1 + TOLERANCE))]
        return out, relaxed_worth(cap, reqs, u)

    return price_out


def greedy_fill(cap: IntArray, reqs: IntArray, value: FloatArray, left: IntArray,
          order: IntArray) -> tuple[FloatArray, IntArray]:
    """Greedy fill of one node per type, shapes taken in ``order`` (types x shapes); shapes of no
    value are skipped. Returns the value and the pod counts per type."""
    m = len(cap)
    rem = cap.copy()
    val = np.zeros(m)
    take = np.zeros((m, len(reqs)), dtype=np.int64)
    rows = np.arange(m)
    useful = (value > 0) & (left > 0)
    for j in np.flatnonzero(useful[order].any(axis=0)):  # a step where no type takes a pod changes nothing
        c = order[:, j]
        r = reqs[c]
        per = np.where(r > 0, rem // np.maximum(r, 1), 1 << 40)
        k = np.maximum(np.minimum(per.min(axis=1), left[c]), 0)
        k = np.where(value[c] > 0, k, 0)
        rem -= k[:, None] * r
        val += k * value[c]
        take[rows, c] += k
    return val, take


def plan(cap: IntArray, price: FloatArray, reqs: IntArray, counts: IntArray, start_types: IntArray,
         max_rounds: int = 30) -> list[tuple[int, IntArray, int]]:
    """Whole nodes for the pods, cutting-stock style: solve the pattern LP (greedy pricing over
    every type, starting from single-shape columns of ``start_types``), keep floor(z_j) nodes of
    each pattern, and go again on what is left while that keeps at least one node. Returns
    (type, pods per shape, nodes) in the order chosen; what is left over is the caller's (at most
    a few nodes' worth). Shapes no start type holds are left to the caller too."""
    fits = (cap[start_types][:, None, :] >= reqs[None, :, :]).all(axis=2).any(axis=0)
    left = np.where(fits, counts, 0).astype(np.int64)
    out: list[tuple[int, IntArray, int]] = []
    carried: list[tuple[int, IntArray]] = []
    while left.sum() > 0:
        start = [(int(t), y) for t, y in single_shape_columns(cap[start_types], reqs, left)]
        start = [(int(start_types[t]), y) for t, y in start]
        start += [(t, np.minimum(y, left)) for t, y in carried if (np.minimum(y, left) > 0).any()]
        res = solve(price, left, start, greedy_pricing(cap, price, reqs, left), max_rounds, False)
        if res is None:
            break
        whole = np.floor(res.nodes + 1e-6).astype(np.int64)
        if whole.sum() == 0:  # dive: round the largest fraction up
            whole[int(np.lexsort((np.arange(len(res.nodes)), -res.nodes))[0])] = 1
        for j in np.argsort(-res.nodes, kind="stable"):
            if whole[j] <= 0:
                continue
            y = np.minimum(res.columns[j], left)
            k = int(whole[j])
            if y.sum() == 0:
                continue
            used = y > 0
            k = min(k, int((left[used] // y[used]).min()))
            if k <= 0:
                continue
            out.append((int(res.types[j]), y.copy(), k))
            left -= k * y
        carried = [(int(t), y) for t, y, z in zip(res.types, res.columns, res.nodes, strict=True) if z > 1e-9]
    return out
