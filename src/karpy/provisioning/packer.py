"""Cost-aware packing of unconstrained pods into new NodeClaims of one NodePool.

Pods without topology, affinity or host-port constraints that are left after existing capacity is
used are packed node by node: for every candidate instance type at once (NumPy over types), the
packer fills a hypothetical node greedily with the remaining pods, largest value first, and opens
the type whose fill gives the most pod value per dollar. A pod shape's *value* is what it costs
to run alone-with-its-own-kind on the cheapest type (price / how many fit), so a type that holds a
complementary mix (cpu-heavy with memory-heavy pods) scores above 1 and wins. When a fill pattern
repeats, it is committed as many times as the remaining pods allow, so the work grows with the
number of distinct patterns, not of nodes. Dominated types (another is no more expensive and no
smaller in any resource) are dropped first.

This replaces first-fit-decreasing for the common case and is measured against the fluid LP bound
in ``bench/cost.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from karpy.provisioning import claims, podgroups
from karpy.provisioning import placement as placement_mod
from karpy.scheduling import requirements as reqs_mod

LP_MIN_PODS = 50
MIN_PODS_PER_DEALT_NODE = 20
"""Batches at least this large are first packed from the LP's node patterns."""

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def _undominated(avail: IntArray, price: FloatArray, idx: IntArray) -> IntArray:
    """Indices (subset of ``idx``) of types no other candidate beats on price and every resource."""
    order = idx[np.lexsort((-avail[idx].sum(axis=1), price[idx]))]
    keep: list[int] = []
    kept = np.zeros((0, avail.shape[1]), dtype=np.int64)
    for t in order:
        if keep and (kept >= avail[t]).all(axis=1).any():
            continue
        keep.append(int(t))
        kept = np.vstack([kept, avail[t]])
    return np.array(keep, dtype=np.int64)


def pack(run: placement_mod.Placement, ti: int, creqs: reqs_mod.Requirements,
         groups: Sequence[podgroups.PodGroup]) -> None:
    """Open NodeClaims of template ``ti`` for the pods of ``groups``; placed pods move to the front
    of each group's list and the number placed is added to ``placed_count``."""
    tmpl = run.templates[ti]
    table = tmpl.table
    info = table.info(creqs)
    ds = run.daemon_overhead(ti, creqs)
    avail = table.alloc - ds
    reqs = np.array([run.vector(g.requests) for g in groups], dtype=np.int64)
    left = np.array([g.size for g in groups], dtype=np.int64)
    cursor = [0] * len(groups)
    for g in groups:
        g.placed_count = 0
    if left.sum() >= LP_MIN_PODS:
        within = info.mask & (table.capacity <= tmpl.remaining_limit_vector(run.dims)).all(axis=1)
        fits_any = np.zeros(len(table), dtype=np.bool_)
        for c in range(len(groups)):
            fits_any |= (avail >= reqs[c]).all(axis=1)
        idx = np.flatnonzero(within & fits_any)
        if len(idx):
            lp_cand = _undominated(avail, info.price, idx)
            for t, assigned, nodes in _lp_patterns(avail[lp_cand], info.price[lp_cand], reqs, left):
                target = int(lp_cand[t])
                assigned = np.minimum(assigned, left)
                for pattern in _spread(avail[target], reqs, assigned, nodes):
                    if not (table.capacity[target] <= tmpl.remaining_limit_vector(run.dims)).all():
                        break
                    pattern = np.minimum(pattern, left)
                    if pattern.sum() > 0:
                        _commit(run, ti, creqs, target, groups, pattern, reqs, cursor, left)
            # top up the LP's nodes with what flooring left over, before opening more
            from karpy.provisioning import grouping_paths

            for c in (int(i) for i in np.argsort(-reqs[:, 0], kind="stable")):
                if left[c] <= 0:
                    continue
                got = grouping_paths.fill(run, groups[c], reqs[c], cursor[c], int(left[c]), None,
                                          open_new=False)
                cursor[c] += got
                left[c] -= got
                groups[c].placed_count += got
    cand = np.zeros(0, dtype=np.int64)
    limit_seen: IntArray | None = None
    value = np.zeros(len(groups))
    while left.sum() > 0:
        limit = tmpl.remaining_limit_vector(run.dims)
        if limit_seen is None or not np.array_equal(limit, limit_seen) or len(cand) == 0:
            limit_seen = limit
            within = info.mask & (table.capacity <= limit).all(axis=1)
            fits_any = np.zeros(len(table), dtype=np.bool_)
            for alive_c in np.flatnonzero(left > 0):
                fits_any |= (avail >= reqs[alive_c]).all(axis=1)
            idx = np.flatnonzero(within & fits_any)
            if len(idx) == 0:
                return
            cand = _undominated(avail, info.price, idx)
            value = _values(avail[cand], info.price[cand], reqs)
        price = info.price[cand]
        cap = avail[cand]
        alive = np.flatnonzero((left > 0) & (value > 0))
        if len(alive) == 0:
            return
        best_val, best_eff, best_take = -1.0, -1.0, None
        target = -1
        for order in _orders(cap, reqs, value, alive):
            val, take = _fill(cap, reqs, value, left, order)
            eff = val / price
            i = int(np.lexsort((-val, -eff))[0])
            if eff[i] > best_eff or (eff[i] == best_eff and val[i] > best_val):
                best_val, best_eff, best_take, target = float(val[i]), float(eff[i]), take[i], int(cand[i])
        if best_take is None or best_val <= 0:
            return
        pattern = best_take
        used = pattern > 0
        times = int((left[used] // pattern[used]).min())
        for _ in range(max(times, 1)):
            if not (table.capacity[target] <= tmpl.remaining_limit_vector(run.dims)).all():
                break
            _commit(run, ti, creqs, target, groups, pattern, reqs, cursor, left)


def _commit(run: placement_mod.Placement, ti: int, creqs: reqs_mod.Requirements, target: int,
            groups: Sequence[podgroups.PodGroup], pattern: IntArray, reqs: IntArray, cursor: list[int],
            left: IntArray) -> None:
    """Open one NodeClaim sized after ``target`` holding ``pattern[c]`` pods of each group."""
    b = claims.create_bin(run, ti, creqs, target)
    for c in (int(i) for i in np.flatnonzero(pattern > 0)):
        g = groups[c]
        k = int(pattern[c])
        run.record(g, b, g.pods[cursor[c]:cursor[c] + k], reqs[c])
        cursor[c] += k
        left[c] -= k
        g.placed_count += k


def _lp_patterns(cap: IntArray, price: FloatArray, reqs: IntArray,
                 left: IntArray) -> list[tuple[int, IntArray, int]]:
    """Node patterns from the fluid assignment LP (HiGHS), floored to whole pods and nodes.

    Variables x_t (nodes of type t) and y_ct (pods of shape c on type t); minimise the price of
    the nodes such that every pod is assigned and no type's nodes are over-committed. Each type
    with at least one whole node in the solution yields floor(x_t) nodes holding
    floor(y_ct / x_t) pods of each shape: feasible by construction. What the flooring leaves is
    packed greedily afterwards.
    """
    from scipy import sparse
    from scipy.optimize import linprog

    m, c_n, k_n = len(cap), len(reqs), cap.shape[1]
    scale = np.maximum(reqs.max(axis=0), 1).astype(np.float64)
    r = reqs / scale
    a = cap / scale
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
            rows.append(row)
            cols.append(m + c * m + t_idx)
            vals.append(np.full(m, r[c, d]))
    a_ub = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(m * k_n, n_var))
    eq_rows = np.repeat(np.arange(c_n), m)
    eq_cols = m + np.arange(c_n * m)
    a_eq = sparse.csr_matrix((np.ones(c_n * m), (eq_rows, eq_cols)), shape=(c_n, n_var))
    cost = np.concatenate([price, np.zeros(c_n * m)])
    res = linprog(cost, A_ub=a_ub, b_ub=np.zeros(m * k_n), A_eq=a_eq, b_eq=left.astype(np.float64),
                  bounds=(0, None), method="highs")
    if res.status != 0:
        return []
    x = res.x[:m]
    y = res.x[m:].reshape(c_n, m)
    out: list[tuple[int, IntArray, int]] = []
    for t in np.argsort(-x):
        if x[t] < 1e-6:
            continue
        assigned = np.floor(y[:, t] + 0.5).astype(np.int64)
        if assigned.sum() == 0:
            continue
        nodes = int(np.floor(x[t] + 1e-6))
        # dealing fluid shares only pays on nodes holding many pods; small ones go to the greedy
        if nodes >= 1 and assigned.sum() >= MIN_PODS_PER_DEALT_NODE * x[t]:
            out.append((int(t), assigned, nodes))
    return out


def _spread(cap: IntArray, reqs: IntArray, assigned: IntArray, nodes: int) -> list[IntArray]:
    """Deal the pods the LP assigned to one type evenly over ``nodes`` nodes, so every node is
    equally loaded (the finalizer then shrinks partly used nodes to a smaller size), dropping from
    a node whatever would overfill it (those pods are packed later)."""
    base = assigned // nodes
    extra = assigned % nodes
    out: list[IntArray] = []
    offset = 0
    starts = np.zeros(len(reqs), dtype=np.int64)
    for c in range(len(reqs)):
        starts[c] = offset
        offset = (offset + int(extra[c])) % nodes
    order = np.argsort(-(reqs / np.maximum(cap, 1)).max(axis=1), kind="stable")
    for i in range(nodes):
        pattern = base + (((i - starts) % nodes) < extra).astype(np.int64)
        load = (pattern[:, None] * reqs).sum(axis=0)
        for c in order:
            while pattern[c] > 0 and (load > cap).any():
                pattern[c] -= 1
                load -= reqs[c]
        out.append(pattern)
    return out


def _values(cap: IntArray, price: FloatArray, reqs: IntArray) -> FloatArray:
    """Per pod shape: the cheapest price per pod when a type holds only that shape."""
    value = np.zeros(len(reqs))
    for c in range(len(reqs)):
        nz = reqs[c] > 0
        k = (cap[:, nz] // reqs[c][nz]).min(axis=1)
        ok = k > 0
        value[c] = (price[ok] / k[ok]).min() if ok.any() else 0.0
    return value


def _orders(cap: IntArray, reqs: IntArray, value: FloatArray, alive: IntArray) -> list[IntArray]:
    """Fill orders to try, each an (types x shapes) matrix of shape indices: by value, and by
    value per unit of the resource each shape uses most of on that type (knapsack density)."""
    m = len(cap)
    by_value = alive[np.argsort(-value[alive], kind="stable")]
    orders = [np.tile(by_value, (m, 1))]
    share = (reqs[alive][None, :, :] / np.maximum(cap[:, None, :], 1)).max(axis=2)
    density = value[alive][None, :] / np.maximum(share, 1e-12)
    orders.append(alive[np.argsort(-density, axis=1, kind="stable")])
    return orders


def _fill(cap: IntArray, reqs: IntArray, value: FloatArray, left: IntArray,
          order: IntArray) -> tuple[FloatArray, IntArray]:
    """Greedy fill of one hypothetical node per candidate type, shapes taken in ``order``."""
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
        rem -= k[:, None] * r
        val += k * value[c]
        take[rows, c] += k
    return val, take
