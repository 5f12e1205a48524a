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
  row index. A row is re-derived when its node's labels, taints, allocatable, nodepool, ``in_flight`` or
  ``schedulable`` differ (by equality), or its pods differ (by identity of the Pod objects, in
  order: Pod models are immutable, so the same objects mean the same pods). Everything derived
  depends only on the node itself, so a kept table and a fresh one give the same pass.
- Rows of nodes absent from :data:`EVICT_AFTER` consecutive syncs are dropped, at the latest
  after twice as many; when interned values (node classes, taint sets, pod signatures) are
  mostly of nodes and pods long gone, the table starts afresh. Memory stays proportional to the
  nodes and pods recently seen.
- A table built with ``once=True`` serves one pass only (a Scheduler without a cache): it reads
  the running pods' signatures the pass's terms care about (:meth:`NodeTable.relevant_rows`)
  without building the index a kept table keeps up to date; the pass is the same.
- A kept table keeps, per topology term, the running pod signatures it matches
  (:mod:`term_index`): a run reads its terms' lists (:meth:`NodeTable.relevant_batches`) instead
  of matching every signature against every term; dropped when the table starts afresh.
- Pure: no I/O, no clock; nothing here depends on the order in which rows were created.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from karpy.api import labels as wk
from karpy.api import pod as pod_mod
from karpy.provisioning import bins as bins_mod
from karpy.provisioning import results, term_index
from karpy.scheduling import hostports, topology
from karpy.scheduling import namespaces as ns_mod
from karpy.scheduling import requirements as reqs_mod

IntArray = npt.NDArray[np.int64]
T = TypeVar("T")
BoolArray = npt.NDArray[np.bool_]
EVICT_AFTER = 16
MEMO_LIMIT = 4096
BLOAT_SLACK = 1024
EPHEMERAL = frozenset({wk.TAINT_NOT_READY, wk.TAINT_UNREACHABLE, wk.TAINT_UNREGISTERED,
                       "node.cloudprovider.kubernetes.io/uninitialized"})


class NodeTable:
    """Existing nodes kept between passes (see the module docstring)."""

    def __init__(self, namespaces: ns_mod.NamespaceIndex = ns_mod.EMPTY, *, once: bool = False) -> None:
        self.namespaces = namespaces
        self.once = once
        """Used by one run only (not kept): :meth:`relevant_rows` then builds no index."""
        """The Namespaces the rows' anti-affinity terms were resolved with (a sync with others starts afresh)."""
        self.rows: dict[str, int] = {}
        """Node name -> row index. Per row index (plain lists: no object per row, so building a
        table of many nodes allocates little for the garbage collector to scan):"""
        self.node: list[results.ExistingNode | None] = []
        self.host: list[str | None] = []
        """The node's hostname label."""
        self.anti: list[tuple[topology.Term, ...]] = []
        """Required anti-affinity terms its pods own, in pod order (the inverse rule binds others)."""
        self.ports: list[hostports.HostPortUsage | None] = []
        """Host ports its pods hold (shared: copy before adding)."""
        self.sigs: list[dict[int, int] | None] = []
        self.full: list[reqs_mod.Requirements | None] = []
        self.seen: list[int] = []
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
        self._seen_classes: dict[tuple[tuple[str, ...], tuple[str | None, ...]], int] = {}
        """(label names in a node's order, its values with None for the hostname) -> class id."""
        self._host_at: dict[tuple[str, ...], int] = {}
        """Label names in a node's order -> the hostname's place among them (-1: none)."""
        self.taintsets = bins_mod.Registry()
        self.domains: dict[str, tuple[bins_mod.Registry, IntArray]] = {}
        self.signatures = bins_mod.Registry()
        """Signature (namespace, sorted labels, id in :attr:`owned_sets`) -> id."""
        self._seen_sigs: dict[tuple[str, tuple[tuple[str, str], ...], int], int] = {}
        """The same with the labels in a pod's order -> id."""
        self.owned_sets = bins_mod.Registry()
        """Tuples of required anti-affinity terms a pod owns -> id (``()`` is 0)."""
        self.owned_sets.id(())
        self._sig_rows: dict[int, dict[int, int]] | None = None
        self.term_index = term_index.TermIndex()
        """Per topology term, the signatures it matches (kept between runs: :meth:`relevant_batches`)."""
        self._compat: dict[reqs_mod.Requirements, BoolArray] = {}
        self._owned: dict[tuple[int, str], tuple[Any, tuple[topology.Term, ...], int]] = {}
        self.syncs = 0
        self.derived = 0
        """How many times a row was (re-)derived from its node: what the passes cost beyond a comparison."""

    # -- sync -----------------------------------------------------------------------------------

    def sync(self, nodes: Sequence[results.ExistingNode], namespaces: ns_mod.NamespaceIndex = ns_mod.EMPTY
             ) -> IntArray:
        """Make the table agree with ``nodes`` (their pods' terms resolved with ``namespaces``);
        their row indices, in order."""
        if namespaces != self.namespaces or (self.syncs % EVICT_AFTER == 0 and self._bloated()):
            syncs, derived = self.syncs, self.derived
            self.__init__(namespaces, once=self.once)  # type: ignore[misc]
            self.syncs, self.derived = syncs, derived
        self.syncs += 1
        now = self.syncs
        out = np.empty(len(nodes), dtype=np.int64)
        dirty: list[int] = []
        rows, kept, seen = self.rows, self.node, self.seen
        for j, node in enumerate(nodes):
            key = node.name
            i = rows.get(key)
            if i is not None and seen[i] == now:  # the same name twice: each occurrence gets its own row
                k = 1
                while (i := rows.get(f"{node.name}\x00{k}")) is not None and seen[i] == now:
                    k += 1
                key = f"{node.name}\x00{k}"
            if i is None:
                i = self._slot()
                rows[key] = i
                kept[i] = node
                dirty.append(i)
            else:
                old = kept[i]
                if old is not node:
                    if not _same(old, node):  # type: ignore[arg-type]
                        dirty.append(i)
                    kept[i] = node
            seen[i] = now
            out[j] = i
        if dirty:
            self._derive(dirty)
        if now % EVICT_AFTER == 0:
            for key in [k for k, i in rows.items() if now - seen[i] >= EVICT_AFTER]:
                i = rows.pop(key)
                if self._sig_rows is not None:
                    self._unindex(i)
                self.node[i] = self.ports[i] = self.sigs[i] = self.full[i] = None
                self.anti[i] = ()
                self._free.append(i)
        return out

    def requirements(self, i: int) -> reqs_mod.Requirements:
        """Row ``i``'s node's full requirement set (with its hostname), built on first use."""
        full = self.full[i]
        if full is None:
            node = self.node[i]
            assert node is not None
            full = self.full[i] = reqs_mod.Requirements.from_labels(node.labels)
        return full

    def _bloated(self) -> bool:
        """Interned values (node classes, pod signatures) mostly of nodes and pods long gone?"""
        live = len(self.rows)
        sigs = len(self._sig_rows) if self._sig_rows is not None else 0
        return (max(len(self.classes.values), len(self._seen_classes)) > 2 * live + BLOAT_SLACK
                or len(self.taintsets.values) > 2 * live + BLOAT_SLACK
                or max(len(self.signatures.values), len(self._seen_sigs)) > 2 * sigs + 4 * BLOAT_SLACK)

    def _slot(self) -> int:
        if self._free:
            return self._free.pop()
        i = self._high
        self._high += 1
        for column in (self.node, self.host, self.ports, self.sigs, self.full):
            column.append(None)
        self.anti.append(())
        self.seen.append(0)
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

    def _derive(self, dirty: list[int]) -> None:
        """Derive rows from their (new or changed) nodes; the arrays are written at once."""
        self.derived += len(dirty)
        names: list[str] = []  # every pod's request names and amounts, flat (summed at once below)
        amounts: list[int] = []
        entries: list[int] = []
        cls: list[int] = []
        taint: list[int] = []
        new_names: list[str] = []
        nodes = [n for n in (self.node[i] for i in dirty) if n is not None]
        indexed = self._sig_rows is not None
        for i, node in zip(dirty, nodes, strict=True):
            self.full[i] = None
            if indexed:
                self._unindex(i)
            self.sigs[i] = None
            labels_ = node.labels
            host = self.host[i] = labels_.get(wk.HOSTNAME)
            cls.append(self._class_id(labels_, host))
            taints = tuple(node.taints)
            if node.in_flight and taints:
                taints = tuple(t for t in taints if t.key not in EPHEMERAL)
            taint.append(self.taintsets.id(taints))
            usage: hostports.HostPortUsage | None = None
            anti: tuple[topology.Term, ...] = ()
            start = len(names)
            for p in node.pods:
                if p.pod_anti_affinity is not None:
                    anti += self.owned_terms(p)
                r = p.requests
                names.extend(r)
                amounts.extend(r.values())
                if p.host_ports():
                    usage = usage or hostports.HostPortUsage()
                    usage.add(p.key, [hostports.host_port(*hp) for hp in p.host_ports()])
            self.ports[i] = usage
            self.anti[i] = anti
            entries.append(len(names) - start)
            for name in node.allocatable:
                if name not in self._col:
                    new_names.append(name)
        new_names.extend(n for n in set(names) if n not in self._col)
        idx = np.array(dirty, dtype=np.int64)
        if new_names:
            skip = set(dirty)
            for name in sorted(set(new_names)):
                if name not in self._col:
                    self._add_column(name, skip)
        self.cls[idx] = cls
        self.taint[idx] = taint
        self.schedulable[idx] = [n.schedulable for n in nodes]
        self.in_flight[idx] = [n.in_flight for n in nodes]
        columns = self.columns
        self.alloc[idx] = np.fromiter((n.allocatable.get(c, 0) for n in nodes for c in columns), dtype=np.int64,
                                      count=len(nodes) * len(columns)).reshape(len(nodes), len(columns))
        used = np.zeros((len(dirty), len(columns)), dtype=np.int64)
        if names:
            where = np.repeat(np.arange(len(dirty)), entries)
            cols = np.fromiter(map(self._col.__getitem__, names), dtype=np.int64, count=len(names))
            np.add.at(used, (where, cols), np.array(amounts, dtype=np.int64))
        self.used[idx] = used
        for k, (reg, ids) in self.domains.items():
            ids[idx] = [-1 if (v := n.labels.get(k)) is None else reg.id(v) for n in nodes]
        if indexed:
            for i in dirty:
                self._index(i)

    def _class_id(self, labels_: Mapping[str, str], host: str | None) -> int:
        """The class id of a node with these labels (``host``: its hostname label's value).

        Looked up first by the label names in the node's order and the values without the hostname
        (:attr:`_seen_classes`: nodes of one kind list their labels alike), else by the set of labels
        without the hostname, as the class is defined."""
        names = tuple(labels_)
        at = self._host_at.get(names)
        if at is None:
            at = self._host_at[names] = names.index(wk.HOSTNAME) if host is not None else -1
        values: list[str | None] = list(labels_.values())
        if at >= 0:
            values[at] = None
        seen = (names, tuple(values))
        cid = self._seen_classes.get(seen)
        if cid is None:
            key = frozenset(labels_.items())
            if host is not None:
                key = key - {(wk.HOSTNAME, host)}
            cid = self._class_key.get(key)
            if cid is None:
                cid = self._class_key[key] = self.classes.id((reqs_mod.Requirements.from_labels(dict(key)), True))
            self._seen_classes[seen] = cid
        return cid

    def _add_column(self, name: str, skip: set[int]) -> None:
        """A resource name not seen before: a new column, filled for every live row but ``skip``."""
        j = len(self.columns)
        self.columns.append(name)
        self._col[name] = j
        cap = len(self.cls)
        self.alloc = np.concatenate([self.alloc, np.zeros((cap, 1), dtype=np.int64)], axis=1)
        self.used = np.concatenate([self.used, np.zeros((cap, 1), dtype=np.int64)], axis=1)
        for i in self.rows.values() if len(skip) < len(self.rows) else ():  # all skipped: a fresh table
            node = self.node[i]
            if i in skip or node is None:
                continue
            self.alloc[i, j] = node.allocatable.get(name, 0)
            self.used[i, j] = sum(p.requests.get(name, 0) for p in node.pods)

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
            for i in sorted(self.rows.values()):
                node = self.node[i]
                value = node.labels.get(key) if node is not None else None
                if value is not None:
                    ids[i] = reg.id(value)
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
            terms = tuple(topology.term_from_affinity(t, p.namespace, anti=True, required=True,
                                                      namespaces=self.namespaces) for t in aa.required)
            hit = (aa, terms, self.owned_sets.id(terms))
            self._owned[key] = hit
        return hit[2]

    def signature_rows(self) -> dict[int, dict[int, int]]:
        """Signature id -> {row index: pods of that signature on the row}, over every row.

        Built on first use (a run with a topology term), then kept up to date as rows change."""
        if self._sig_rows is None:
            index: dict[int, dict[int, int]] = {}
            self._sig_rows = index
            for i in self.rows.values():  # _index of every row, its lookups hoisted (one walk of every pod)
                for sid, count in self.pod_signatures(i).items():
                    where = index.get(sid)
                    if where is None:
                        where = index[sid] = {}
                    where[i] = count
        return self._sig_rows

    def relevant_rows(self, relevant: Callable[[str, tuple[tuple[str, str], ...], tuple[topology.Term, ...]], list[T]],
                      probes: topology.LabelProbes | None = None) -> list[tuple[list[T], dict[int, int]]]:
        """(``relevant(namespace, sorted labels, owned terms)`` of a pod signature, {row index: pods of
        that signature on the row}) for every signature it says something of (a non-empty list), in
        :meth:`signature_rows`' order. A table used by one run (:attr:`once`) walks its rows' pods
        without building the index (beside 100,000 running pods, few are relevant), and reads the
        signature only of the pods ``probes`` finds (:func:`topology.label_probes` of the terms
        ``relevant`` tells of: it says nothing of the others) or with a pod anti-affinity."""
        values, owned = self.signatures.values, self.owned_sets.values
        if not self.once:
            return [(said, where) for sid, where in self.signature_rows().items()
                    if (said := relevant(values[sid][0], values[sid][1], owned[values[sid][2]]))]
        out: dict[int, tuple[list[T], dict[int, int]]] = {}
        told: dict[int, list[T]] = {}
        nodes = self.node
        for i in self.rows.values():
            node = nodes[i]
            for sid, count in self._count_signatures(node.pods if node is not None else (), probes).items():
                answer = told.get(sid)
                if answer is None:
                    answer = told[sid] = relevant(values[sid][0], values[sid][1], owned[values[sid][2]])
                if answer:
                    hit = out.get(sid)
                    if hit is None:
                        hit = out[sid] = (answer, {})
                    hit[1][i] = count
        return list(out.values())

    def relevant_batches(self, terms: Sequence[topology.Term]) -> list[tuple[term_index.Relevance, IntArray, IntArray]]:
        """:func:`term_index.batches` of a kept table's running pods for a run with ``terms`` (distinct)."""
        rows = self.signature_rows()  # registers every row's signatures: before their relevance
        said = self.term_index.relevance(terms, self.signatures.values, self.owned_sets.values)
        return term_index.batches(said, rows)

    def _index(self, i: int) -> None:
        assert self._sig_rows is not None
        for sid, count in self.pod_signatures(i).items():
            self._sig_rows.setdefault(sid, {})[i] = count

    def _unindex(self, i: int) -> None:
        assert self._sig_rows is not None
        for sid in self.sigs[i] or ():
            where = self._sig_rows[sid]
            del where[i]
            if not where:
                del self._sig_rows[sid]

    def pod_signatures(self, i: int) -> dict[int, int]:
        """Signature id -> pod count of the pods on row ``i``'s node, in first-seen order (read-only)."""
        sigs = self.sigs[i]
        if sigs is None:
            node = self.node[i]
            sigs = self.sigs[i] = self._count_signatures(node.pods if node is not None else (), None)
        return sigs

    def _count_signatures(self, pods: Sequence[pod_mod.Pod], probes: topology.LabelProbes | None
                          ) -> dict[int, int]:
        """Signature id -> how many of ``pods`` have it, in first-seen order. With ``probes``
        (:func:`topology.label_probes`), only of the pods a probe finds or with a pod anti-affinity:
        the others no term selects, and they own none."""
        out: dict[int, int] = {}
        seen = self._seen_sigs
        for p in pods:
            md = p.metadata
            aa = p.pod_anti_affinity
            if probes is not None and aa is None:
                labels_ = md.labels
                for k, allowed in probes:
                    v = labels_.get(k)
                    if v is not None and (allowed is None or v in allowed):
                        break
                else:
                    continue
            key = (md.namespace, tuple(md.labels.items()), 0 if aa is None else self.owned_id(p))
            sid = seen.get(key)
            if sid is None:
                sid = self._signature_id(key)
            out[sid] = out.get(sid, 0) + 1
        return out

    def _signature_id(self, key: tuple[str, tuple[tuple[str, str], ...], int]) -> int:
        """The id of the signature of a pod with ``key``'s labels in the pod's order (sorted here
        once; :attr:`_seen_sigs` keeps it for every next pod with the same labels in the same order)."""
        namespace, items, owned = key
        sid = self.signatures.id((namespace, tuple(sorted(items)), owned))
        self._seen_sigs[key] = sid
        return sid


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
