"""The fluid assignment LP over instance types and pod shapes, solved by generating types.

Variables x_t (nodes of type t, fractional) and y_ct (pods of shape c on type t); minimise
``sum_t price_t x_t`` such that every pod is assigned (``sum_t y_ct = n_c``) and no type's nodes
are over-committed (``sum_c y_ct r_c <= x_t a_t`` per resource). Its optimum is a lower bound on
the cost of any packing of whole pods into whole nodes of these types.

The LP's size is types x shapes, but its optimum uses a handful of types. :func:`solve` starts
from the best type for each shape alone and adds types only while the duals cannot prove the
rest useless: with ``u_c`` the duals of the assignment rows and ``w_s`` (per resource, >= 0) the
duals of an included type's capacity rows, ``w_s . r_c >= u_c`` for every shape, so no mix of pods
is worth more than ``w_s . a_t`` on a node of type t. A type whose price is at least
``min_s w_s . a_t`` therefore cannot lower the cost, and the LP over the included types is
optimal for all of them. A caller may rely on:

* the value returned is the optimum of the LP over *all* the types given (not an estimate);
* the same input gives the same output (HiGHS' dual simplex, no time limit; the loop adds at
  least one type per round, so it ends after at most as many rounds as there are types);
* it is pure: NumPy and SciPy only, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Solution:
    """The LP optimum: nodes per type and pods per (shape, type), over every type given."""

    value: float
    nodes: FloatArray
    """x_t, one per type."""
    pods: FloatArray
    """y_ct, shapes x types."""
    rounds: int
    types_used_in_lp: int
    """How many types the last LP held (the others were proven not to lower the cost)."""


def solve(cap: IntArray, price: FloatArray, reqs: IntArray, counts: IntArray,
          owned: IntArray | None = None) -> Solution | None:
    """The fluid LP optimum for ``counts[c]`` pods of shape ``reqs[c]`` on types with allocatable
    ``cap[t]`` (after DaemonSet overhead) at ``price[t]``; None when some shape fits no type.

    ``owned[t]`` whole nodes of type t are already paid for: their capacity is free (the value
    is then what the pods cost beyond them)."""
    m, c_n = len(cap), len(reqs)
    if m == 0 or c_n == 0:
        return None
    scale = np.maximum(reqs.max(axis=0), 1).astype(np.float64)
    r = reqs / scale
    a = cap / scale
    free = np.zeros(m, dtype=np.int64) if owned is None else owned
    included = _initial(cap, price, reqs)
    if included is None:
        return None
    included.update(int(t) for t in np.flatnonzero(free > 0))
    rounds = 0
    while True:
        rounds += 1
        sub = np.array(sorted(included), dtype=np.int64)
        res = _lp(a[sub], price[sub], r, counts, free[sub])
        if res is None:
            return None
        value, x, y, w = res
        # the best any included type's duals can say about each type's worth
        worth = (a @ w.T).min(axis=1)
        missing = np.flatnonzero(worth > price * (1 + TOLERANCE))
        new = [int(t) for t in missing if int(t) not in included]
        if not new:
            nodes = np.zeros(m)
            nodes[sub] = x
            pods = np.zeros((c_n, m))
            pods[:, sub] = y
            return Solution(value=value, nodes=nodes, pods=pods, rounds=rounds, types_used_in_lp=len(sub))
        included.update(new)


def _initial(cap: IntArray, price: FloatArray, reqs: IntArray) -> set[int] | None:
    """Per shape, the type with the lowest price per pod when it holds only that shape."""
    out: set[int] = set()
    for c in range(len(reqs)):
        nz = reqs[c] > 0
        k = (cap[:, nz] // reqs[c][nz]).min(axis=1) if nz.any() else np.full(len(cap), 1 << 30)
        ok = np.flatnonzero(k > 0)
        if len(ok) == 0:
            return None
        per_pod = price[ok] / k[ok]
        out.add(int(ok[np.lexsort((ok, per_pod))[0]]))
    return out


def _lp(a: FloatArray, price: FloatArray, r: FloatArray, counts: IntArray, free: IntArray
        ) -> tuple[float, FloatArray, FloatArray, FloatArray] | None:
    """Solve the LP over the given types (scaled units): value, x, y (shapes x types) and the
    capacity duals w (types x resources, >= 0)."""
    from scipy import sparse

    from karpy.provisioning import highs

    m, c_n, k_n = len(a), len(r), a.shape[1]
    n_var = m + c_n * m
    rows: list[IntArray] = []
    cols: list[IntArray] = []
    vals: list[FloatArray] = []
    t_idx = np.arange(m)
    for d in range(k_n):
        row = t_idx * k_n + d
        rows.append(row)
        cols.append(t_idx)
        vals.append(-a[:, d])
        for c in range(c_n):
            if r[c, d] == 0:
                continue
            rows.append(row)
            cols.append(m + c * m + t_idx)
            vals.append(np.full(m, r[c, d]))
    a_ub = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(m * k_n, n_var))
    eq_rows = np.repeat(np.arange(c_n), m)
    eq_cols = m + np.arange(c_n * m)
    a_eq = sparse.csr_matrix((np.ones(c_n * m), (eq_rows, eq_cols)), shape=(c_n, n_var))
    cost = np.concatenate([price, np.zeros(c_n * m)])
    res = highs.solve(cost, a_ub, (free[:, None] * a).reshape(-1), a_eq, counts.astype(np.float64))
    if res is None:
        return None
    w = np.maximum(-res.ineq_marginals, 0.0).reshape(m, k_n)
    x = res.x[:m]
    y = res.x[m:].reshape(c_n, m)
    return res.fun, x, y, w
