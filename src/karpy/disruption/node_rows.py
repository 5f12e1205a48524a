"""The disruption controller's per-node reading of cluster state, kept up to date by change marks.

:class:`NodeRows` holds one :class:`Row` per Node of cluster state: the Node, its NodeClaim, its
pods, whether it counts as disrupting for its NodePool's budget, and its candidate verdict
(:func:`karpy.disruption.candidates.candidate`) with what the observation derives from it (empty
since, the standing ``Unconsolidatable`` message). :meth:`NodeRows.refresh` re-reads only the
nodes :mod:`karpy.disruption.changes` marked, the nodes of NodePools whose spec changed, every
node when the PodDisruptionBudgets changed, and nodes whose verdict depends on the time (a pod's
``do-not-disrupt`` duration); the per-NodePool counts and the candidate maps are kept alongside.

A caller may rely on: after :meth:`NodeRows.refresh`, every map holds what a fresh walk over every
Node of cluster state would compute now (rows are keyed and :attr:`NodeRows.candidates` ordered
by node name), because the cluster replaces a stored object on every change and every change of
a Node, its NodeClaim or its pods is marked.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import labels, node, nodeclaim, nodepool, pod
from karpy.controllers import state
from karpy.disruption import candidates, changes, consolidation, drift_marking, emptiness

_rv = drift_marking._rv  # one resourceVersion reader for the disruption package


@dataclass(slots=True)
class Row:
    """One node as the disruption controller reads it."""

    node: node.Node
    raw_node: dict[str, Any]
    claim: nodeclaim.NodeClaim | None
    raw_claim: dict[str, Any] | None
    pods: list[pod.Pod]
    pool_name: str
    disrupting: bool
    version: tuple[str, str, int, Any]
    """What the verdict was computed from: the Node's and NodeClaim's resourceVersions, the pods'
    serial number, the NodePool's :func:`drift_marking.pool_version`."""
    verdict: candidates.Candidate | str
    timed: bool
    """The verdict depends on the time (a pod's ``do-not-disrupt`` duration), or on no version."""
    since: float | None = None
    """A candidate's emptiness start (:func:`emptiness.empty_since`)."""
    empty: bool = False
    """A candidate with nothing but DaemonSet / finished pods, of a NodePool with emptiness."""
    report: str | None = None
    """The ``Unconsolidatable`` message this node stands for, if any."""
    under_after: float | None = None
    """A candidate of a NodePool consolidating underutilized nodes: its ``consolidateAfter``."""
    initializing: bool = False
    """A node with a NodeClaim, neither initialized nor deleting (consolidation waits for it)."""


class NodeRows:
    """See the module docstring."""

    def __init__(self, cluster_state: state.ClusterState, dirty: changes.Dirty) -> None:
        self.state = cluster_state
        self.dirty = dirty
        self.rows: dict[str, Row] = {}
        self.order: list[str] = []
        """Row names, sorted."""
        self.triples: list[tuple[node.Node, nodeclaim.NodeClaim | None, list[pod.Pod]]] = []
        """(node, NodeClaim, pods) of each row, in :attr:`order` (the observation's ``nodes``)."""
        self.total: dict[str, int] = {}
        self.disrupting: dict[str, int] = {}
        self.candidates: dict[str, candidates.Candidate] = {}
        """Candidate verdicts (before queued, protected and nominated nodes are taken out), by name."""
        self.why_not: dict[str, str] = {}
        self.since: dict[str, float | None] = {}
        self.empty: set[str] = set()
        self.timed: set[str] = set()
        self.initializing: set[str] = set()
        self.claim_nodes: dict[str, set[str]] = {}
        """NodeClaim name -> the rows holding it."""
        self._by_pool: dict[str, set[str]] = {}
        self._status_node: dict[str, str] = {}
        """NodeClaim name -> its ``status.nodeName`` (parsed claims only)."""
        self._status_claims: dict[str, set[str]] = {}
        self._pool_versions: dict[str, Any] = {}
        self._blocking: list[tuple[str, str, Any, bool, bool]] | None = None
        """Every budget of the last pass, with whether it allowed no disruption (what a verdict reads)."""
        self._sorted = True

    def refresh(self, pools: Mapping[str, nodepool.NodePool], pdbs: list[candidates.Pdb], now: float,
                last_pod_event: Mapping[str, float]) -> set[str]:
        """Bring every row up to date; returns the names re-read (rows changed, added or gone)."""
        everything, nodes, claims = self.dirty.take()
        if everything:
            self._status_node.clear()
            self._status_claims.clear()
            for claim in self.state.nodeclaims():
                self._set_status_node(claim.name, claim.status.node_name or "")
            nodes = set(self.rows) | {n.name for n in self.state.nodes()}
        else:
            for name in claims:
                nodes |= self.claim_nodes.get(name, set())  # the rows holding it now (it may have left them)
                c = self.state.nodeclaim(name)
                self._set_status_node(name, (c.status.node_name or "") if c is not None else "")
        versions = {name: drift_marking.pool_version(p) for name, p in pools.items()}
        for name in set(versions) | set(self._pool_versions):
            if versions.get(name) != self._pool_versions.get(name):
                nodes |= self._by_pool.get(name, set())
        self._pool_versions = versions
        # a verdict reads which budgets select a pod (more than one blocks it) and which allow no
        # disruption (blocking_pdb): a count moving between positive values re-reads nothing
        budgets = candidates.Budgets(pdbs)
        blocking = [(b.namespace, b.name, b.selector, b.disruptions_allowed <= 0, b.always_evict_unhealthy)
                    for b in budgets]
        same_pdbs = blocking == self._blocking
        if not same_pdbs:
            nodes = nodes | set(self.rows)
        self._blocking = blocking
        nodes |= self.timed
        for name in sorted(nodes):
            self._refresh(name, pools, budgets, same_pdbs, now, last_pod_event)
        if not self._sorted:
            self.candidates = dict(sorted(self.candidates.items()))
            self._sorted = True
        return nodes

    def _set_status_node(self, claim: str, node_name: str) -> None:
        old = self._status_node.pop(claim, None)
        if old is not None:
            held = self._status_claims[old]
            held.discard(claim)
            if not held:
                del self._status_claims[old]
        if node_name:
            self._status_node[claim] = node_name
            self._status_claims.setdefault(node_name, set()).add(claim)

    def _claim_by_status(self, node_name: str) -> nodeclaim.NodeClaim | None:
        """The NodeClaim whose ``status.nodeName`` is ``node_name`` (the last by name, as a walk over
        every NodeClaim by name would leave it)."""
        for name in sorted(self._status_claims.get(node_name, ()), reverse=True):
            c = self.state.nodeclaim(name)
            if c is not None and c.status.node_name == node_name:
                return c
        return None

    def _refresh(self, name: str, pools: Mapping[str, nodepool.NodePool], pdbs: candidates.Budgets,
                 same_pdbs: bool, now: float, last_pod_event: Mapping[str, float]) -> None:
        old = self.rows.get(name)
        raw_node = self.state.raw("Node", name)
        n = self.state.node(name) if raw_node is not None else None
        if n is None or raw_node is None:
            if old is not None:
                self._remove(name, old)
            return
        claim = self.state.nodeclaim_for_node(name) or self._claim_by_status(name)
        pods, serial = self.state.node_pods(name)
        raw_claim = self.state.raw("NodeClaim", claim.name) if claim is not None else None
        pool_name = n.labels.get(labels.NODEPOOL) or ""
        pool = pools.get(pool_name) if pool_name else None
        pool_v = drift_marking.pool_version(pool) if pool is not None else None
        version = (_rv(raw_node), _rv(raw_claim), serial, pool_v)
        verdict: candidates.Candidate | str
        if old is not None and same_pdbs and old.version == version and not old.timed:
            verdict = old.verdict
            if isinstance(verdict, candidates.Candidate) and pool is not None and verdict.nodepool is not pool:
                verdict = candidates.Candidate(verdict.node, verdict.nodeclaim, pool, verdict.pods)  # a newer status
            timed = False
        else:
            verdict = candidates.candidate(n, claim, pool, pods, pdbs, now)
            timed = not version[0] or any(
                p.metadata.annotations.get(labels.DO_NOT_DISRUPT) not in (None, "", "true") for p in pods)
        claim_deleting = claim is not None and claim.metadata.deletion_timestamp is not None
        row = Row(node=n, raw_node=raw_node, claim=claim, raw_claim=raw_claim, pods=pods, pool_name=pool_name,
                  disrupting=bool(pool_name) and (n.deleting or claim_deleting or not n.ready),
                  version=version, verdict=verdict, timed=timed)
        if claim is not None:
            initialized = n.labels.get(labels.INITIALIZED) == "true" or claim.is_true(nodeclaim.INITIALIZED)
            row.initializing = not initialized and not (n.deleting or claim_deleting)
        if isinstance(verdict, str):
            if pool is not None and emptiness.emptiness_enabled(pool) and raw_claim is not None:
                row.report = verdict
        else:
            if raw_claim is not None:
                row.report = candidates.consolidation_disabled(verdict)
            row.since = emptiness.empty_since(verdict.nodeclaim, last_pod_event.get(name))
            cpool = verdict.nodepool
            row.empty = emptiness.emptiness_enabled(cpool) and candidates.is_empty(verdict.pods)
            if consolidation.consolidates_underutilized(cpool):
                row.under_after = cpool.disruption.consolidate_after
        i = bisect.bisect_left(self.order, name)
        if old is not None:
            self._forget(name, old)
            self.triples[i] = (n, claim, pods)
        else:
            self.order.insert(i, name)
            self.triples.insert(i, (n, claim, pods))
        self._add(name, row)

    def _add(self, name: str, row: Row) -> None:
        self.rows[name] = row
        if row.pool_name:
            self.total[row.pool_name] = self.total.get(row.pool_name, 0) + 1
            if row.disrupting:
                self.disrupting[row.pool_name] = self.disrupting.get(row.pool_name, 0) + 1
        self._by_pool.setdefault(row.pool_name, set()).add(name)
        if row.claim is not None:
            self.claim_nodes.setdefault(row.claim.name, set()).add(name)
        if row.timed:
            self.timed.add(name)
        if row.initializing:
            self.initializing.add(name)
        if isinstance(row.verdict, str):
            self.why_not[name] = row.verdict
            self.candidates.pop(name, None)
            return
        if name not in self.candidates:
            self._sorted = False
        self.candidates[name] = row.verdict
        self.since[name] = row.since
        if row.empty:
            self.empty.add(name)

    def _forget(self, name: str, row: Row) -> None:
        """Take ``row``'s contributions out of the maps (its name stays in :attr:`order`)."""
        del self.rows[name]
        if row.pool_name:
            _decrement(self.total, row.pool_name)
            if row.disrupting:
                _decrement(self.disrupting, row.pool_name)
        _discard(self._by_pool, row.pool_name, name)
        if row.claim is not None:
            _discard(self.claim_nodes, row.claim.name, name)
        self.timed.discard(name)
        self.initializing.discard(name)
        self.why_not.pop(name, None)
        self.since.pop(name, None)
        self.empty.discard(name)
        # candidates keeps its entry: _add overwrites or drops it, so the name order holds

    def _remove(self, name: str, row: Row) -> None:
        self._forget(name, row)
        self.candidates.pop(name, None)
        i = bisect.bisect_left(self.order, name)
        if i < len(self.order) and self.order[i] == name:
            del self.order[i]
            del self.triples[i]

    def nodes_of(self, names: set[str]) -> set[str]:
        """Row names among ``names`` and the rows holding a NodeClaim named there."""
        out: set[str] = set()
        for name in names:
            if name in self.rows:
                out.add(name)
            out |= self.claim_nodes.get(name, set())
        return out


def _decrement(counts: dict[str, int], key: str) -> None:
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]


def _discard(index: dict[str, set[str]], key: str, name: str) -> None:
    held = index.get(key)
    if held is None:
        return
    held.discard(name)
    if not held:
        del index[key]
