"""The disruption controller's reading of the cluster: one :class:`Observation` per pass.

:class:`Observer` reads a :class:`karpy.controllers.state.ClusterState` (no listing of its own) and
builds, per pass: the NodePools, every Node with its NodeClaim and pods, the disruption candidates
(:mod:`karpy.disruption.candidates`) and why the other nodes are not candidates, each candidate's
emptiness time, the NodePools' node and disrupting counts, the drift reasons (kept up to date on
the NodeClaims by :class:`karpy.disruption.drift_marking.DriftMarker`) and the nominated nodes.
A pass costs what changed since the last one: the per-node reading is kept in
:class:`karpy.disruption.node_rows.NodeRows` and re-read only for the nodes
:class:`karpy.disruption.changes.Changes` marked (an observation gets copies of its maps).

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

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as clock_mod
from karpy import settings as settings_mod
from karpy.api import errors as api_errors
from karpy.api import fields as fields_mod
from karpy.api import labels as wk
from karpy.api import node, nodeclaim, nodepool, pod, selectors
from karpy.cloudprovider import instancetype
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import capacitybuffer, state
from karpy.disruption import (
    balanced,
    candidates,
    changes,
    consolidation,
    drift_marking,
    emptiness,
    milp,
    node_rows,
    orchestrator,
)
from karpy.disruption import snapshot as snapshot_mod
from karpy.kube import errors as kube_errors
from karpy.kube import events, interface
from karpy.observability import metrics as metrics_mod
from karpy.provisioning import policies, results, reuse, spot_share, volume_limits
from karpy.scheduling import volumetopology

log = logging.getLogger("karpy.disruption")

NOMINATED = "node is nominated for a pending pod"
BUDGET_BLOCKED = "No allowed disruptions due to blocking budget"
DEDUPE_TIMEOUT = 120.0
"""Seconds Karpenter's event recorder suppresses a repeat of an event with the same dedupe values."""
DEDUPE_SIZE = 4096

InstanceTypes = Callable[[Sequence[nodepool.NodePool]], Mapping[str, Sequence[instancetype.InstanceType]]]
NodeRow = tuple[node.Node, nodeclaim.NodeClaim | None, list[pod.Pod]]
_NO_LABELS: dict[str, str] = {}
_Candidate = candidates.Candidate  # (the Observation field of that name hides the module in its body)


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
    underutilized: list[_Candidate] | None = None
    """:meth:`Observer.underutilized`, once computed."""


class Observer:
    """Builds :class:`Observation` s; see the module docstring."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock, cluster_state: state.ClusterState,
                 cloud: cp_interface.CloudProvider | None, settings: settings_mod.Settings,
                 instance_types: InstanceTypes | None, orchestrator_: orchestrator.Orchestrator,
                 drift_marker: drift_marking.DriftMarker, recorder: events.EventRecorder,
                 metrics: metrics_mod.Metrics | None, changes_: changes.Changes) -> None:
        self.cluster = cluster
        self.clock = clock
        self.state = cluster_state
        self.cloud = cloud
        self.settings = settings
        self._instance_types = instance_types
        self.type_limits = volume_limits.TypeLimits()
        self.orchestrator = orchestrator_
        self.drift_marker = drift_marker
        self.recorder = recorder
        self.metrics = metrics
        self.last_pod_event: dict[str, float] = {}
        """Node name -> time of the last event of a non-daemon pod bound to it."""
        self._unconsolidatable: dict[str, str] = {}
        self._published: dict[tuple[str, ...], float] = {}
        """Dedupe key -> when published (Karpenter's recorder: one event per key per DEDUPE_TIMEOUT)."""
        self.table = node_rows.NodeRows(cluster_state, changes_.subscribe())
        """Every node's row, re-read only where something changed."""
        self._node_objs: dict[str, dict[str, Any]] = {}
        self._claim_objs: dict[str, dict[str, Any]] = {}
        self._excluded: set[str] = set()
        """Nodes the last pass left out (queued for disruption, or replacements)."""
        self._reported: set[str] = set()
        """Nodes an ``Unconsolidatable`` message was written for since the last pass's reports."""
        self.last: Observation | None = None
        """The latest observation (:attr:`table` holds what it was read from)."""
        self.scheduling_cache = reuse.SchedulingCache()
        """Kept across the passes' snapshots: a pass's what-if runs re-derive only the nodes that
        changed since the last pass (the plans are the same as with a fresh cache)."""
        self.milp_memo = milp.Memo()
        """The re-pack MILPs solved so far: a validation or a later pass asking the same is answered."""
        self._last_snapshot: snapshot_mod.ClusterSnapshot | None = None
        """The last snapshot built: its unchanged nodes are kept by the next (see ``ClusterSnapshot.build``)."""
        self.buffers: capacitybuffer.Buffers | None = None
        """CapacityBuffers: their virtual pods are pending pods of the snapshot, and the nodes the
        provisioner placed them on are not empty (Karpenter's HasBufferPods)."""

    def observe(self, now: float) -> Observation:
        """Read the cluster: candidates, why the others are not, emptiness times, drift.

        Only what changed since the last pass is read again (:mod:`karpy.disruption.node_rows`);
        the maps handed out are copies, so an observation stays as it was read."""
        pools: dict[str, nodepool.NodePool] = {}
        pool_objs: dict[str, dict[str, Any]] = {}
        for p in self.state.nodepools():
            raw = self.state.raw("NodePool", p.name)
            if raw is not None:
                pools[p.name], pool_objs[p.name] = p, raw
        obs = Observation(now=now, pools=pools, pool_objs=pool_objs, node_objs={}, claim_objs={}, nodes=[])
        obs.nominated = self.state.nominated(now)
        pdbs = self._pdbs()
        queued = self.orchestrator.candidate_nodes()
        protected = self.orchestrator.protected_claims()
        drifted_claims = self.drift_marker.mark(pools)
        table = self.table
        changed = table.refresh(pools, pdbs, now, self.last_pod_event)
        rows = table.rows
        for name in changed:
            row = rows.get(name)
            if row is None:  # gone: forget what was kept for it
                self.last_pod_event.pop(name, None)
                self._unconsolidatable.pop(name, None)
                self._node_objs.pop(name, None)
                self._claim_objs.pop(name, None)
                continue
            self._node_objs[name] = row.raw_node
            if row.raw_claim is not None:
                self._claim_objs[name] = row.raw_claim
            else:
                self._claim_objs.pop(name, None)
        obs.node_objs = dict(self._node_objs)
        obs.claim_objs = dict(self._claim_objs)
        obs.nodes = list(table.triples)
        obs.total = dict(table.total)
        obs.disrupting = dict(table.disrupting)
        for claim_name, reason in drifted_claims.items():
            for name in table.claim_nodes.get(claim_name, ()):
                obs.drifted[name] = reason
        excluded = {name for name in queued if name in rows}
        for claim_name in protected:
            excluded |= table.claim_nodes.get(claim_name, set())
        obs.candidates = dict(table.candidates)
        obs.why_not = dict(table.why_not)
        obs.since = dict(table.since)
        for name in excluded:
            obs.candidates.pop(name, None)
            obs.why_not.pop(name, None)
            obs.since.pop(name, None)
        # Unconsolidatable events, in node order, for every node whose message may differ from the
        # one last reported: re-read nodes, nodes leaving or joining the queue, nodes another
        # message was reported for since (the rest were reported already, or stand for none)
        recheck = changed | (excluded ^ self._excluded) | self._reported
        self._excluded = excluded
        for name in sorted(recheck):
            row = rows.get(name)
            if row is not None and row.report is not None and name not in excluded:
                self.report_unconsolidatable(name, obs, row.report)
        self._reported = set()
        for name in sorted(table.nodes_of(obs.nominated)):
            if name in obs.candidates:  # Karpenter's StateNode.ValidateNodeDisruptable
                del obs.candidates[name]
                del obs.since[name]
                obs.why_not[name] = NOMINATED
        self.last = obs
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
        """The candidates of NodePools consolidating underutilized nodes, past ``consolidateAfter``
        (in node order; read from the rows for the latest observation)."""
        self.require_latest(obs, "underutilized")
        if obs.underutilized is None:
            rows, now = self.table.rows, obs.now
            obs.underutilized = [
                c for name, c in obs.candidates.items()
                if (after := rows[name].under_after) is not None
                and ((since := obs.since.get(name)) is None or now - since >= after)]
        return list(obs.underutilized)

    def emptiable(self, obs: Observation) -> list[candidates.Candidate]:
        """The candidates of ``obs`` with nothing to move, of NodePools with emptiness, in node
        order (whether they have been empty long enough is :func:`emptiness.is_consolidatable`'s)."""
        self.require_latest(obs, "emptiable")
        held = self.buffers.buffer_nodes() if self.buffers is not None else set()
        return [obs.candidates[name] for name in sorted(self.table.empty)  # held by node or NodeClaim name
                if name in obs.candidates and name not in held and obs.candidates[name].nodeclaim.name not in held]

    def require_latest(self, obs: Observation, what: str) -> None:
        """``what`` reads the rows, which hold the latest observation only: refuse an older one."""
        if obs is not self.last:
            latest = None if self.last is None else self.last.now
            raise ValueError(f"{what}: the rows hold the latest observation (of {latest}), "
                             f"not the one of {obs.now} passed")

    def _set_eligible(self, obs: Observation) -> None:
        if self.metrics is None:
            return
        empty = sum(1 for c in self.emptiable(obs) if emptiness.is_consolidatable(c, obs.since.get(c.name), obs.now))
        gauge = self.metrics.disruption_eligible_nodes
        gauge.labels(reason="empty").set(empty)
        gauge.labels(reason="drifted").set(sum(1 for name in obs.drifted if name in obs.candidates))
        gauge.labels(reason="underutilized").set(len(self.underutilized(obs)))
        from karpy.disruption import budgets

        allowed, consuming = self.metrics.nodepool_allowed_disruptions, self.metrics.nodepool_nodes_consuming_budgets
        for name, pool in sorted(obs.pools.items()):
            for reason in (consolidation.REASON_EMPTY, consolidation.REASON_DRIFTED,
                           consolidation.REASON_UNDERUTILIZED):
                allowed.labels(nodepool=name, reason=reason.lower()).set(budgets.allowed_disruptions(
                    pool, reason, obs.total.get(name, 0), obs.disrupting.get(name, 0), obs.now))
                consuming.labels(nodepool=name, reason=reason.lower()).set(obs.disrupting.get(name, 0))

    # ------------------------------------------------------------------------------ snapshot

    def snapshot(self, obs: Observation) -> snapshot_mod.ClusterSnapshot:
        """The consolidation snapshot of ``obs`` (built once per loop)."""
        if obs.snapshot is not None:
            return obs.snapshot
        pools = [p for p in obs.pools.values() if p.metadata.deletion_timestamp is None]
        types = dict(self.instance_types(pools))
        node_names = {n.name for n, _, _ in obs.nodes}
        in_flight = [e for e in self.state.existing_nodes(types) if e.name not in node_names]
        rows = self._with_spot_shares(self._with_volume_topology(obs.nodes))
        rows, limited, in_flight = self._with_volume_limits(rows, types, in_flight)
        obs.snapshot = snapshot_mod.ClusterSnapshot.build(
            rows, pools, limited, pending_pods=[
                *self.state.pending_pods(), *(self.buffers.pods() if self.buffers is not None else ())],
            daemonsets=self.state.daemonset_pods(), usage=self.state.nodepool_usage(types),
            in_flight=in_flight, now=obs.now, billed=self._billed(obs.nodes),
            namespaces=self.state.namespaces.index(), scheduling_cache=self.scheduling_cache,
            milp_memo=self.milp_memo, marked=self.orchestrator.candidate_nodes(), previous=self._last_snapshot)
        self._last_snapshot = obs.snapshot
        if self.settings.preference_policy == policies.IGNORE:
            obs.snapshot = dataclasses.replace(obs.snapshot, ignore_preferences=True)
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

    def _with_spot_shares(self, nodes: list[NodeRow]) -> list[NodeRow]:
        """Pods of a workload with a spot share (``karpy.io/max-spot-percent``) that are not on spot stay
        off spot in the what-if runs, so consolidation never raises its spot count
        (:func:`karpy.provisioning.spot_share.keep_off_spot`)."""
        try:
            workloads = self.state.spot_workloads.read()
        except kube_errors.KubeError as exc:
            log.warning("disruption: cannot read workloads for spot shares: %s", exc)
            return nodes
        if not workloads:
            return nodes
        return [(n, claim, spot_share.keep_off_spot(pods, workloads,
                                                    n.labels.get(wk.CAPACITY_TYPE) == wk.CAPACITY_TYPE_SPOT))
                for n, claim, pods in nodes]

    def _with_volume_limits(self, nodes: list[NodeRow], types: Mapping[str, Sequence[instancetype.InstanceType]],
                            in_flight: list[results.ExistingNode]) -> tuple[
                                list[NodeRow], Mapping[str, Sequence[instancetype.InstanceType]],
                                list[results.ExistingNode]]:
        """CSI attach limits in the what-if runs (:mod:`karpy.provisioning.volume_limits`): the nodes'
        pods carry their attach counts, each node its limit, new NodeClaims only types that hold them."""
        if not volumetopology.needs_volumes(p for _, _, pods in nodes for p in pods):
            return nodes, types, in_flight
        try:
            vols = volumetopology.Volumes.of(self.cluster.list("PersistentVolumeClaim"),
                                             self.cluster.list("PersistentVolume"),
                                             self.cluster.list("StorageClass"))
            csinodes = volume_limits.csinode_limits(self.cluster.list("CSINode"))
        except kube_errors.KubeError as exc:
            log.warning("disruption: cannot read volumes: %s", exc)
            return nodes, types, in_flight
        drivers = volume_limits.drivers((p for _, _, pods in nodes for p in pods), vols)
        if not drivers:
            return nodes, types, in_flight
        every = [t for ts in types.values() for t in ts]
        limits = volume_limits.NodeLimits(drivers, csinodes, every)
        out: list[NodeRow] = []
        for n, claim, pods in nodes:
            allocatable = limits.allocatable(n.name, n.labels, n.allocatable)
            out.append((dataclasses.replace(n, allocatable=allocatable), claim,
                        volume_limits.with_requests(pods, vols)))
        return (out, self.type_limits.apply(types, drivers),
                volume_limits.with_node_limits(in_flight, drivers, vols, csinodes, every))

    def eventual(self, obs: Observation, name: str) -> candidates.Candidate | None:
        """Node ``name`` as a drift candidate although its pods block voluntary disruption: its
        NodeClaim has a ``terminationGracePeriod``, which bounds the drain (Karpenter's eventual
        disruption class); None when it is not one for any other reason."""
        row = self.table.rows.get(name)
        if row is None or row.claim is None or row.claim.spec.termination_grace_period is None:
            return None
        if obs.why_not.get(name) == NOMINATED or name in obs.nominated:
            return None
        pool = obs.pools.get(row.pool_name)
        c = candidates.candidate(row.node, row.claim, pool, row.pods, (), obs.now, eventual=True)
        return c if isinstance(c, candidates.Candidate) else None

    def held_pods(self, c: candidates.Candidate, now: float) -> frozenset[str]:
        """The pods of an eventual candidate no eviction moves now: no capacity is planned for them."""
        pdbs = self._pdbs()  # with the disruptions each allows now (read only for such candidates)
        return frozenset(p.key for p in c.pods if not p.is_terminal and (
            p.protected(now) or candidates.blocking_pdb(p, pdbs) is not None))

    def _pdbs(self) -> list[candidates.Pdb]:
        """The PodDisruptionBudgets as kube-controller-manager keeps their ``status`` (Karpenter's
        ``pdb.NewLimits``: ``status.disruptionsAllowed``, 0 while the controller has not written it):
        no pod is counted and no owner looked up here."""
        out: list[candidates.Pdb] = []
        for obj in self.state.raws("PodDisruptionBudget"):
            spec = obj.get("spec") or {}
            if spec.get("selector") is None:  # policy/v1: no selector selects no pod, so it blocks nothing
                continue
            try:
                selector = selectors.LabelSelector.parse(
                    fields_mod.Fields(spec.get("selector") or {}, "PodDisruptionBudget", "spec.selector"))
            except api_errors.ValidationError as exc:
                log.warning("disruption: ignoring PodDisruptionBudget %s/%s: %s",
                            interface.namespace_of(obj), interface.name_of(obj), exc)
                continue
            allowed = (obj.get("status") or {}).get("disruptionsAllowed")
            out.append(candidates.Pdb(
                interface.namespace_of(obj) or "default", interface.name_of(obj), selector,
                allowed if isinstance(allowed, int) and not isinstance(allowed, bool) else 0,
                spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow"))
        return out

    # -------------------------------------------------------------------------------- events

    def blocked(self, obs: Observation, pool_names: Iterable[str]) -> None:
        """``DisruptionBlocked`` on each NodePool named."""
        for pool_name in sorted(set(pool_names)):
            raw = obs.pool_objs.get(pool_name)
            if raw is not None:
                self.recorder.normal(raw, "DisruptionBlocked", BUDGET_BLOCKED)

    def consolidation_approved(self, obs: Observation, outcome: balanced.Outcome) -> None:
        """Karpenter's ``ConsolidationApproved``: on the Node and NodeClaim of a single-node move, on the
        NodePool of a multi-node one (deduplicated per object, whatever the message, as Karpenter's);
        nothing when ``outcome`` publishes no event."""
        message = outcome.event
        if message is None:
            return
        if outcome.node is not None:
            self.on_node(obs, outcome.node, balanced.EVENT_APPROVED, message, ())
            return
        raw = obs.pool_objs.get(outcome.nodepool)
        if raw is not None and self._fresh((balanced.EVENT_APPROVED, "NodePool", outcome.nodepool), obs.now):
            self.recorder.normal(raw, balanced.EVENT_APPROVED, message)

    def on_node(self, obs: Observation, node_name: str, reason: str, message: str, dedupe: Sequence[str]) -> None:
        """A Normal event on the node and on its NodeClaim (each when known), unless one with the same
        reason and ``dedupe`` values was published for the node within :data:`DEDUPE_TIMEOUT`."""
        if not self._fresh((reason, "Node", node_name, *dedupe), obs.now):
            return
        for raw in (obs.node_objs.get(node_name), obs.claim_objs.get(node_name)):
            if raw is not None:
                self.recorder.normal(raw, reason, message)

    def _fresh(self, key: tuple[str, ...], now: float) -> bool:
        last = self._published.get(key)
        if last is not None and now - last < DEDUPE_TIMEOUT:
            return False
        self._published[key] = now
        if len(self._published) > DEDUPE_SIZE:
            self._published = {k: t for k, t in self._published.items() if now - t < DEDUPE_TIMEOUT}
        return True

    def report_unconsolidatable(self, node_name: str, obs: Observation, why: str) -> None:
        """``Unconsolidatable`` on the node and its NodeClaim, once per node and message."""
        if self._unconsolidatable.get(node_name) == why:
            return
        node_obj = obs.node_objs.get(node_name)
        claim_obj = obs.claim_objs.get(node_name)
        if node_obj is None or claim_obj is None:
            return
        self._unconsolidatable[node_name] = why
        self._reported.add(node_name)
        self.recorder.normal(node_obj, "Unconsolidatable", why)
        self.recorder.normal(claim_obj, "Unconsolidatable", why)
