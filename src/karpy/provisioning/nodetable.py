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
  after twice as many (memory stays proportional to the nodes recently seen).
- Pure: no I/O, no clock; nothing here depends on the order in which rows were created.
"""

from __future__ import annotations

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
EPHEMERAL = frozenset({wk.TAINT_NOT_READY, wk.TAINT_UNREACHABLE, wk.TAINT_UNREGISTERED,
                       "node.cloudprovider.kubernetes.io/uninitialized"})
Signature = tuple[str, tuple[tuple[str, str], ...], tuple[topology.Term, ...]]
"""A running pod as topology counting sees it: namespace, sorted labels, required anti-affinity it owns."""


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
        self._class_key: dict[tuple[tuple[str, str], ...], int] = {}
        self.taintsets = bins_mod.Registry()
        self.domains: dict[str, tuple[bins_mod.Registry, IntArray]] = {}
        self.signatures = bins_mod.Registry()
        """Signature -> id; ids of signatures owning anti-affinity are in :attr:`owning`."""
        self.owning: set[int] = set()
        self._compat: dict[reqs_mod.Requirements, BoolArray] = {}
        self.syncs = 0
        self.derived = 0
        """How many times a row was (re-)derived from its node: what the passes cost beyond a comparison."""

    # -- sync -----------------------------------------------------------------------------------

    def sync(self, nodes: Sequence[results.ExistingNode]) -> list[Row]:
        """Make the table agree with ``nodes``; their rows, in order."""
        self.syncs += 1
        now = self.syncs
        out: list[Row] = []
        taken: set[str] = set()
        rows = self.rows
        for node in nodes:
            key = node.name
            if key in taken:  # the same name twice: each occurrence gets its own row
                k = 1
                while f"{key}\x00{k}" in taken:
                    k += 1
                key = f"{key}\x00{k}"
            taken.add(key)
            row = rows.get(key)
            if row is None:
                row = Row(self._slot(), node)
                rows[key] = row
                self._derive(row, node)
            elif row.node is not node:
                if not _same(row.node, node):
                    self._derive(row, node)
                else:
                    row.node = node
            row.seen = now
            out.append(row)
        if now % EVICT_AFTER == 0:
            for key in [k for k, r in rows.items() if now - r.seen >= EVICT_AFTER]:
                self._free.append(rows.pop(key).index)
        return out

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

    def _derive(self, row: Row, node: results.ExistingNode) -> None:
        i = row.index
        self.derived += 1
        row.node = node
        row.full = None
        row.sigs = None
        labels_ = node.labels
        row.host = labels_.get(wk.HOSTNAME)
        key = tuple(sorted(kv for kv in labels_.items() if kv[0] != wk.HOSTNAME))
        cid = self._class_key.get(key)
        if cid is None:
            cid = self.classes.id((reqs_mod.Requirements.from_labels(dict(key)), True))
            self._class_key[key] = cid
        self.cls[i] = cid
        taints = tuple(t for t in node.taints if not (node.in_flight and t.key in EPHEMERAL))
        self.taint[i] = self.taintsets.id(taints)
        self.schedulable[i] = node.schedulable
        self.in_flight[i] = node.in_flight
        summed: dict[str, int] = {}
        usage: hostports.HostPortUsage | None = None
        anti: list[topology.Term] = []
        for p in node.pods:
            if p.pod_anti_affinity is not None:
                anti.extend(topology.term_from_affinity(t, p.namespace, anti=True, required=True)
                            for t in p.pod_anti_affinity.required)
            for name, amount in p.requests.items():
                summed[name] = summed.get(name, 0) + amount
            hps = p.host_ports()
            if hps:
                usage = usage or hostports.HostPortUsage()
                usage.add(p.key, [hostports.host_port(*hp) for hp in hps])
        row.ports = usage
        row.anti = tuple(anti)
        for name in (*node.allocatable, *summed):
            if name not in self._col:
                self._add_column(name)
        col = self._col
        self.alloc[i] = 0
        self.used[i] = 0
        for name, amount in node.allocatable.items():
            self.alloc[i, col[name]] = amount
        for name, amount in summed.items():
            self.used[i, col[name]] = amount
        for k, (reg, ids) in self.domains.items():
            value = labels_.get(k)
            ids[i] = -1 if value is None else reg.id(value)

    def _add_column(self, name: str) -> None:
        """A resource name not seen before: a new column, filled for every live row."""
        j = len(self.columns)
        self.columns.append(name)
        self._col[name] = j
        cap = len(self.cls)
        self.alloc = np.concatenate([self.alloc, np.zeros((cap, 1), dtype=np.int64)], axis=1)
        self.used = np.concatenate([self.used, np.zeros((cap, 1), dtype=np.int64)], axis=1)
        for row in self.rows.values():
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

    def pod_signatures(self, row: Row) -> list[tuple[int, int]]:
        """(signature id, pod count) of the pods on ``row``'s node, in first-seen order."""
        if row.sigs is None:
            counts: dict[int, int] = {}
            for p in row.node.pods:
                sid = self.signatures.id(_signature(p))
                counts[sid] = counts.get(sid, 0) + 1
            for sid in counts:
                if self.signatures.values[sid][2]:
                    self.owning.add(sid)
            row.sigs = list(counts.items())
        return row.sigs


def _signature(p: pod_mod.Pod) -> Signature:
    owned: tuple[topology.Term, ...] = ()
    if p.pod_anti_affinity is not None:
        owned = tuple(topology.term_from_affinity(t, p.namespace, anti=True, required=True)
                      for t in p.pod_anti_affinity.required)
    return p.namespace, tuple(sorted(p.labels.items())), owned


def _same(a: results.ExistingNode, b: results.ExistingNode) -> bool:
    """Nothing the scheduler derives from the node differs (pods compared by identity)."""
    if a.in_flight != b.in_flight or a.schedulable != b.schedulable or a.nodepool != b.nodepool:
        return False
    if a.labels is not b.labels and a.labels != b.labels:
        return False
    if a.taints != b.taints or (a.allocatable is not b.allocatable and a.allocatable != b.allocatable):
        return False
    pa, pb = a.pods, b.pods
    if pa is pb:
        return True
    return len(pa) == len(pb) and all(x is y for x, y in zip(pa, pb, strict=True))
