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

The packer decides in *shapes* (distinct request vectors; groups that differ only by labels share
one) and hands each shape's pods out to its groups when a node is committed. From LP_MIN_PODS
pods on, three stages run before the greedy, each on what the previous one left:

1. whole nodes from the fluid LP (:mod:`karpy.provisioning.fluid`, exact, by type generation),
   by iterated rounding, for types whose nodes hold many pods (MIN_PODS_PER_DEALT_NODE);
2. a top-up of those nodes, first-fit;
3. when the LP's nodes are small (fractions of tiny instances, where whole pods waste the most),
   cutting-stock patterns (:mod:`karpy.provisioning.patterns`): the pattern LP by column
   generation, floor and dive rounding.

Every stage is bounded by counts (rounds, types, nodes), never by time, so the same input gives
the same NodeClaims on any machine. Measured against the fluid LP bound and the integral
(pattern LP) bound in ``bench/cost.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from karpy.provisioning import claims, fluid, patterns, podgroups
from karpy.provisioning import placement as placement_mod
from karpy.scheduling import requirements as reqs_mod

LP_MIN_PODS = 50
MIN_PODS_PER_DEALT_NODE = 20
MAX_ROUNDING_ROUNDS = 8
"""Batches at least this large are first packed from the LP's node patterns."""

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


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
    book = _Book(run, groups)
    shapes = book.shapes
    if book.left.sum() >= LP_MIN_PODS:
        within = info.mask & (table.capacity <= tmpl.remaining_limit_vector(run.dims)).all(axis=1)
        fits: BoolArray = np.all(avail[:, None, :] >= shapes[None, :, :], axis=2)
        idx = np.flatnonzero(within & fits.any(axis=1))
        if len(idx):
            lp_cand = _undominated(avail, info.price, idx)
            dealt, small = _lp_patterns(avail[lp_cand], info.price[lp_cand], shapes, book.left)
            for t, assigned, nodes in dealt:
                target = int(lp_cand[t])
                assigned = np.minimum(assigned, book.left)
                for pattern in _spread(avail[target], shapes, assigned, nodes):
                    if not (table.capacity[target] <= tmpl.remaining_limit_vector(run.dims)).all():
                        break
                    pattern = np.minimum(pattern, book.left)
                    if pattern.sum() > 0:
                        book.commit(ti, creqs, target, pattern)
            book.top_up()
            if small is not None and book.left.sum() >= LP_MIN_PODS:
                _pattern_nodes(run, ti, creqs, book, avail[lp_cand], info.price[lp_cand], lp_cand, small)
                book.top_up()
    cand = np.zeros(0, dtype=np.int64)
    limit_seen: IntArray | None = None
    value = np.zeros(len(shapes))
    left = book.left
    while left.sum() > 0:
        limit = tmpl.remaining_limit_vector(run.dims)
        if limit_seen is None or not np.array_equal(limit, limit_seen) or len(cand) == 0:
            limit_seen = limit
            within = info.mask & (table.capacity <= limit).all(axis=1)
            fits_any = np.zeros(len(table), dtype=np.bool_)
            for alive_c in np.flatnonzero(left > 0):
                fits_any |= (avail >= shapes[alive_c]).all(axis=1)
            idx = np.flatnonzero(within & fits_any)
            if len(idx) == 0:
                return
            cand = _undominated(avail, info.price, idx)
            value = _values(avail[cand], info.price[cand], shapes)
        price = info.price[cand]
        cap = avail[cand]
        alive = np.flatnonzero((left > 0) & (value > 0))
        if len(alive) == 0:
            return
        best_val, best_eff, best_take = -1.0, -1.0, None
        target = -1
        for order in _orders(cap, shapes, value, alive):
            val, take = patterns.greedy_fill(cap, shapes, value, left, order)
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
            book.commit(ti, creqs, target, pattern)


def _pattern_nodes(run: placement_mod.Placement, ti: int, creqs: reqs_mod.Requirements, book: _Book,
                   cap: IntArray, price: FloatArray, types: IntArray, start: IntArray) -> None:
    """Open the whole nodes of :func:`patterns.plan` for what is left (small nodes, where the
    fluid LP's fractions say little), its columns starting from the ``start`` types."""
    tmpl = run.templates[ti]
    table = tmpl.table
    for t, y, k in patterns.plan(cap, price, book.shapes, book.left, start):
        target = int(types[t])
        for _ in range(k):
            if not (table.capacity[target] <= tmpl.remaining_limit_vector(run.dims)).all():
                return
            pattern = np.minimum(y, book.left)
            if pattern.sum() == 0:
                break
            book.commit(ti, creqs, target, pattern)


class _Book:
    """The pods still to place, by shape (distinct request vector) and by group.

    The packer decides in shapes; :meth:`commit` hands each shape's count out to that shape's
    groups in their order, taking each group's pods from the front."""

    def __init__(self, run: placement_mod.Placement, groups: Sequence[podgroups.PodGroup]) -> None:
        self.run = run
        self.groups = groups
        self.reqs = np.array([run.vector(g.requests) for g in groups], dtype=np.int64).reshape(len(groups), -1)
        shapes, of_group = np.unique(self.reqs, axis=0, return_inverse=True)
        self.shapes: IntArray = shapes.astype(np.int64)
        self.of_group = of_group.reshape(-1)
        self.group_left = np.array([g.size for g in groups], dtype=np.int64)
        self.cursor = [0] * len(groups)
        self.members: list[list[int]] = [[] for _ in range(len(shapes))]
        for i, s in enumerate(self.of_group):
            self.members[int(s)].append(i)
        self.left: IntArray = np.bincount(self.of_group, weights=self.group_left,
                                          minlength=len(shapes)).astype(np.int64)
        for g in groups:
            g.placed_count = 0

    def commit(self, ti: int, creqs: reqs_mod.Requirements, target: int, pattern: IntArray) -> None:
        """Open one NodeClaim sized after ``target`` holding ``pattern[s]`` pods of each shape."""
        b = claims.create_bin(self.run, ti, creqs, target)
        for s in (int(i) for i in np.flatnonzero(pattern > 0)):
            want = int(pattern[s])
            for i in self.members[s]:
                k = min(want, int(self.group_left[i]))
                if k <= 0:
                    continue
                g = self.groups[i]
                self.run.record(g, b, g.pods[self.cursor[i]:self.cursor[i] + k], self.reqs[i])
                self._taken(i, k)
                want -= k
                if want == 0:
                    break

    def _taken(self, i: int, k: int) -> None:
        self.cursor[i] += k
        self.group_left[i] -= k
        self.left[self.of_group[i]] -= k
        self.groups[i].placed_count += k

    def top_up(self) -> None:
        """Fill the NodeClaims opened so far with what is left, largest cpu first, before more
        are opened."""
        from karpy.provisioning import grouping_paths

        for i in (int(i) for i in np.argsort(-self.reqs[:, 0], kind="stable")):
            if self.group_left[i] <= 0:
                continue
            got = grouping_paths.fill(self.run, self.groups[i], self.reqs[i], self.cursor[i],
                                      int(self.group_left[i]), None, open_new=False)
            self._taken(i, got)


def _lp_patterns(cap: IntArray, price: FloatArray, reqs: IntArray,
                 left: IntArray) -> tuple[list[tuple[int, IntArray, int]], IntArray | None]:
    """Whole nodes from the fluid assignment LP (:mod:`karpy.provisioning.fluid`), by iterated
    rounding: each round keeps floor(x_t) nodes of every type whose nodes hold many pods, then
    re-solves with those nodes' capacity free, so the pods the LP puts on them fill them in every
    resource. Returns, per kept type, the pods of each shape the last LP put on its nodes (rounded)
    and how many nodes; and, when the first LP's nodes are small (hold fewer than
    MIN_PODS_PER_DEALT_NODE pods on average: whole pods waste the most there, and the pattern
    LP pays), the types it used. Shapes no type holds are left out (the greedy reports them).
    """
    live = np.flatnonzero((left > 0) & (cap[:, None, :] >= reqs[None, :, :]).all(axis=2).any(axis=0))
    if len(live) == 0:
        return [], None
    owned = np.zeros(len(cap), dtype=np.int64)
    sol = None
    small: IntArray | None = None
    for round_ in range(MAX_ROUNDING_ROUNDS):
        sol = fluid.solve(cap, price, reqs[live], left[live], owned)
        if sol is None:
            return [], None
        if round_ == 0:
            used = np.flatnonzero(sol.nodes > 1e-9)
            if sol.pods[:, used].sum() < MIN_PODS_PER_DEALT_NODE * sol.nodes[used].sum():
                small = used.astype(np.int64)
        x = sol.nodes + owned
        whole = np.floor(x + 1e-6).astype(np.int64)
        pods_per_node = sol.pods.sum(axis=0) / np.maximum(x, 1e-9)
        # dealing fluid shares only pays on nodes holding many pods; small ones go to the greedy
        keep = np.where(pods_per_node >= MIN_PODS_PER_DEALT_NODE, whole, owned)
        if np.array_equal(keep, owned):
            break
        owned = np.maximum(keep, owned)
    if sol is None:
        return [], small
    out: list[tuple[int, IntArray, int]] = []
    for t in np.argsort(-owned, kind="stable"):
        if owned[t] <= 0:
            continue
        assigned = np.zeros(len(reqs), dtype=np.int64)
        assigned[live] = np.floor(sol.pods[:, t] + 1e-6).astype(np.int64)
        if assigned.sum() > 0:
            out.append((int(t), assigned, int(owned[t])))
    return out, small


def _spread(cap: IntArray, reqs: IntArray, assigned: IntArray, nodes: int) -> list[IntArray]:
    """Deal the pods the LP assigned to one type evenly over ``nodes`` nodes, so every node is
    equally loaded (the finalizer then shrinks partly used nodes to a smaller size). Where a node
    would be overfilled, pods leave it by the resource most overfilled, largest users of it first
    (those pods are packed later)."""
    base = assigned // nodes
    extra = assigned % nodes
    out: list[IntArray] = []
    offset = 0
    starts = np.zeros(len(reqs), dtype=np.int64)
    for c in range(len(reqs)):
        starts[c] = offset
        offset = (offset + int(extra[c])) % nodes
    capf = np.maximum(cap, 1).astype(np.float64)
    for i in range(nodes):
        pattern = base + (((i - starts) % nodes) < extra).astype(np.int64)
        load = (pattern[:, None] * reqs).sum(axis=0)
        while (load > cap).any():
            d = int(np.argmax((load - cap) / capf))
            held = np.flatnonzero(pattern > 0)
            c = int(held[np.argmax(reqs[held, d])])
            k = min(int(pattern[c]), -(-int(load[d] - cap[d]) // int(reqs[c, d])))
            pattern[c] -= k
            load -= k * reqs[c]
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
