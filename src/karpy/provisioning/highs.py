"""Linear programs handed to HiGHS' dual simplex directly, as ``scipy.optimize.linprog(method="highs-ds")``
would, without its per-call overhead.

The pattern LP's column generation and the fluid LP solve many small LPs per decision (tens of
rounds of a few hundred variables); for those, ``linprog``'s input checks, option validation and
result assembly (a Python loop over every column) cost several times HiGHS' own solve. :func:`solve`
builds the same model (the same constraint matrix in the same column-wise order, the same bounds,
HiGHS' infinity for infinite ones) and sets the same options (presolve on, simplex, dual strategy,
no output) on SciPy's bundled HiGHS, so its answer is the one ``linprog`` gives, bit for bit
(``tests/unit/provisioning/test_highs.py`` compares them on random LPs). Where SciPy does not bundle
HiGHS' bindings (SciPy < 1.15), it calls ``linprog`` itself.

A caller may rely on: the same input gives the same output (no time limit), and the module is
pure (NumPy/SciPy, no I/O).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

try:  # SciPy >= 1.15 bundles HiGHS' Python bindings (private, but linprog itself calls them)
    from scipy.optimize._highspy import _core as _h

    _INF = float(_h.kHighsInf)
    # Every binding used below, looked up once: a SciPy whose private bindings differ falls back
    # to linprog here instead of failing in the middle of a decision.
    for _name in ("_Highs", "HighsLp", "HighsOptions", "MatrixFormat", "simplex_constants", "HighsDebugLevel",
                  "HighsStatus", "HighsModelStatus"):
        getattr(_h, _name)
except (ImportError, AttributeError):  # pragma: no cover - older SciPy: linprog does the same work, slower
    _h = None
    _INF = float("inf")


@dataclass(frozen=True)
class Solution:
    """An optimal solution: value, primal x and the duals of the rows (linprog's ``marginals``)."""

    fun: float
    x: FloatArray
    ineq_marginals: FloatArray
    """One per ``a_ub`` row (<= 0 for a binding row of a minimisation, as linprog reports them)."""
    eq_marginals: FloatArray
    """One per ``a_eq`` row."""


def solve(cost: FloatArray, a_ub: Any, b_ub: FloatArray, a_eq: Any = None, b_eq: FloatArray | None = None,
          lower: FloatArray | float = 0.0, upper: FloatArray | float | None = None) -> Solution | None:
    """``min cost . x  s.t.  a_ub x <= b_ub,  a_eq x = b_eq,  lower <= x <= upper`` (``a_ub`` and
    ``a_eq`` dense or SciPy sparse; ``upper`` None for no upper bound); None unless HiGHS proves an
    optimum (infeasible, unbounded or failed)."""
    from scipy import sparse

    c = np.array(cost, dtype=np.float64).reshape(-1)
    n = len(c)
    b_ub_f = np.asarray(b_ub, dtype=np.float64).reshape(-1)
    b_eq_f = np.zeros(0) if b_eq is None else np.asarray(b_eq, dtype=np.float64).reshape(-1)
    if _h is None:  # pragma: no cover
        return _linprog(c, a_ub, b_ub_f, a_eq, b_eq_f, lower, upper)
    if sparse.issparse(a_ub) or sparse.issparse(a_eq):
        parts = [sparse.csr_array(a_ub)]
        if a_eq is not None:
            parts.append(sparse.csr_array(a_eq))
        a = sparse.csc_array(sparse.vstack(parts)) if len(parts) > 1 else sparse.csc_array(parts[0])
        start, index, value = a.indptr, a.indices, a.data
    else:
        dense = np.asarray(a_ub, dtype=np.float64)
        if a_eq is not None:
            dense = np.vstack([dense, np.asarray(a_eq, dtype=np.float64)])
        start, index, value = _csc(dense.reshape(-1, n))
    n_ub = len(b_ub_f)
    rows = n_ub + len(b_eq_f)
    lb = np.broadcast_to(np.asarray(lower, dtype=np.float64), (n,)).copy()
    ub = np.full(n, _INF) if upper is None else np.broadcast_to(np.asarray(upper, dtype=np.float64), (n,)).copy()
    lb[np.isinf(lb)] = np.sign(lb[np.isinf(lb)]) * _INF
    ub[np.isinf(ub)] = np.sign(ub[np.isinf(ub)]) * _INF
    lhs = np.concatenate([np.full(n_ub, -_INF), b_eq_f])
    rhs = np.concatenate([b_ub_f, b_eq_f])

    lp = _h.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = rows
    lp.a_matrix_.num_col_ = n
    lp.a_matrix_.num_row_ = rows
    lp.a_matrix_.format_ = _h.MatrixFormat.kColwise
    lp.col_cost_ = c
    lp.col_lower_ = lb
    lp.col_upper_ = ub
    lp.row_lower_ = lhs
    lp.row_upper_ = rhs
    lp.a_matrix_.start_ = start
    lp.a_matrix_.index_ = index
    lp.a_matrix_.value_ = value
    highs = _h._Highs()
    options = _h.HighsOptions()
    options.presolve = "on"
    options.solver = "simplex"
    options.simplex_strategy = int(_h.simplex_constants.SimplexStrategy.kSimplexStrategyDual)
    options.highs_debug_level = _h.HighsDebugLevel.kHighsDebugLevelNone
    options.log_to_console = False
    options.output_flag = False
    if highs.passOptions(options) == _h.HighsStatus.kError or highs.passModel(lp) == _h.HighsStatus.kError:
        return None
    if highs.run() == _h.HighsStatus.kError or highs.getModelStatus() != _h.HighsModelStatus.kOptimal:
        return None
    sol = highs.getSolution()
    duals = np.array(sol.row_dual, dtype=np.float64)
    return Solution(fun=float(highs.getInfo().objective_function_value), x=np.array(sol.col_value, dtype=np.float64),
                    ineq_marginals=duals[:n_ub], eq_marginals=duals[n_ub:])


def _csc(dense: FloatArray) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], FloatArray]:
    """``scipy.sparse.csc_array(dense)``'s arrays (non-zeros column by column, rows ascending),
    without building the sparse object."""
    nz = dense.T != 0
    start = np.zeros(dense.shape[1] + 1, dtype=np.int32)
    np.cumsum(nz.sum(axis=1), out=start[1:])
    return start, np.nonzero(nz)[1].astype(np.int32), dense.T[nz]


def _linprog(c: FloatArray, a_ub: Any, b_ub: FloatArray, a_eq: Any, b_eq: FloatArray,
             lower: FloatArray | float, upper: FloatArray | float | None) -> Solution | None:  # pragma: no cover
    from scipy.optimize import linprog

    n = len(c)
    lb = np.broadcast_to(np.asarray(lower, dtype=np.float64), (n,))
    ub = np.full(n, np.inf) if upper is None else np.broadcast_to(np.asarray(upper, dtype=np.float64), (n,))
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq if a_eq is not None else None,
                  bounds=np.stack([lb, ub], axis=1), method="highs-ds")
    if res.status != 0:
        return None
    return Solution(fun=float(res.fun), x=np.asarray(res.x, dtype=np.float64),
                    ineq_marginals=np.asarray(res.ineqlin.marginals, dtype=np.float64),
                    eq_marginals=np.asarray(res.eqlin.marginals, dtype=np.float64))
