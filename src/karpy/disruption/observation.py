"""The disruption controller's reading of the cluster: one :class:`Observation` per pass.

:class:`Observer` reads a :class:`karpy.controllers.state.ClusterState` (no listing of its own) and
builds, per pass: the NodePools, every Node with its NodeClaim and pods, the disruption candidates
(:mod:`karpy.disruption.candidates`) and why the other nodes are not candidates, each candidate's
emptiness time, the NodePools' node and disrupting counts, the drift reasons (kept up to date on
the NodeClaims by :class:`karpy.disruption.drift_marking.DriftMarker`) and the nominated nodes.

A caller may rely on:

* **Nominations** come from cluster state (``ClusterState.nominations``: the provisioner nominates
  the nodes and in-flight NodeClaims it planned pending pods onto, for Karpenter's nomination
  window); a nominated node is not a candidate ("node is nominated for a pending pod"). No
  scheduling run happens here.
* :meth:`Observer.snapshot` builds the :class:`karpy.disruption.snapshot.ClusterSnapshot` of an
  observation once (pods' volume topology folded in, billed prices when the cloud bills
  commitments), only when a method needs it.
* ``Unconsolidatable`` events go on the Node and NodeClaim, once per node and message;
  ``DisruptionBlocked`` on a NodePool whose budget holds nodes back; the gauges
  ``karpenter_voluntary_disruption_eligible_nodes{reason}`` are set every pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as clock_mod
from karpy import settings as settings_mod
from karpy.api import errors as api_errors
from karpy.api import fields as fields_mod
from karpy.api import labels, node, nodeclaim, nodepool, pod, selectors
from karpy.cloudprovider import instancetype
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import state
from karpy.disruption import candidates, consolidation, drift_marking, emptiness, orchestrator
from karpy.disruption import snapshot as snapshot_mod
from karpy.kube import errors as kube_errors
from karpy.kube import events, interface, memory_eviction
from karpy.observability import metrics as metrics_mod
from karpy.scheduling import volumetopology

log = logging.getLogger("karpy.disruption")

NOMINATED = "node is nominated for a pending pod"
BUDGET_BLOCKED = "No allowed disruptions due to blocking budget"

InstanceTypes = Callable[[Sequence[nodepool.NodePool]], Mapping[str, Sequence[instancetype.InstanceType]]]
NodeRow = tuple[node.Node, nodeclaim.NodeClaim | None, list[pod.Pod]]
_Row = tuple[tuple[str, str, int, Any], "candidates.Candidate | str", bool]


def _rv(obj: dict[str, Any] | None) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "") if obj is not None else ""


@dataclass
class Observation:
    """One loop's reading of the cluster."""

    now: float
    pools: dict[str, nodepool.NodePool]
    pool_objs: dict[str, dict[str, Any]]
    node_objs: dict[str, dict[str, Any]]
    claim_objs: dict[str, dict[str, Any]]
    """Node name -> its NodeClaim as stored."""
    nodes: list[NodeRow]
    candidates: dict[str, candidates.Candidate] = field(default_factory=dict)
    why_not: dict[str, str] = field(default_factory=dict)
    since: dict[str, float | None] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    disrupting: dict[str, int] = field(default_factory=dict)
    drifted: dict[str, str] = field(default_factory=dict)
    """Node name -> drift reason (candidates and not)."""
    nominated: set[str] = field(default_factory=set)
    """Nodes and in-flight NodeClaims nominated for pending pods (cluster state's nominations)."""
    snapshot: snapshot_mod.ClusterSnapshot | None = None


class Observer:
    """Builds :class:`Observation` s; see the module docstring."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock, cluster_state: state.ClusterState,
                 cloud: cp_interface.CloudProvider | None, settings: settings_mod.Settings,
                 instance_types: InstanceTypes | None, orchestrator_: orchestrator.Orchestrator,
                 drift_marker: drift_marking.DriftMarker, recorder: events.EventRecorder,
                 metrics: metrics_mod.Metrics | None) -> None:
        self.cluster = cluster
        self.clock = clock
        self.state = cluster_state
        self.cloud = cloud
        self.settings = settings
        self._instance_types = instance_types
        self.orchestrator = orchestrator_
        self.drift_marker = drift_marker
        self.recorder = recorder
        self.metrics = metrics
        self.last_pod_event: dict[str, float] = {}
        """Node name -> time of the last event of a non-daemon pod bound to it."""
        self._unconsolidatable: dict[str, str] = {}
        self._rows: dict[str, _Row] = {}
        """Node name -> the versions its last candidate verdict was computed from, and the verdict."""
        self._last_pdbs: list[candidates.Pdb] = []

    def _candidate(self, rows: dict[str, _Row], row: tuple[str, str, int, Any], n: node.Node,
                   claim: nodeclaim.NodeClaim | None, pool: nodepool.NodePool | None, pods: list[pod.Pod],
                   pdbs: list[candidates.Pdb], now: float, same_pdbs: bool) -> candidates.Candidate | str:
        """:func:`candidates.candidate` of one node, computed again only when the Node, its NodeClaim,
        its pods, its NodePool's spec or the PDBs changed, or a pod's do-not-disrupt duration may
        have run out (a verdict that depends on the time is never reused)."""
        cached = self._rows.get(n.name)
        if cached is not None and same_pdbs and cached[0] == row and row[0] and not cached[2]:
            result = cached[1]
            if isinstance(result, candidates.Candidate) and pool is not None and result.nodepool is not pool:
                result = candidates.Candidate(result.node, result.nodeclaim, pool, result.pods)  # a newer status
            rows[n.name] = (row, result, False)
            return result
        result = candidates.candidate(n, claim, pool, pods, pdbs, now)
        timed = any(p.metadata.annotations.get(labels.DO_NOT_DISRUPT) not in (None, "", "true") for p in pods)
        rows[n.name] = (row, result, timed)
        return result

    def observe(self, now: float) -> Observation:
        """Read the cluster: candidates, why the others are not, emptiness times, drift."""
        pools: dict[str, nodepool.NodePool] = {}
        pool_objs: dict[str, dict[str, Any]] = {}
        for p in self.state.nodepools():
            raw = self.state.raw("NodePool", p.name)
            if raw is not None:
                pools[p.name], pool_objs[p.name] = p, raw
        claims_by_node: dict[str, nodeclaim.NodeClaim] = {}
        for c in self.state.nodeclaims():
            if c.status.node_name:
                claims_by_node[c.status.node_name] = c
        obs = Observation(now=now, pools=pools, pool_objs=pool_objs, node_objs={}, claim_objs={}, nodes=[])
        obs.nominated = self.state.nominated(now)
        pdbs = self._pdbs()
        queued = self.orchestrator.candidate_nodes()
        protected = self.orchestrator.protected_claims()
        drifted_claims = self.drift_marker.mark(pools)
        same_pdbs, self._last_pdbs = pdbs == self._last_pdbs, pdbs
        rows: dict[str, _Row] = {}
        live: set[str] = set()
        for n in self.state.nodes():
            raw_node = self.state.raw("Node", n.name)
            if raw_node is None:
                continue
            live.add(n.name)
            obs.node_objs[n.name] = raw_node
            claim: nodeclaim.NodeClaim | None = self.state.nodeclaim_for_node(n.name) or claims_by_node.get(n.name)
            pods, pods_serial = self.state.node_pods(n.name)
            obs.nodes.append((n, claim, pods))
            raw_claim = None
            if claim is not None:
                raw_claim = self.state.raw("NodeClaim", claim.name)
                if raw_claim is not None:
                    obs.claim_objs[n.name] = raw_claim
                if claim.name in drifted_claims:
                    obs.drifted[n.name] = drifted_claims[claim.name]
            pool_name = n.labels.get(labels.NODEPOOL)
            if pool_name:
                obs.total[pool_name] = obs.total.get(pool_name, 0) + 1
                claim_deleting = claim is not None and claim.metadata.deletion_timestamp is not None
                if n.deleting or claim_deleting or not n.ready:
                    obs.disrupting[pool_name] = obs.disrupting.get(pool_name, 0) + 1
            if n.name in queued or (claim is not None and claim.name in protected):
                continue
            pool = pools.get(pool_name) if pool_name else None
            row = (_rv(raw_node), _rv(raw_claim), pods_serial,
                   drift_marking.pool_version(pool) if pool is not None else None)
            result = self._candidate(rows, row, n, claim, pool, pods, pdbs, now, same_pdbs)
            if isinstance(result, str):
                obs.why_not[n.name] = result
                if pool is not None and emptiness.emptiness_enabled(pool) and n.name in obs.claim_objs:
                    self.report_unconsolidatable(n.name, obs, result)
                continue
            disabled = candidates.consolidation_disabled(result)
            if disabled is not None and n.name in obs.claim_objs:
                self.report_unconsolidatable(n.name, obs, disabled)
            if n.name in obs.nominated or (claim is not None and claim.name in obs.nominated):
                # Karpenter's StateNode.ValidateNodeDisruptable
                obs.why_not[n.name] = NOMINATED
                continue
            obs.candidates[n.name] = result
            obs.since[n.name] = emptiness.empty_since(result.nodeclaim, self.last_pod_event.get(n.name))
        self._rows = rows  # nodes gone (or not reached this pass) are forgotten
        for gone in set(self.last_pod_event) - live:
            del self.last_pod_event[gone]
        for gone in set(self._unconsolidatable) - live:
            del self._unconsolidatable[gone]
        self._set_eligible(obs)
        return obs

    # ------------------------------------------------------------------------------- queries

    def past_consolidate_after(self, c: candidates.Candidate, obs: Observation) -> bool:
        after = c.nodepool.disruption.consolidate_after
        if after is None:
            return False
        since = obs.since.get(c.name)
        return since is None or obs.now - since >= after

    def underutilized(self, obs: Observation) -> list[candidates.Candidate]:
        return [c for c in obs.candidates.values()
                if consolidation.consolidates_underutilized(c.nodepool) and self.past_consolidate_after(c, obs)]

    def _set_eligible(self, obs: Observation) -> None:
        if self.metrics is None:
            return
        empty = sum(1 for c in obs.candidates.values()
                    if emptiness.is_consolidatable(c, obs.since.get(c.name), obs.now))
        gauge = self.metrics.disruption_eligible_nodes
        gauge.labels(reason="empty").set(empty)
        gauge.labels(reason="drifted").set(sum(1 for name in obs.candidates if name in obs.drifted))
        gauge.labels(reason="underutilized").set(len(self.underutilized(obs)))

    # ------------------------------------------------------------------------------ snapshot

    def snapshot(self, obs: Observation) -> snapshot_mod.ClusterSnapshot:
        """The consolidation snapshot of ``obs`` (built once per loop)."""
        if obs.snapshot is not None:
            return obs.snapshot
        pools = [p for p in obs.pools.values() if p.metadata.deletion_timestamp is None]
        types = dict(self.instance_types(pools))
        node_names = {n.name for n, _, _ in obs.nodes}
        in_flight = [e for e in self.state.existing_nodes(types) if e.name not in node_names]
        obs.snapshot = snapshot_mod.ClusterSnapshot.build(
            self._with_volume_topology(obs.nodes), pools, types, pending_pods=self.state.pending_pods(),
            daemonsets=self.state.daemonset_pods(), usage=self.state.nodepool_usage(types),
            in_flight=in_flight, now=obs.now, billed=self._billed(obs.nodes))
        return obs.snapshot

    def instance_types(self, pools: Sequence[nodepool.NodePool]) -> Mapping[str, Sequence[instancetype.InstanceType]]:
        if self._instance_types is not None:
            return self._instance_types(pools)
        out: dict[str, list[instancetype.InstanceType]] = {}
        if self.cloud is None:
            return out
        for p in pools:
            try:
                out[p.name] = list(self.cloud.get_instance_types(p))
            except Exception as exc:  # one pool's failure must not stop the others
                log.warning("disruption: cannot get instance types of NodePool %s: %s", p.name, exc)
        return out

    def _billed(self, nodes: list[NodeRow]) -> dict[str, float] | None:
        """Each node's billed $/h when the cloud bills commitments (:class:`cp_interface.Billing`)."""
        billed_price = getattr(self.cloud, "billed_price", None)
        if not callable(billed_price):
            return None
        out: dict[str, float] = {}
        for n, _, _ in nodes:
            price = billed_price(n.provider_id) if n.provider_id else None
            if price is None:
                return None  # no commitments: offering prices hold
            out[n.provider_id] = float(price)
        return out

    def _with_volume_topology(self, nodes: list[NodeRow]) -> list[NodeRow]:
        """The nodes with their pods' volume topology folded into the pods' affinity, so a pod that
        must move is only planned where its volumes can attach (pods whose claims cannot be read
        are kept as they are)."""
        if not volumetopology.needs_volumes(p for _, _, pods in nodes for p in pods):
            return nodes
        try:
            vols = volumetopology.Volumes.of(self.cluster.list("PersistentVolumeClaim"),
                                             self.cluster.list("PersistentVolume"),
                                             self.cluster.list("StorageClass"))
        except kube_errors.KubeError as exc:
            log.warning("disruption: cannot read volumes: %s", exc)
            return nodes
        out = []
        for n, claim, pods in nodes:
            if volumetopology.needs_volumes(pods):
                moved, _ = volumetopology.apply(pods, vols)
                by_key = {p.key: p for p in moved}
                pods = [by_key.get(p.key, p) for p in pods]
            out.append((n, claim, pods))
        return out

    def _pdbs(self) -> list[candidates.Pdb]:
        out: list[candidates.Pdb] = []
        by_ns: dict[str, list[dict[str, Any]]] = {}
        raws = self.state.raws("PodDisruptionBudget")
        if not raws:
            return out
        for p in self.state.raws("Pod"):
            by_ns.setdefault(interface.namespace_of(p) or "default", []).append(p)

        def lookup(namespace: str, ref: Any) -> dict[str, Any] | None:
            try:
                return self.cluster.get(str(ref.get("kind", "")), str(ref.get("name", "")), namespace)
            except kube_errors.KubeError:
                return None

        for obj in raws:
            ns = interface.namespace_of(obj) or "default"
            spec = obj.get("spec") or {}
            try:
                selector = selectors.LabelSelector.parse(
                    fields_mod.Fields(spec.get("selector") or {}, "PodDisruptionBudget", "spec.selector"))
                _, _, allowed = memory_eviction.disruptions_allowed(obj, by_ns.get(ns, []), lookup)
            except (api_errors.ValidationError, kube_errors.KubeError):
                continue
            out.append(candidates.Pdb(ns, interface.name_of(obj), selector, allowed))
        return out

    # -------------------------------------------------------------------------------- events

    def blocked(self, obs: Observation, pool_names: Iterable[str]) -> None:
        """``DisruptionBlocked`` on each NodePool named."""
        for pool_name in sorted(set(pool_names)):
            raw = obs.pool_objs.get(pool_name)
            if raw is not None:
                self.recorder.normal(raw, "DisruptionBlocked", BUDGET_BLOCKED)

    def report_unconsolidatable(self, node_name: str, obs: Observation, why: str) -> None:
        """``Unconsolidatable`` on the node and its NodeClaim, once per node and message."""
        if self._unconsolidatable.get(node_name) == why:
            return
        node_obj = obs.node_objs.get(node_name)
        claim_obj = obs.claim_objs.get(node_name)
        if node_obj is None or claim_obj is None:
            return
        self._unconsolidatable[node_name] = why
        self.recorder.normal(node_obj, "Unconsolidatable", why)
        self.recorder.normal(claim_obj, "Unconsolidatable", why)
