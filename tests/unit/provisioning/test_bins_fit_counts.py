"""``Bins.fit_counts`` divides only where a pod fits when most bins are full: the counts are those
of dividing every bin's free room by the request."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.provisioning import bins as bins_mod


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.lists(st.integers(min_value=-4, max_value=40), min_size=3, max_size=3), max_size=40),
       req=st.lists(st.integers(min_value=0, max_value=7), min_size=3, max_size=3),
       cut=st.tuples(st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=40)))
def test_fit_counts_are_each_bins_free_room_divided_by_the_request(
        rows: list[list[int]], req: list[int], cut: tuple[int, int]) -> None:
    b = bins_mod.Bins(["cpu", "memory", "pods"], [], capacity=len(rows))
    b.n = len(rows)
    if rows:
        b.remaining[:len(rows)] = np.array(rows, dtype=np.int64)
    lo, hi = sorted(min(c, len(rows)) for c in cut)
    need = np.array(req, dtype=np.int64)
    got = b.fit_counts(need, lo, hi)
    nz = need > 0
    expected = [min(max(r // q, 0) for r, q in zip(row, req, strict=True) if q) if nz.any() else 1 << 40
                for row in rows[lo:hi]]
    assert got.tolist() == expected
    assert got.dtype == np.int64
