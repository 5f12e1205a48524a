"""The re-pack MILP as a choice of packing patterns (cutting-stock form) instead of pod-to-bin assignments.

A *pattern* of an instance type is how many pods of each shape one node of it holds; a *maximal*
pattern has no room left for one more pod of any shape still available. The cheapest packing is then
``min sum(price * z_p)`` over integer pattern counts ``z_p`` with every shape covered
(``sum(a_sp * z_p) >= count_s``) and the same per-type copy limits and budget as the assignment
model. Both have the same optimum: any packing's nodes extend to maximal patterns at the same price,
and a cover drops its surplus pods to become a packing. This form has no symmetric copies of a bin
and a tight linear relaxation, so HiGHS proves the optimum in a few nodes where the assignment model
(:func:`karpy.disruption.milp.milp_pack`'s fallback) may branch for seconds.

:func:`maximal` lists one type's maximal patterns, or ``None`` past a work limit (the caller then
keeps the assignment model); :func:`model` builds the arrays handed to HiGHS; :func:`decode` turns a
solution into nodes with pod counts per shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

VISIT_LIMIT = 20_000
"""Search nodes :func:`maximal` may visit for one problem (all types together) before giving up."""


class _TooMany(Exception):
    pass


def maximal(req: Sequence[Sequence[int]], count: Sequence[int], cap: Sequence[int], fits: Sequence[bool],
            budget: list[int]) -> list[tuple[int, ...]] | None:
    """The maximal non-empty patterns of one bin of capacity ``cap`` (per dimension), holding at most
    ``count[s]`` pods of shape ``s`` (requests ``req[s]``) and none of a shape not ``fits``, in a fixed
    order (larger counts of earlier shapes first); ``None`` once more than ``budget[0]`` search nodes
    were visited (``budget[0]`` is decreased by the nodes visited, shared across calls)."""
    n_d = len(cap)
    order = [s for s in range(len(req)) if fits[s] and count[s] > 0]
    a = [0] * len(req)
    out: list[tuple[int, ...]] = []

    def fits_one(s: int, room: Sequence[int]) -> bool:
        return all(req[s][d] <= room[d] for d in range(n_d))

    def visit(i: int, room: list[int]) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooMany
        if i == len(order):
            if any(a) and not any(a[s] < count[s] and fits_one(s, room) for s in order):
                out.append(tuple(a))
            return
        s = order[i]
        most = count[s]
        for d in range(n_d):
            if req[s][d]:
                most = min(most, room[d] // req[s][d])
        for k in range(most, -1, -1):
            a[s] = k
            visit(i + 1, [room[d] - k * req[s][d] for d in range(n_d)])
        a[s] = 0

    try:
        visit(0, list(cap))
    except _TooMany:
        return None
    return out


@dataclass(frozen=True, slots=True)
class Model:
    """Arrays for ``scipy.optimize.milp``: one integer variable per (option, pattern)."""

    options: tuple[int, ...]
    """Each variable's option (bin type) index."""
    patterns: tuple[tuple[int, ...], ...]
    """Each variable's pod count per shape."""
    cost: np.ndarray
    upper: np.ndarray
    rows: list[int]
    cols: list[int]
    vals: list[float]
    lo: list[float]
    hi: list[float]


def model(req: Sequence[Sequence[int]], count: Sequence[int], cap: Sequence[Sequence[int]],
          fits: Sequence[Sequence[bool]], kept: Sequence[int], prices: Sequence[float],
          copies: Sequence[int], budget: float | None) -> Model | None:
    """The pattern model over options ``kept`` (``copies[j]``: most nodes of option ``j``), or ``None``
    when listing the patterns exceeds :data:`VISIT_LIMIT`."""
    visits = [VISIT_LIMIT]
    var_opt: list[int] = []
    var_pat: list[tuple[int, ...]] = []
    for j in kept:
        if copies[j] <= 0:
            continue
        found = maximal(req, count, cap[j], [fits[s][j] for s in range(len(req))], visits)
        if found is None:
            return None
        for p in found:
            var_opt.append(j)
            var_pat.append(p)
    n = len(var_pat)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []
    r = 0
    for s in range(len(req)):  # every pod of each shape covered
        for v, p in enumerate(var_pat):
            if p[s]:
                rows.append(r)
                cols.append(v)
                vals.append(float(p[s]))
        lo.append(float(count[s]))
        hi.append(math.inf)
        r += 1
    for j in kept:  # at most copies[j] nodes of option j
        of_j = [v for v in range(n) if var_opt[v] == j]
        if len(of_j) > 1:
            rows.extend([r] * len(of_j))
            cols.extend(of_j)
            vals.extend([1.0] * len(of_j))
            lo.append(-math.inf)
            hi.append(float(copies[j]))
            r += 1
    if budget is not None:
        rows.extend([r] * n)
        cols.extend(range(n))
        vals.extend(prices[j] for j in var_opt)
        lo.append(-math.inf)
        hi.append(budget + 1e-9)
    return Model(options=tuple(var_opt), patterns=tuple(var_pat),
                 cost=np.array([prices[j] for j in var_opt], dtype=np.float64),
                 upper=np.array([float(copies[j]) for j in var_opt], dtype=np.float64),
                 rows=rows, cols=cols, vals=vals, lo=lo, hi=hi)


def decode(m: Model, z: Sequence[int], count: Sequence[int]) -> list[tuple[int, list[int]]]:
    """Nodes of a solution ``z`` (copies per variable) in variable order, as (option, pods per shape),
    the surplus of a cover dropped from the last nodes; nodes left empty are left out."""
    nodes: list[tuple[int, list[int]]] = []
    for v, copies in enumerate(z):
        for _ in range(copies):
            nodes.append((m.options[v], list(m.patterns[v])))
    surplus = [sum(n[1][s] for n in nodes) - count[s] for s in range(len(count))]
    for _, held in reversed(nodes):
        for s, extra in enumerate(surplus):
            drop = min(extra, held[s])
            if drop > 0:
                held[s] -= drop
                surplus[s] -= drop
    return [n for n in nodes if any(n[1])]
