"""HiGHS called directly (:mod:`karpy.provisioning.highs`) answers as ``linprog(method="highs-ds")``
does, bit for bit, so the packer's LPs (fluid, pattern master, relaxed knapsacks) decide the same."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse
from scipy.optimize import linprog

from karpy.provisioning import fluid, highs, patterns

from .test_packer_solvers import _instance


def _same(res: Any, sol: highs.Solution | None, n_ub: int) -> None:
    if res.status != 0:
        assert sol is None
        return
    assert sol is not None
    assert sol.fun == res.fun
    assert np.array_equal(sol.x, res.x)
    assert np.array_equal(sol.ineq_marginals, res.ineqlin.marginals)
    assert len(sol.ineq_marginals) == n_ub
    assert np.array_equal(sol.eq_marginals, res.eqlin.marginals)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_covering_lp_has_linprogs_value_solution_and_duals(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows, cols = int(rng.integers(1, 15)), int(rng.integers(1, 40))
    a = -rng.integers(0, 6, size=(rows, cols)).astype(np.float64)
    b = -rng.integers(0, 40, size=rows).astype(np.float64)
    c = rng.uniform(0.05, 3.0, size=cols)
    _same(linprog(c, A_ub=a, b_ub=b, bounds=(0, None), method="highs-ds"), highs.solve(c, a, b), rows)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_sparse_lp_with_equalities_and_upper_bounds_has_linprogs_answer(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows, eq, cols = int(rng.integers(1, 12)), int(rng.integers(1, 5)), int(rng.integers(2, 30))
    a_ub = sparse.random(rows, cols, density=0.4, random_state=int(rng.integers(1 << 30)), format="csr")
    a_ub.data = np.round(a_ub.data * 10) - 3  # some explicit zeros and negatives, as fluid's matrices have
    a_eq = sparse.csr_matrix((np.ones(cols), (rng.integers(0, eq, size=cols), np.arange(cols))), shape=(eq, cols))
    b_ub = rng.uniform(0, 20, size=rows)
    b_eq = rng.integers(0, 10, size=eq).astype(np.float64)
    c = rng.uniform(-1.0, 2.0, size=cols)
    upper = rng.integers(1, 8, size=cols).astype(np.float64)
    bounds = np.stack([np.zeros(cols), upper], axis=1)
    _same(linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs-ds"),
          highs.solve(c, a_ub, b_ub, a_eq, b_eq, upper=upper), rows)


def test_an_infeasible_lp_has_no_solution() -> None:
    assert highs.solve(np.array([1.0]), np.array([[1.0]]), np.array([-1.0])) is None


def _via_linprog(monkeypatch: pytest.MonkeyPatch) -> None:
    def old(cost: Any, a_ub: Any, b_ub: Any, a_eq: Any = None, b_eq: Any = None, lower: Any = 0.0,
            upper: Any = None) -> highs.Solution | None:
        return highs._linprog(np.asarray(cost, dtype=np.float64), a_ub, np.asarray(b_ub, dtype=np.float64), a_eq,
                              np.zeros(0) if b_eq is None else np.asarray(b_eq, dtype=np.float64), lower, upper)

    monkeypatch.setattr(highs, "solve", old)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), types=st.integers(2, 25), shapes=st.integers(1, 8))
def test_the_pattern_plan_and_fluid_lp_are_the_ones_linprog_gives(seed: int, types: int, shapes: int) -> None:
    cap, price, reqs, counts = _instance(seed, types, shapes)
    start = np.arange(types, dtype=np.int64)
    new_plan = patterns.plan(cap, price, reqs, counts, start)
    new_fluid = fluid.solve(cap, price, reqs, counts)
    new_exact = patterns.solve(price, counts, patterns.single_shape_columns(cap, reqs, counts),
                               patterns.exact_pricing(cap, price, reqs, counts), 20, True)
    with pytest.MonkeyPatch.context() as mp:
        _via_linprog(mp)
        old_plan = patterns.plan(cap, price, reqs, counts, start)
        old_fluid = fluid.solve(cap, price, reqs, counts)
        old_exact = patterns.solve(price, counts, patterns.single_shape_columns(cap, reqs, counts),
                                   patterns.exact_pricing(cap, price, reqs, counts), 20, True)
    assert [(t, y.tolist(), k) for t, y, k in new_plan] == [(t, y.tolist(), k) for t, y, k in old_plan]
    assert new_fluid is not None and old_fluid is not None
    assert new_fluid.value == old_fluid.value
    assert np.array_equal(new_fluid.nodes, old_fluid.nodes) and np.array_equal(new_fluid.pods, old_fluid.pods)
    assert new_exact is not None and old_exact is not None
    assert (new_exact.value, new_exact.lower_bound, new_exact.rounds) == (old_exact.value, old_exact.lower_bound,
                                                                           old_exact.rounds)
    assert np.array_equal(new_exact.columns, old_exact.columns)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_dense_matrix_goes_to_highs_column_by_column_as_scipys_csc_array(seed: int) -> None:
    rng = np.random.default_rng(seed)
    dense = -rng.integers(0, 3, size=(int(rng.integers(1, 9)), int(rng.integers(1, 12)))).astype(np.float64)
    want = sparse.csc_array(dense)
    start, index, value = highs._csc(dense)
    assert np.array_equal(start, want.indptr) and np.array_equal(index, want.indices)
    assert np.array_equal(value, want.data)
