"""Existing nodes as rows of arrays, kept between scheduling passes and updated by difference.

A :class:`NodeTable` holds, per node name, what the scheduler derives from a
:class:`results.ExistingNode`: free and used resources (one column per resource name seen), the
node's *class* (its labels without the hostname: nodes that differ only by hostname share one
requirement set and one compatibility check), its effective taints, host ports held by its pods,
its domain per topology key, and (computed only once a pass needs topology counts) the label
signatures of its pods. :meth:`NodeTable.sync` takes the nodes of one pass and re-derives only
rows whose node changed; the pass then reads arrays indexed by the returned row order.

What a caller may rely on:

- ``sync(nodes)`` makes the table agree with ``nodes`` and returns, for each of them in order, its
  row. A row is re-derived when its node's labels, taints, allocatable, nodepool, ``in_flight`` or
  ``schedulable`` differ (by equality), or its pods differ (by identity of the Pod objects, in
  order: Pod models are immutable, so the same objects mean the same pods). Everything derived
  depends only on the node itself, so a kept table and a fresh one give the same pass.
- Rows of nodes absent from :data:`EVICT_AFTER` consecutive syncs are dropped, at the latest
  after twice as many; when interned values (node classes, taint sets, pod signatures) are
  mostly of nodes and pods long gone, the table starts afresh. Memory stays proportional to the
  nodes and pods recently seen.
- Pure: no I/O, no clock; nothing here depends on the order in which rows were created.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy.api import labels as wk
from karpy.api import pod as pod_mod
from karpy.provisioning import bins as bins_mod
from karpy.provisioning import results
from karpy.scheduling import hostports, topology
from karpy.scheduling import requirements as reqs_mod

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
EVICT_AFTER = 16
MEMO_LIMIT = 4096
BLOAT_SLACK = 1024
EPHEMERAL = frozenset({wk.TAINT_NOT_READY, wk.TAINT_UNREACHABLE, wk.TAINT_UNREGISTERED,
                       "node.cloudprovider.kubernetes.io/uninitialized"})


class Row:
    """One node's derived data (see the module docstring)."""

    __slots__ = ("anti", "full", "host", "index", "node", "ports", "seen", "sigs")

    def __init__(self, index: int, node: results.ExistingNode) -> None:
        self.index = index
        self.node = node
        self.host: str | None = None
        self.anti: tuple[topology.Term, ...] = ()
        """Required anti-affinity terms its pods own, in pod order (the inverse rule binds others)."""
        self.ports: hostports.HostPortUsage | None = None
        self.sigs: list[tuple[int, int]] | None = None
        self.full: reqs_mod.Requirements | None = None
        self.seen = 0

    def requirements(self) -> reqs_mod.Requirements:
        """The node's full requirement set (with its hostname), built on first use."""
        if self.full is None:
            self.full = reqs_mod.Requirements.from_labels(self.node.labels)
        return self.full


class NodeTable:
    """Existing nodes kept between passes (see the module docstring)."""

    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}
        self._free: list[int] = []
        self._high = 0
        self.columns: list[str] = []
        self._col: dict[str, int] = {}
        cap = 64
        self.alloc: IntArray = np.zeros((cap, 0), dtype=np.int64)
        self.used: IntArray = np.zeros((cap, 0), dtype=np.int64)
        self.cls: IntArray = np.zeros(cap, dtype=np.int64)
        self.taint: IntArray = np.zeros(cap, dtype=np.int64)
        self.schedulable: BoolArray = np.zeros(cap, dtype=np.bool_)
        self.in_flight: BoolArray = np.zeros(cap, dtype=np.bool_)
        self.classes = bins_mod.Registry()
        """(Requirements without the hostname, True) -> class id: the reqset ids of existing bins."""
        self._class_key: dict[frozenset[tuple[str, str]], int] = {}
        self.taintsets = bins_mod.Registry()
        self.domains: dict[str, tuple[bins_mod.Registry, IntArray]] = {}
        self.signatures = bins_mod.Registry()
        """Signature (namespace, sorted labels, id in :attr:`owned_sets`) -> id."""
        self.owned_sets = bins_mod.Registry()
        """Tuples of required anti-affinity terms a pod owns -> id (``()`` is 0)."""
        self.owned_sets.id(())
        self._sig_rows: dict[int, dict[int, int]] | None = None
        self._compat: dict[reqs_mod.Requirements, BoolArray] = {}
        self._owned: dict[tuple[int, str], tuple[Any, tuple[topology.Term, ...], int]] = {}
        self.syncs = 0
        self.derived = 0
        """How many times a row was (re-)derived from its node: what the passes cost beyond a comparison."""

    # -- sync -----------------------------------------------------------------------------------

    def sync(self, nodes: Sequence[results.ExistingNode]) -> list[Row]:
        """Make the table agree with ``nodes``; their rows, in order."""
        if self.syncs % EVICT_AFTER == 0 and self._bloated():
            syncs, derived = self.syncs, self.derived
            self.__init__()  # type: ignore[misc]
            self.syncs, self.derived = syncs, derived
        self.syncs += 1
        now = self.syncs
        out: list[Row] = []
        dirty: list[Row] = []
        rows = self.rows
        for node in nodes:
            key = node.name
            row = rows.get(key)
            if row is not None and row.seen == now:  # the same name twice: each occurrence gets its own row
                k = 1
                while (row := rows.get(f"{node.name}\x00{k}")) is not None and row.seen == now:
                    k += 1
                key = f"{node.name}\x00{k}"
            if row is None:
                row = Row(self._slot(), node)
                rows[key] = row
                dirty.append(row)
            elif row.node is not node:
                if not _same(row.node, node):
                    dirty.append(row)
                row.node = node
            row.seen = now
            out.append(row)
        if dirty:
            self._derive(dirty)
        if now % EVICT_AFTER == 0:
            for key in [k for k, r in rows.items() if now - r.seen >= EVICT_AFTER]:
                row = rows.pop(key)
                if self._sig_rows is not None:
                    self._unindex(row)
                self._free.append(row.index)
        return out

    def _bloated(self) -> bool:
        """Interned values (node classes, pod signatures) mostly of nodes and pods long gone?"""
        live = len(self.rows)
        sigs = len(self._sig_rows) if self._sig_rows is not None else 0
        return (len(self.classes.values) > 2 * live + BLOAT_SLACK
                or len(self.taintsets.values) > 2 * live + BLOAT_SLACK
                or len(self.signatures.values) > 2 * sigs + 4 * BLOAT_SLACK)

    def _slot(self) -> int:
        if self._free:
            return self._free.pop()
        i = self._high
        self._high += 1
        cap = len(self.cls)
        if i >= cap:
            new = cap * 2

            def grow(a: Any) -> Any:
                return np.concatenate([a, np.zeros((new - cap, *a.shape[1:]), dtype=a.dtype)])

            self.alloc, self.used = grow(self.alloc), grow(self.used)
            self.cls, self.taint = grow(self.cls), grow(self.taint)
            self.schedulable, self.in_flight = grow(self.schedulable), grow(self.in_flight)
            for key, (reg, ids) in list(self.domains.items()):
                self.domains[key] = (reg, np.concatenate([ids, np.full(new - cap, -1, dtype=np.int64)]))
        return i

    def _derive(self, dirty: list[Row]) -> None:
        """Derive rows from their (new or changed) nodes; the arrays are written at once."""
        self.derived += len(dirty)
        names: list[str] = []  # every pod's request names and amounts, flat (summed at once below)
        amounts: list[int] = []
        entries: list[int] = []
        cls: list[int] = []
        taint: list[int] = []
        class_key = self._class_key
        new_names: list[str] = []
        for row in dirty:
            node = row.node
            row.full = None
            if self._sig_rows is not None:
                self._unindex(row)
            row.sigs = None
            labels_ = node.labels
            host = row.host = labels_.get(wk.HOSTNAME)
            key = frozenset(labels_.items())
            if host is not None:
                key = key - {(wk.HOSTNAME, host)}
            cid = class_key.get(key)
            if cid is None:
                cid = self.classes.id((reqs_mod.Requirements.from_labels(dict(key)), True))
                class_key[key] = cid
            cls.append(cid)
            taints = tuple(node.taints)
            if node.in_flight and taints:
                taints = tuple(t for t in taints if t.key not in EPHEMERAL)
            taint.append(self.taintsets.id(taints))
            usage: hostports.HostPortUsage | None = None
            anti: list[topology.Term] = []
            start = len(names)
            for p in node.pods:
                if p.pod_anti_affinity is not None:
                    anti.extend(self.owned_terms(p))
                r = p.requests
                names.extend(r)
                amounts.extend(r.values())
                hps = p.host_ports()
                if hps:
                    usage = usage or hostports.HostPortUsage()
                    usage.add(p.key, [hostports.host_port(*hp) for hp in hps])
            row.ports = usage
            row.anti = tuple(anti)
            entries.append(len(names) - start)
            for name in node.allocatable:
                if name not in self._col:
                    new_names.append(name)
        new_names.extend(n for n in set(names) if n not in self._col)
        idx = np.fromiter((r.index for r in dirty), dtype=np.int64, count=len(dirty))
        if new_names:
            skip = set(idx.tolist())
            for name in sorted(set(new_names)):
                if name not in self._col:
                    self._add_column(name, skip)
        self.cls[idx] = cls
        self.taint[idx] = taint
        self.schedulable[idx] = [r.node.schedulable for r in dirty]
        self.in_flight[idx] = [r.node.in_flight for r in dirty]
        columns = self.columns
        self.alloc[idx] = [[r.node.allocatable.get(c, 0) for c in columns] for r in dirty]
        used = np.zeros((len(dirty), len(columns)), dtype=np.int64)
        if names:
            where = np.repeat(np.arange(len(dirty)), entries)
            cols = np.fromiter(map(self._col.__getitem__, names), dtype=np.int64, count=len(names))
            np.add.at(used, (where, cols), np.array(amounts, dtype=np.int64))
        self.used[idx] = used
        for k, (reg, ids) in self.domains.items():
            ids[idx] = [-1 if (v := r.node.labels.get(k)) is None else reg.id(v) for r in dirty]
        if self._sig_rows is not None:
            for row in dirty:
                self._index(row)

    def _add_column(self, name: str, skip: set[int]) -> None:
        """A resource name not seen before: a new column, filled for every live row but ``skip``."""
        j = len(self.columns)
        self.columns.append(name)
        self._col[name] = j
        cap = len(self.cls)
        self.alloc = np.concatenate([self.alloc, np.zeros((cap, 1), dtype=np.int64)], axis=1)
        self.used = np.concatenate([self.used, np.zeros((cap, 1), dtype=np.int64)], axis=1)
        for row in self.rows.values():
            if row.index in skip:
                continue
            self.alloc[row.index, j] = row.node.allocatable.get(name, 0)
            self.used[row.index, j] = sum(p.requests.get(name, 0) for p in row.node.pods)

    # -- reading --------------------------------------------------------------------------------

    def matrices(self, idx: IntArray, dims: Sequence[str]) -> tuple[IntArray, IntArray]:
        """(allocatable, used) of rows ``idx`` over resource dimensions ``dims``."""
        alloc = np.zeros((len(idx), len(dims)), dtype=np.int64)
        used = np.zeros((len(idx), len(dims)), dtype=np.int64)
        for j, d in enumerate(dims):
            c = self._col.get(d)
            if c is not None:
                alloc[:, j] = self.alloc[idx, c]
                used[:, j] = self.used[idx, c]
        return alloc, used

    def domain_ids(self, key: str) -> tuple[bins_mod.Registry, IntArray]:
        """The values of label ``key`` (a registry) and each row's value id (-1: no such label)."""
        hit = self.domains.get(key)
        if hit is None:
            reg = bins_mod.Registry()
            ids = np.full(len(self.cls), -1, dtype=np.int64)
            for row in sorted(self.rows.values(), key=lambda r: r.index):
                value = row.node.labels.get(key)
                if value is not None:
                    ids[row.index] = reg.id(value)
            hit = (reg, ids)
            self.domains[key] = hit
        return hit

    def compat(self, greq: reqs_mod.Requirements) -> BoolArray:
        """Per class id: may a pod requiring ``greq`` (without a hostname key) run on such a node?"""
        vec = self._compat.get(greq)
        total = len(self.classes.values)
        if vec is None or len(vec) < total:
            done = 0 if vec is None else len(vec)
            values = self.classes.values
            more = np.fromiter((values[i][0].compatible(greq, frozenset()) is None for i in range(done, total)),
                               dtype=np.bool_, count=total - done)
            vec = more if vec is None else np.concatenate([vec, more])
            self._compat[greq] = vec
        return vec

    def owned_terms(self, p: pod_mod.Pod) -> tuple[topology.Term, ...]:
        """The required anti-affinity terms ``p`` owns."""
        return self.owned_sets.values[self.owned_id(p)]  # type: ignore[no-any-return]

    def owned_id(self, p: pod_mod.Pod) -> int:
        """The id in :attr:`owned_sets` of the required anti-affinity terms ``p`` owns (memoised
        by the affinity object: the replicas of one workload share it)."""
        aa = p.pod_anti_affinity
        if aa is None:
            return 0
        key = (id(aa), p.namespace)
        hit = self._owned.get(key)
        if hit is None or hit[0] is not aa:
            if len(self._owned) >= MEMO_LIMIT:
                self._owned.clear()
            terms = tuple(topology.term_from_affinity(t, p.namespace, anti=True, required=True)
                          for t in aa.required)
            hit = (aa, terms, self.owned_sets.id(terms))
            self._owned[key] = hit
        return hit[2]

    def signature_rows(self) -> dict[int, dict[int, int]]:
        """Signature id -> {row index: pods of that signature on the row}, over every row.

        Built on first use (a run with a topology term), then kept up to date as rows change."""
        if self._sig_rows is None:
            self._sig_rows = {}
            for row in self.rows.values():
                self._index(row)
        return self._sig_rows

    def _index(self, row: Row) -> None:
        assert self._sig_rows is not None
        for sid, count in self.pod_signatures(row):
            self._sig_rows.setdefault(sid, {})[row.index] = count

    def _unindex(self, row: Row) -> None:
        assert self._sig_rows is not None
        for sid, _ in row.sigs or ():
            where = self._sig_rows[sid]
            del where[row.index]
            if not where:
                del self._sig_rows[sid]

    def pod_signatures(self, row: Row) -> list[tuple[int, int]]:
        """(signature id, pod count) of the pods on ``row``'s node, in first-seen order."""
        if row.sigs is None:
            counts: dict[int, int] = {}
            for p in row.node.pods:
                sid = self.signatures.id((p.namespace, tuple(sorted(p.labels.items())), self.owned_id(p)))
                counts[sid] = counts.get(sid, 0) + 1
            row.sigs = list(counts.items())
        return row.sigs


def _same(a: results.ExistingNode, b: results.ExistingNode) -> bool:
    """Nothing the scheduler derives from the node differs (pods compared by identity)."""
    if a.in_flight != b.in_flight or a.schedulable != b.schedulable or a.nodepool != b.nodepool:
        return False
    if a.labels is not b.labels and a.labels != b.labels:
        return False
    if a.taints != b.taints or (a.allocatable is not b.allocatable and a.allocatable != b.allocatable):
        return False
    pa, pb = a.pods, b.pods
    return pa is pb or (len(pa) == len(pb) and all(map(operator.is_, pa, pb)))
