"""The ``disruption`` controller: Karpenter v1's disruption loop on karpy's controller runtime.

Every :data:`INTERVAL` seconds (key :data:`KEY`) it reads the cluster through a
:class:`karpy.controllers.state.ClusterState` (:mod:`karpy.disruption.observation`: candidates,
drift, emptiness times; nodes the provisioner nominated for pending pods are not candidates) and:

1. **Expiration** (forceful, always first, separate from the methods below): a NodeClaim older
   than its ``spec.expireAfter`` is deleted whatever budgets, do-not-disrupt annotations or PDBs
   say (the termination controller drains it; the workloads' pods get a new node from the
   provisioner). Counted in ``karpenter_nodeclaims_disrupted_total{reason="expired"}``.
2. **Drift marking**: every launched NodeClaim of a NodePool gets (or loses) the ``Drifted``
   condition (reason ``NodePoolDrifted``, ``RequirementsDrifted`` or the cloud's, see
   :mod:`karpy.disruption.drift`); a claim stamped with another hash version (Karpenter's, when
   karpy takes over a cluster) is silently re-stamped with the NodePool's and NodeClass's current
   hashes and karpy's hash versions. EC2NodeClass / AKSNodeClass changes are watched, so NodeClass
   drift is seen at the next pass, not at the periodic re-check.
3. **One method per loop**, the first that yields a command wins:

   a. *Emptiness*: candidates (:mod:`karpy.disruption.candidates`) of NodePools with a
      consolidation policy that have been empty for ``consolidateAfter`` are deleted at once,
      within the ``Empty`` budgets ("Disrupting Node: Empty/Delete"; "Consolidation/Delete" for a
      ``WhenEmptyOrUnderutilized`` NodePool, as AKS NAP users see it);
   b. *Drift* (:mod:`karpy.disruption.drift_method`): drifted candidates of static NodePools
      (``spec.replicas``) first, replaced one for one; then the other drifted candidates within the
      ``Drifted`` budgets - the empty ones deleted together, else the first whose pods can be placed
      ("Drift/Delete", "Drift/Replace"); executed at once, like Karpenter's drift. A NodePool with
      karpy's ``karpy.io/drift-max-surge`` / ``karpy.io/drift-wave-settle`` annotations drifts in
      waves instead (:mod:`karpy.disruption.waves`);
   c. *Consolidation* (``Underutilized``; NodePools with ``WhenEmptyOrUnderutilized`` or ``Balanced``,
      whose moves must pass :mod:`karpy.disruption.balanced`'s score, and only
      candidates past ``consolidateAfter`` since their last pod event): multi-node, then
      single-node, then karpy's many-to-many re-pack (:mod:`karpy.disruption.consolidation`).
      The command is **validated** ``settings.consolidation_validation_delay`` (15 s) later: the
      candidates must still be candidates (and still past ``consolidateAfter``), the budgets must
      still allow them, and a fresh simulation must still give a command as good (a deletion
      stays a deletion; a replacement costs no more and needs no more nodes); else it is dropped
      (logged, kept in :attr:`DisruptionController.dropped`). While a command waits for
      validation, no other method starts; while commands wait for their replacements, only drift
      starts more (as Karpenter's loop, which does not wait for its orchestration queue): the nodes
      of those commands count against the budgets and their pods need a place in every what-if run
      (:attr:`karpy.disruption.snapshot.ClusterSnapshot.marked`), and after a drift command the next
      pass comes :data:`AFTER_DRIFT` seconds later, not :data:`INTERVAL` (Karpenter requeues at once).

While cluster state is not synced (:meth:`karpy.controllers.state.ClusterState.synced`: a NodeClaim
has no provider ID yet, it is still being launched), a pass only does expiration and looks again
:data:`UNSYNCED_RETRY` seconds later, as Karpenter's loop waits for ``Cluster.Synced``: no drift
marking, no candidates, no method (a queued consolidation command is validated once synced).

Commands are carried out by :class:`karpy.disruption.orchestrator.Orchestrator` (taint, pre-spin
replacements, wait until they are initialized, delete the candidates; key :data:`QUEUE_KEY`).
Nodes karpy does not own are never candidates. When consolidation finds nothing, it is not tried
again until the cluster changes (or :data:`RECHECK` seconds pass); ``Unconsolidatable`` events
on the Node and NodeClaim say why (deduplicated per node and message), ``DisruptionBlocked`` on a
NodePool whose budget holds nodes back. Gauges
``karpenter_voluntary_disruption_eligible_nodes{reason}`` are set every loop.

Use :func:`new` to build and :func:`register` to start it on a Manager
(:func:`karpy.operator.register_all` does both).
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from karpy import clock as clock_mod
from karpy import settings as settings_mod
from karpy.api import nodeclass, pod
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import nodeclaim_manifest, runtime, state
from karpy.disruption import (
    balanced,
    budgets,
    candidates,
    changes,
    claim_tracker,
    consolidation,
    consolidation_events,
    drift_marking,
    drift_method,
    emptiness,
    observation,
    orchestrator,
    validation,
    wave_config,
    waves,
)
from karpy.disruption import snapshot as snapshot_mod
from karpy.kube import errors as kube_errors
from karpy.kube import events, interface
from karpy.observability import metrics as metrics_mod

NODECLASS_KINDS = (nodeclass.EC2_KIND, nodeclass.AKS_KIND)
"""NodeClass kinds whose changes start a disruption pass (NodeClass drift), unless the controller is
given its cloud's own (``nodeclass_kinds``)."""
DRIFT_RECHECK = drift_marking.DRIFT_RECHECK
"""Seconds after which a claim's drift is computed again even if nothing karpy watches changed."""
log = logging.getLogger("karpy.disruption")

NAME = "disruption"
KEY = "disruption"
QUEUE_KEY = "queue"
INTERVAL = 10.0
RECHECK = 300.0
"""Seconds after which consolidation is tried again even though nothing changed."""
UNSYNCED_RETRY = 1.0
"""Seconds after which a pass skipped for an unsynced cluster state (a NodeClaim still launching) is
tried again (Karpenter's disruption controller requeues after a second)."""
AFTER_DRIFT = 1.0
"""Seconds to the next pass after a drift command started: the next drifted node, within the budget,
is replaced alongside (Karpenter's loop requeues at once after a command)."""
DISRUPTED_TAINT = orchestrator.DISRUPTED_TAINT
BUDGET_BLOCKED = observation.BUDGET_BLOCKED
NOMINATED = observation.NOMINATED

InstanceTypes = observation.InstanceTypes
Observation = observation.Observation


Pending = validation.Pending
"""A consolidation command waiting for its validation (:class:`karpy.disruption.validation.Pending`)."""


class DisruptionController:
    """See the module docstring."""

    def __init__(
        self,
        cluster: interface.Cluster,
        clock: clock_mod.Clock,
        recorder: events.EventRecorder | None = None,
        metrics: metrics_mod.Metrics | None = None,
        *,
        cluster_state: state.ClusterState | None = None,
        cloud: cp_interface.CloudProvider | None = None,
        settings: settings_mod.Settings | None = None,
        instance_types: InstanceTypes | None = None,
        nodeclass_hash: orchestrator.NodeClassHash | None = None,
        nodeclass_kinds: Sequence[str] = (),
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.nodeclass_kinds = tuple(nodeclass_kinds) or NODECLASS_KINDS
        """The NodeClass kinds watched for drift: pass only the cloud's own kind in a real cluster
        (an informer of a kind whose CRD is not installed never syncs)."""
        self.recorder = recorder if recorder is not None else events.EventRecorder(cluster, clock)
        self.metrics = metrics
        self.state = cluster_state if cluster_state is not None else state.ClusterState(cluster).start()
        self.cloud = cloud
        self.settings = settings if settings is not None else settings_mod.Settings()
        self.orchestrator = orchestrator.Orchestrator(
            cluster, clock, self.recorder, metrics,
            nodeclass_hash if nodeclass_hash is not None
            else functools.partial(nodeclaim_manifest.nodeclass_hash, cluster))
        self.changes = changes.Changes(cluster, self.state)
        """Which Nodes and NodeClaims changed since each reader last looked (so a pass costs what changed)."""
        self.drift_marker = drift_marking.DriftMarker(
            cluster, clock, self.state, cloud, self.nodeclass_kinds, self.orchestrator.nodeclass_hash, self.changes)
        self.claims = claim_tracker.ClaimTracker(self.state, self.changes.subscribe(nodes=False))
        """NodeClaims' expiration times and which are launching."""
        self.observer = observation.Observer(cluster, clock, self.state, cloud, self.settings, instance_types,
                                             self.orchestrator, self.drift_marker, self.recorder, metrics,
                                             self.changes)
        self.waves = waves.Waves(self.state, self.recorder)
        """Drift waves of the NodePools that ask for them (karpy's ``karpy.io/drift-*`` annotations)."""
        self.drift = drift_method.DriftMethod(self.state, self.observer, self.settings, self.waves, self._start)
        self.manager: runtime.Manager | None = None
        self.pending: Pending | None = None
        self.dropped: list[tuple[float, consolidation.Command, str]] = []
        """Commands dropped at validation: (time, command, why)."""
        self._revision = 0
        self._consolidated: tuple[Any, ...] | None = None
        self._consolidated_at = 0.0
        self._quiet_revision = -1
        self._pod_seen: dict[str, tuple[Any, ...]] = {}
        self._pool_generations: dict[str, Any] = {}
        self._quiet_until = 0.0

    # ------------------------------------------------------------------------------ runtime glue

    def controller(self) -> runtime.Controller:
        # NodeClasses are watched too: a NodeClass change is a (cloud) drift change, seen at the next
        # pass rather than at the periodic DRIFT_RECHECK
        return runtime.Controller(name=NAME, reconcile=self.reconcile, watches=[
            ("Pod", runtime.only(self.on_pod)), ("Node", self._bump), ("NodeClaim", self._bump),
            ("NodePool", self._on_nodepool),
            # a budget's status (kube-controller-manager's disruptionsAllowed) can unblock a node: a change
            ("PodDisruptionBudget", self._bump),
            *((kind, self._bump) for kind in self.nodeclass_kinds)])

    def mark_unconsolidated(self) -> None:
        """Something consolidation depends on changed outside the watched objects (NodeOverlays: prices and
        capacity; CapacityBuffers' virtual pods): the next pass looks again, as Karpenter's
        ``MarkUnconsolidated``."""
        self._revision += 1

    def _bump(self, _event: str, _obj: dict[str, Any]) -> Iterable[str]:
        self._revision += 1
        return ()

    def _on_nodepool(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        """A NodePool's spec change (a new generation), a change of its drift wave annotations (no new
        generation), creation or deletion is a change; a status write (its counts, its conditions) is not."""
        name = interface.name_of(obj)
        generation = ((obj.get("metadata") or {}).get("generation"), wave_config.annotations_of(obj))
        if event == "DELETED":
            self._pool_generations.pop(name, None)
        elif event != "ADDED" and generation[0] is not None and self._pool_generations.get(name) == generation:
            return ()
        else:
            self._pool_generations[name] = generation
        return self._bump(event, obj)

    def on_pod(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        """Record the pod event time on its node; enqueues nothing (the loop polls).

        Only changes that can change a decision count as cluster changes: a pod appearing,
        going, or changing node or phase (not, say, a scheduler's status message)."""
        md = obj.get("metadata") or {}
        key = f"{md.get('namespace', '')}/{md.get('name', '')}"
        node_name = (obj.get("spec") or {}).get("nodeName")
        seen = (node_name, (obj.get("status") or {}).get("phase"), bool(md.get("deletionTimestamp")))
        if event == "DELETED":
            self._pod_seen.pop(key, None)
        elif self._pod_seen.get(key) != seen:
            self._pod_seen[key] = seen
        else:
            return ()  # nothing that matters to disruption changed
        self._revision += 1
        if not node_name:
            return ()
        ref = interface.owner(obj)
        if ref is not None and ref.get("kind") in ("DaemonSet", "Node"):
            return ()
        if pod.MIRROR_POD_ANNOTATION in interface.annotations_of(obj):
            return ()
        self.observer.last_pod_event[str(node_name)] = self.clock.now()
        return ()

    def reconcile(self, key: str) -> float | None:
        if key == QUEUE_KEY:
            return self.orchestrator.reconcile()
        now = self.clock.now()
        if (self._revision == self._quiet_revision and now < self._quiet_until and self.pending is None
                and not self.orchestrator.busy()):
            return INTERVAL  # nothing changed and no deadline passed: the last pass still holds
        revision = self._revision
        self.expire(now)
        if not self.state.synced():
            # Karpenter's disruption loop decides nothing until cluster state is synced (no NodeClaim
            # still being launched): candidates and simulations would miss that capacity
            if self.manager is None and self.orchestrator.busy():
                self.orchestrator.reconcile()
            return UNSYNCED_RETRY
        obs = self.observe(now)
        if self.manager is None and self.orchestrator.busy():
            self.orchestrator.reconcile()
        if self.pending is not None:
            if now + 1e-9 < self.pending.validate_at:
                return min(INTERVAL, self.pending.validate_at - now)
            pending, self.pending = self.pending, None
            self._validate_and_execute(pending, obs)
            return INTERVAL
        if self.orchestrator.waiting():
            return AFTER_DRIFT if self.disrupt_drifted(obs) else INTERVAL
        if self.disrupt_empty(obs):
            return INTERVAL
        if self.disrupt_drifted(obs):
            return AFTER_DRIFT
        self.consolidate(obs)
        if self.pending is not None:
            return min(INTERVAL, max(0.0, self.pending.validate_at - now))
        if not self.orchestrator.busy():
            self._quiet_revision = revision
            self._quiet_until = self._next_deadline(obs, now)
        return INTERVAL

    def _next_deadline(self, obs: Observation, now: float) -> float:
        """The next time a pass could decide differently with no change in the cluster: an
        expiration, a candidate's consolidateAfter running out, a scheduled budget window, or the
        periodic drift re-check (the cloud's images change without the cluster changing).
        Consolidation needs no retry of its own: with nothing changed it would decide the same."""
        deadline = now + DRIFT_RECHECK
        expiry = self.claims.next_expiry(now)
        if expiry is not None:
            deadline = min(deadline, expiry)
        for name, cand in obs.candidates.items():
            since = obs.since.get(name)
            after = cand.nodepool.disruption.consolidate_after
            if since is not None and after is not None and since + after > now:
                deadline = min(deadline, since + after)
        if any(b.schedule for p in obs.pools.values() for b in p.disruption.budgets):
            deadline = min(deadline, now + 60.0)
        settled = self.waves.next_deadline(obs.pools, now)  # a drift wave's settle time running out
        if settled is not None:
            deadline = min(deadline, settled)
        table = self.observer.table
        for name in table.timed:  # a do-not-disrupt duration running out makes a node a candidate
            row = table.rows.get(name)
            end = candidates.protection_ends(row.pods, now) if row is not None else None
            if end is not None:
                deadline = min(deadline, end)
        return deadline

    # ---------------------------------------------------------------------------------- expiration

    def expire(self, now: float) -> list[str]:
        """Delete every NodeClaim past its ``expireAfter``; returns their names."""
        expired: list[str] = []
        for claim in self.claims.expired(now):
            try:
                self.cluster.delete("NodeClaim", claim.name)
            except kube_errors.NotFound:
                continue
            log.info("deleting expired nodeclaim %s", claim.name)
            expired.append(claim.name)
            if self.metrics is not None:
                self.metrics.nodeclaims_disrupted.labels(
                    reason="expired", nodepool=claim.nodepool_name or "",
                    capacity_type=claim.labels.get("karpenter.sh/capacity-type", "")).inc()
        return expired

    # --------------------------------------------------------------------------------- observing

    def observe(self, now: float) -> Observation:
        """Read the cluster (see :class:`karpy.disruption.observation.Observer`)."""
        return self.observer.observe(now)

    def snapshot(self, obs: Observation) -> snapshot_mod.ClusterSnapshot:
        """The consolidation snapshot of ``obs`` (built once per loop)."""
        return self.observer.snapshot(obs)

    def unsettled(self, obs: Observation) -> str | None:
        """Why consolidation should wait, else None (see :func:`karpy.disruption.validation.unsettled`)."""
        self.observer.require_latest(obs, "unsettled")
        return validation.unsettled(obs, self.state, self.orchestrator, self.claims, self.observer.table)

    # -------------------------------------------------------------------------------------- drift

    def disrupt_drifted(self, obs: Observation) -> bool:
        """Start a drift command (or wave) if a drifted candidate can go (see
        :class:`karpy.disruption.drift_method.DriftMethod`); True when one started."""
        return self.drift.disrupt(obs)

    # ---------------------------------------------------------------------------------- emptiness

    def disrupt_empty(self, obs: Observation) -> bool:
        """Delete the empty candidates the budgets allow; True when any was."""
        eligible = [(c, obs.since.get(c.name)) for c in self.observer.emptiable(obs)
                    if emptiness.is_consolidatable(c, obs.since.get(c.name), obs.now)]
        if not eligible:
            return False
        allowed = {
            name: budgets.allowed_disruptions(pool, emptiness.REASON, obs.total.get(name, 0),
                                              obs.disrupting.get(name, 0), obs.now)
            for name, pool in obs.pools.items()
        }
        chosen, blocked = emptiness.select(eligible, allowed)
        self.observer.blocked(obs, {c.nodepool.name for c in blocked})
        if not chosen:
            return False
        cmd = consolidation.Command(consolidation.REASON_EMPTY, consolidation.DELETE, chosen, [], 0.0,
                                    f"Delete empty nodes {', '.join(c.name for c in chosen)}")
        return self._execute(cmd, "empty")

    # ------------------------------------------------------------------------------ consolidation

    def consolidate(self, obs: Observation) -> consolidation.Command | None:
        """Compute a consolidation command and queue it for validation (see :attr:`pending`)."""
        cands = self.observer.underutilized(obs)
        if not cands or self.unsettled(obs) is not None:
            return None
        snap = self.snapshot(obs)
        allowed = snap.allowed_disruptions(consolidation.REASON_UNDERUTILIZED)
        memo = (self._revision, tuple(sorted(c.name for c in cands)), tuple(sorted(allowed.items())))
        if memo == self._consolidated and obs.now - self._consolidated_at < RECHECK:
            return None
        reasons: dict[str, str] = {}
        kind = "multi"
        started = clock_mod.perf_counter()
        balanced.recorded(snap).clear()
        cmd = consolidation.multi_node(snap, cands, self.settings, allowed=allowed)
        started = self._evaluated(kind, started)
        self._report_moves(snap, obs, cmd, single=False)
        if cmd is None:
            kind = "single"
            cmd = consolidation.single_node(snap, cands, self.settings, allowed=allowed, reasons=reasons)
            started = self._evaluated(kind, started)
            self._report_moves(snap, obs, cmd, single=True)
        if reasons.pop(consolidation.TIMED_OUT, None) is not None and self.metrics is not None:
            self.metrics.disruption_consolidation_timeouts.labels("single").inc()
        if cmd is None:
            kind = "many"
            cmd = consolidation.many_to_many(snap, cands, self.settings, allowed=allowed)
            self._evaluated(kind, started)
            self._report_moves(snap, obs, cmd, single=False)
        if cmd is None:
            self._consolidated, self._consolidated_at = memo, obs.now
            for name, why in sorted(reasons.items()):
                if why == BUDGET_BLOCKED:
                    continue
                self.observer.report_unconsolidatable(name, obs, why)
            if any(why == BUDGET_BLOCKED for why in reasons.values()):
                self.observer.blocked(obs, {c.nodepool.name for c in cands if reasons.get(c.name) == BUDGET_BLOCKED})
            return None
        self.pending = Pending(cmd, kind, obs.now + self.settings.consolidation_validation_delay)
        log.info("disruption: %s consolidation proposes: %s; validating in %.0fs", kind, cmd.explanation,
                 self.settings.consolidation_validation_delay)
        return cmd

    def _report_moves(self, snap: snapshot_mod.ClusterSnapshot, obs: Observation,
                      cmd: consolidation.Command | None, *, single: bool) -> None:
        """``ConsolidationCandidate`` events of the moves one method computed; their
        ``karpenter_consolidation_moves_total``, ``karpenter_consolidation_score`` and
        ``ConsolidationApproved`` events (:func:`balanced.outcomes`)."""
        records = balanced.recorded(snap)
        consolidation_events.publish_candidates(self.observer, obs, records)
        found = balanced.outcomes(records, None if cmd is None else cmd.names, single=single)
        records.clear()
        for o in found:
            if self.metrics is not None:
                self.metrics.consolidation_moves.labels(o.decision, o.nodepool, o.policy).inc()
                if o.score is not None:
                    self.metrics.consolidation_score.labels(o.score_decision, o.nodepool,
                                                            o.policy).observe(o.score.score)
            self.observer.consolidation_approved(obs, o)

    def _evaluated(self, kind: str, started: float) -> float:
        """``karpenter_voluntary_disruption_decision_evaluation_duration_seconds`` of one method (real
        seconds); returns now, the next method's start."""
        now = clock_mod.perf_counter()
        if self.metrics is not None:
            self.metrics.disruption_evaluation_duration.labels(
                reason="underutilized", consolidation_type=kind).observe(max(0.0, now - started))
        return now

    def _validate_and_execute(self, pending: Pending, obs: Observation) -> None:
        fresh = self.validate(pending, obs)
        if isinstance(fresh, str):
            if self.metrics is not None:
                self.metrics.disruption_failed_validations.labels(pending.consolidation_type).inc()
            self.dropped.append((obs.now, pending.command, fresh))
            consolidation_events.publish_rejected(self.observer, obs, pending.command,
                                                  getattr(fresh, "kind", validation.CHURN))
            log.info("disruption: dropping %s command for %s after validation: %s", pending.command.reason,
                     ", ".join(pending.command.names), fresh)
            return
        self._execute(fresh, pending.consolidation_type)

    def validate(self, pending: Pending, obs: Observation) -> consolidation.Command | str:
        """The command to execute now, or why ``pending`` no longer holds (see
        :func:`karpy.disruption.validation.validate`)."""
        return validation.validate(pending, obs, unsettled=self.unsettled(obs), observer=self.observer,
                                   snapshot=self.snapshot, settings=self.settings)

    def _execute(self, cmd: consolidation.Command, consolidation_type: str) -> bool:
        return self._start(cmd, consolidation_type) is not None

    def _start(self, cmd: consolidation.Command, consolidation_type: str) -> orchestrator.Entry | None:
        entry = self.orchestrator.execute(cmd, consolidation_type)
        if entry is not None and self.manager is not None:
            self.manager.enqueue(NAME, QUEUE_KEY, orchestrator.POLL)
        return entry


def new(
    cluster: interface.Cluster,
    clock: clock_mod.Clock,
    recorder: events.EventRecorder | None = None,
    metrics: metrics_mod.Metrics | None = None,
    **options: Any,
) -> DisruptionController:
    """A :class:`DisruptionController`; ``options`` are its keyword-only arguments."""
    return DisruptionController(cluster, clock, recorder, metrics, **options)


_REGISTERED: weakref.WeakKeyDictionary[runtime.Manager, weakref.ref[DisruptionController]] = \
    weakref.WeakKeyDictionary()
"""Manager -> its disruption controller, weakly both ways: the controller refers to its manager, so
a strong value would keep the key, and with it a whole simulation, alive for the process's life."""


def registered(manager: runtime.Manager) -> DisruptionController | None:
    """The disruption controller :func:`register` put on ``manager`` (e.g. by ``register_all``)."""
    ref = _REGISTERED.get(manager)
    return ref() if ref is not None else None


def register(manager: runtime.Manager, disruption: DisruptionController) -> None:
    """Register the controller on ``manager`` and queue its first run now."""
    disruption.manager = manager
    _REGISTERED[manager] = weakref.ref(disruption)  # the manager holds it (its controller's methods)
    manager.register(disruption.controller())
    manager.enqueue(NAME, KEY)
