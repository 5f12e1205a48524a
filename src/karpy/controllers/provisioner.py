"""The provisioner: batches pending pods, runs the scheduling core, creates NodeClaims.

Like Karpenter's provisioner it does not bind pods (the kube-scheduler does); it decides which
capacity the pending pods need and asks for it. What a caller may rely on:

* **Batching.** Every watch event of a provisionable pod (see
  :func:`karpy.controllers.state.is_provisionable`) opens or extends a batch. The batch is
  scheduled once no new pending pod arrived for ``settings.batch_idle_duration`` or
  ``settings.batch_max_duration`` passed since the batch opened, whichever comes first
  (Karpenter's batcher: a pod extends a window once; its later updates in that window, such as
  the kube-scheduler marking it again, do not). NodeClaim deletions, Node deletions and NodePool
  changes also open a batch, so pods of a NodeClaim that failed to launch are planned again.
* **Scheduling.** One run takes the pending pods, the NodePools (not being deleted; a static NodePool,
  ``spec.replicas`` set, launches nothing for pods, as Karpenter's provisioner skips it), each pool's
  instance types from the cloud with the unavailable offerings of
  :class:`karpy.controllers.offerings.UnavailableOfferings` switched off, existing nodes and
  in-flight NodeClaims (counted as capacity, so pods already nominated to one do not get a
  second NodeClaim), DaemonSets and NodePool usage, and calls
  :class:`karpy.provisioning.scheduler.Scheduler`. Every existing node or in-flight NodeClaim a
  pod is planned onto is nominated in ``ClusterState.nominations`` for
  :func:`karpy.controllers.nominations.window` seconds (Karpenter's ``NominateNodeForPod``).
  Its duration (real seconds) goes to
  ``karpenter_scheduler_scheduling_duration_seconds{controller="provisioner"}``.
* **Volumes.** Pods that mount PersistentVolumeClaims get their volumes' topology
  (:mod:`karpy.scheduling.volumetopology`: a bound PV's node affinity, a WaitForFirstConsumer
  StorageClass's allowedTopologies) as required node affinity; a pod whose claims cannot be used
  gets ``FailedScheduling`` with Karpenter's reason.
* **NodeClaims.** Each new claim becomes a ``karpenter.sh/v1`` NodeClaim (see
  :func:`karpy.controllers.nodeclaim_manifest.nodeclaim_manifest`), counted in
  ``karpenter_nodeclaims_created_total{reason="provisioning"}``.
* **Events.** ``Nominated`` (Normal) on each placed pod, ``Pod should schedule on:
  nodeclaim/<name>`` (``, node/<name>`` once the claim has a node; ``node/<name>`` alone for a
  node karpy does not manage); ``FailedScheduling`` (Warning) ``Failed to schedule pod,
  <explanation>`` on each pod the core could not place. While such pods remain, or when a NodeClaim
  could not be created, the provisioner looks again every :data:`RETRY_UNSCHEDULABLE` seconds
  (offerings come back, limits change, the API server answers again).
  As Karpenter's recorder, a pod gets one FailedScheduling per 5 minutes, and Nominated events
  go through a token bucket (5 per second, burst 10; Karpenter's PodNominationRateLimiter).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from karpy import clock as clock_mod
from karpy import settings as settings_mod
from karpy.api import labels as wk
from karpy.api import nodepool as nodepool_mod
from karpy.api import pod as pod_mod
from karpy.api import quantity
from karpy.cloudprovider import instancetype
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import capacitybuffer, nodeclass_status, nominations, runtime, state, state_metrics
from karpy.controllers import nodeclaim_manifest as claim_manifest
from karpy.controllers import offerings as offerings_mod
from karpy.kube import errors as kube_errors
from karpy.kube import events, interface
from karpy.observability import logs
from karpy.observability import metrics as metrics_mod
from karpy.provisioning import dra, policies, results, reuse, scheduler, spot_share, volume_limits
from karpy.scheduling import volumetopology

log = logging.getLogger("karpy.controllers.provisioner")

NAME = "provisioner"
BATCH_KEY = "batch"
RETRY_UNSCHEDULABLE = 60.0
CREATED_REASON = "provisioning"

REASON_NOMINATED = "Nominated"
REASON_FAILED_SCHEDULING = "FailedScheduling"
REASON_INVALID_SPOT_SHARE = "InvalidSpotShare"

DEDUPE_SECONDS = {REASON_FAILED_SCHEDULING: 300.0, REASON_INVALID_SPOT_SHARE: 300.0}
"""As Karpenter's events: one FailedScheduling per pod per 5 minutes (dedupe values: the pod's uid)."""
NOMINATION_QPS = 5.0
NOMINATION_BURST = 10
"""Karpenter's PodNominationRateLimiter: a token bucket over every Nominated event."""


class Provisioner:
    """See the module docstring. Register :meth:`controller` with a Manager."""

    def __init__(self, cluster: interface.Cluster, cluster_state: state.ClusterState,
                 cloud: cp_interface.CloudProvider, clock: clock_mod.Clock,
                 settings: settings_mod.Settings, recorder: events.EventRecorder,
                 metrics: metrics_mod.Metrics, offerings: offerings_mod.UnavailableOfferings) -> None:
        self.cluster = cluster
        self.state = cluster_state
        self.cloud = cloud
        self.clock = clock
        self.settings = settings
        self.recorder = recorder
        self.metrics = metrics
        self.offerings = offerings
        self._batch_start: float | None = None
        self._last_trigger: float | None = None
        self._batch_uids: set[str] = set()
        self._create_failed = False
        """A NodeClaim create failed in the current run (its pods need another look)."""
        self._deduped: dict[tuple[str, str], float] = {}
        self._tokens = float(NOMINATION_BURST)
        self._tokens_at: float | None = None
        self.runs = 0
        self.scheduling_cache = reuse.SchedulingCache()
        """Kept between scheduling runs (existing nodes, type tables): see karpy.provisioning.reuse."""
        self.type_limits = volume_limits.TypeLimits()
        self.last_results: results.Results | None = None
        self._last_types: dict[str, list[instancetype.InstanceType]] = {}
        self.relaxed_claims: set[int] = set()
        """The new NodeClaims of the last run made with minValues relaxed (MIN_VALUES_POLICY=BestEffort)."""
        self._pools_seen: dict[str, tuple[Any, ...]] = {}
        self.skipped_pools: dict[str, nodeclass_status.Readiness] = {}
        """NodePools left out of the last scheduling run because their NodeClass is not Ready."""
        self.buffers: capacitybuffer.Buffers | None = None
        """CapacityBuffers (gate ``CapacityBuffer``): their virtual pods join every run."""

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [
            ("Pod", self._map_pod),
            ("NodeClaim", self._map_nodeclaim),
            ("Node", self._map_node),
            ("NodePool", self._map_nodepool),
        ])

    # ------------------------------------------------------------------------------ batching

    def trigger(self, uid: str = "") -> None:
        """Open a batch, or extend the open one (a new pending pod arrived now). As Karpenter's
        batcher, an object (by ``uid``) extends a batch window once: its later events in the same
        window do not."""
        if self._batch_start is None:
            self._batch_uids.clear()  # a new window: every object counts again
        if uid:
            if uid in self._batch_uids:
                return
            self._batch_uids.add(uid)
        now = self.clock.now()
        if self._batch_start is None:
            self._batch_start = now
        self._last_trigger = now

    def _map_pod(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        if event != interface.DELETED and state.is_provisionable(obj):
            self.trigger(interface.uid_of(obj) or state.object_key(obj))
            return (BATCH_KEY,)
        return ()

    def _map_nodeclaim(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        if event == interface.DELETED or interface.is_terminating(obj):
            self.trigger()
            return (BATCH_KEY,)
        return ()

    def _map_node(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        if event == interface.DELETED:
            self.trigger()
            return (BATCH_KEY,)
        return ()

    def _map_nodepool(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        # a spec change (new generation) or a readiness change can change a plan; the counts the
        # nodepool.counter controller writes into status cannot, nor NodeRegistrationHealthy
        name = interface.name_of(obj)
        seen = ((obj.get("metadata") or {}).get("generation"),
                tuple(sorted((str(c.get("type")), str(c.get("status")))
                             for c in (obj.get("status") or {}).get("conditions") or ()
                             if c.get("type") != "NodeRegistrationHealthy")))
        if event == interface.DELETED:
            self._pools_seen.pop(name, None)
        elif event != interface.ADDED and self._pools_seen.get(name) == seen:
            return ()
        else:
            self._pools_seen[name] = seen
        self.trigger()
        return (BATCH_KEY,)

    def reconcile(self, key: str) -> float | None:
        now = self.clock.now()
        if self._batch_start is None or self._last_trigger is None:
            self._batch_start = self._last_trigger = now
        due = min(self._last_trigger + self.settings.batch_idle_duration,
                  self._batch_start + self.settings.batch_max_duration)
        if now < due:
            return due - now
        self._batch_start = self._last_trigger = None
        self._batch_uids.clear()
        self._create_failed = False
        res = self.provision()
        # pods left pending by a failed NodeClaim create get no new event to trigger a batch: look
        # again, as Karpenter requeues provisionable pods
        return RETRY_UNSCHEDULABLE if res.errors or self._create_failed else None

    # ---------------------------------------------------------------------------- scheduling

    def instance_types(self, pools: Sequence[nodepool_mod.NodePool]) -> dict[str, list[instancetype.InstanceType]]:
        """Each pool's instance types from the cloud, with cached unavailable offerings switched off."""
        out: dict[str, list[instancetype.InstanceType]] = {}
        for pool in pools:
            try:
                types = self.metrics.timed(NAME, "GetInstanceTypes", self.cloud.name,
                                           functools.partial(self.cloud.get_instance_types, pool))
            except Exception as exc:  # one pool's failure must not stop the others
                self.metrics.cloud_error(NAME, "GetInstanceTypes", self.cloud.name, exc)
                log.warning("provisioner: cannot get instance types of NodePool %s: %s", pool.name, exc)
                continue
            out[pool.name] = self.offerings.apply(types)
        self._last_types = out
        return out

    def last_instance_types(self) -> dict[str, list[instancetype.InstanceType]]:
        """The instance types of the last scheduling run, by NodePool (the instance-type gauges)."""
        return self._last_types

    def schedule(self, pods: Sequence[pod_mod.Pod]) -> tuple[results.Results, list[nodepool_mod.NodePool]]:
        """One scheduling run over the current state (no writes)."""
        pools = [p for p in self.state.nodepools() if p.metadata.deletion_timestamp is None]
        pools, self.skipped_pools = nodeclass_status.split_ready(self.cluster, pools)
        types = self.instance_types(pools)
        pools = [p for p in pools if p.name in types]
        existing = self.state.existing_nodes(types)
        workloads = self._spot_workloads()
        if workloads:  # karpy.io/max-spot-percent: pods over a workload's spot share kept off spot
            pods = spot_share.constrain(pods, workloads, spot_share.on_spot(existing, workloads))
        drivers = volume_limits.requested_drivers(pods)
        if drivers:  # CSI attach limits: one more dimension per driver (provisioning.volume_limits)
            types, existing = self._volume_limits(types, existing, drivers)
        usage = self.state.nodepool_usage(types)
        pools = [p for p in pools if not p.is_static]  # static pools' nodes hold pods; they launch none for them
        start = clock_mod.perf_counter()
        if self.settings.preference_policy == policies.IGNORE:
            pods = [policies.without_preferences(p) for p in pods]
        dra_why = dra.MESSAGE if self.settings.ignore_dra_requests else dra.NOT_ALLOCATED
        res = scheduler.Scheduler(pools, types, existing, self.state.daemonset_pods(), usage,
                                  cache=self.scheduling_cache, namespaces=self.state.namespaces.index(),
                                  dra_explanation=dra_why).solve(pods)
        self.relaxed_claims = set()
        if self.settings.min_values_policy == policies.BEST_EFFORT and res.errors and \
                any(policies.has_min_values(p) for p in pools):
            by_name = {p.name: p for p in pools}
            for relaxed in ([policies.lower_min_values(p, types.get(p.name, ())) for p in pools],
                            [policies.relax_min_values(p) for p in pools]):
                again = scheduler.Scheduler(relaxed, types, existing, self.state.daemonset_pods(), usage,
                                            namespaces=self.state.namespaces.index(),
                                            dra_explanation=dra_why).solve(pods)
                if len(again.errors) < len(res.errors):
                    res = again
                    self.relaxed_claims = {id(c) for c in res.new_claims
                                           if policies.violates_min_values(by_name[c.nodepool], c.instance_types)}
                if not res.errors:
                    break
        self.metrics.scheduling_duration.labels(NAME).observe(max(0.0, clock_mod.perf_counter() - start))
        return res, pools

    def provision(self) -> results.Results:
        """Schedule the pending pods now and act on the result (create NodeClaims, publish events)."""
        pods = self.state.pending_pods()
        virtual = self.buffers.pods() if self.buffers is not None else []
        if not pods and not virtual:
            return results.Results()
        self.runs += 1
        started = clock_mod.perf_counter()
        volume_errors: dict[str, str] = {}
        if volumetopology.needs_volumes(pods):
            vols = self._volumes()
            pods, volume_errors = volumetopology.apply(pods, vols)
            pods = volume_limits.with_requests(pods, vols)
        recorder = self.metrics.pods
        if recorder is not None:
            for p in pods:
                recorder.seen(p.metadata.uid or p.key)
        real, pods = pods, [*pods, *virtual]
        vkeys = frozenset(p.key for p in virtual)
        self.metrics.scheduler_ignored_pods.set(len(volume_errors))  # Karpenter's Validate: PVC checks
        self.metrics.scheduler_queue_depth.labels(NAME, str(self.runs)).set(len(pods))
        self.metrics.scheduler_unfinished_work.labels(NAME, str(self.runs)).set(0.0)
        try:
            res, pools = self.schedule(pods)
        finally:  # as Karpenter, both are deleted when the run ends
            self.metrics.scheduler_queue_depth.remove(NAME, str(self.runs))
            self.metrics.scheduler_unfinished_work.remove(NAME, str(self.runs))
        res.errors.update(volume_errors)
        self.metrics.scheduler_unschedulable_pods.labels(NAME).set(len(res.errors))
        self.metrics.scheduler_pending_by_zone.clear()
        zones: dict[str, int] = {}
        for p in real:
            zone = state_metrics.effective_zone(p)
            zones[zone] = zones.get(zone, 0) + 1
        for zone, count in sorted(zones.items()):
            self.metrics.scheduler_pending_by_zone.labels(NAME, zone).set(count)
        if self.buffers is not None:  # virtual pods: recorded by the buffers, then left out as Karpenter does
            self.buffers.observe(res)
            res.errors = {k: v for k, v in res.errors.items() if k not in vkeys}
        if recorder is not None:
            for p in [p for c in res.new_claims for p in c.pods] + [p for ps in res.existing.values() for p in ps]:
                if p.key not in vkeys:
                    recorder.decided(p.metadata.uid or p.key)
        if res.new_claims:
            log.info("computed new nodeclaim(s) to fit pod(s)", extra=logs.fields(
                NAME, nodeclaims=len(res.new_claims), pods=sum(len(c.pods) for c in res.new_claims)))
            log.info("found provisionable pod(s)", extra=logs.fields(
                NAME, Pods=logs.pretty_slice([p.key for p in pods]),
                duration=logs.go_duration(clock_mod.perf_counter() - started)))
        self.last_results = res
        by_name = {p.name: p for p in pools}
        hashes: dict[str, tuple[str, str] | None] = {}
        pool_hashes: dict[str, str] = {}
        planned: dict[str, str] = {}
        for claim in res.new_claims:
            created = self._create(claim, by_name, hashes, pool_hashes)
            if created is not None:
                planned.update((p.key, created) for p in claim.pods)
                if self.buffers is not None:
                    self.buffers.launched(created, claim.pods)
        # Karpenter's NominateNodeForPod: the targets are not disrupted for the nomination window,
        # nor while the pods planned onto them are pending
        self.state.nominations.nominate((t for t, placed in res.existing.items() if capacitybuffer.real(placed)),
                                        self.clock.now(),
                                        nominations.window(self.settings.batch_max_duration))
        planned.update((p.key, target) for target, placed in res.existing.items() for p in placed)
        self.state.nominations.plan(planned)
        for target, placed in sorted(res.existing.items()):
            message = "Pod should schedule on: " + self._describe_target(target)
            for p in placed:
                self._pod_event(p.key, events.NORMAL, REASON_NOMINATED, message)
        skipped = nodeclass_status.describe_skipped(self.skipped_pools)
        for key, explanation in sorted(res.errors.items()):
            if dra.is_dra_error(explanation):  # Karpenter logs these at info, not as scheduling errors
                log.info(dra.LOG_MESSAGE, extra=logs.fields(NAME, Pod=key))
            self._pod_event(key, events.WARNING, REASON_FAILED_SCHEDULING,
                            f"Failed to schedule pod, {explanation}{skipped}")
        return res

    def _spot_workloads(self) -> spot_share.Workloads:
        """The Deployments and StatefulSets with a spot share; a bad annotation gets a Warning event."""
        try:
            found = self.state.spot_workloads.read()
        except kube_errors.KubeError as exc:
            log.warning("provisioner: cannot read workloads for spot shares: %s", exc)
            return spot_share.Workloads((), (), ())
        for bad in found.invalid:
            log.warning("provisioner: %s", bad.message())
            try:
                obj = self.cluster.get(bad.kind, bad.name, bad.namespace)
            except kube_errors.KubeError:
                continue
            if self._should_publish(REASON_INVALID_SPOT_SHARE, interface.uid_of(obj) or bad.name):
                self.recorder.publish(obj, events.WARNING, REASON_INVALID_SPOT_SHARE, bad.message())
        return found

    def _volume_limits(self, types: dict[str, list[instancetype.InstanceType]],
                       existing: list[results.ExistingNode], drivers: tuple[str, ...]
                       ) -> tuple[dict[str, list[instancetype.InstanceType]], list[results.ExistingNode]]:
        """Instance types, nodes and in-flight NodeClaims with the drivers' attach limits."""
        try:
            csinodes = volume_limits.csinode_limits(self.cluster.list("CSINode"))
        except kube_errors.KubeError as exc:
            log.warning("provisioner: cannot read CSINodes: %s", exc)
            csinodes = {}
        allowed = {c.name: r.values for c in self.state.nodeclaims() for r in c.spec.requirements
                   if r.key == wk.INSTANCE_TYPE and r.operator == "In"}
        every = [t for ts in types.values() for t in ts]
        existing = volume_limits.with_node_limits(existing, drivers, self._volumes(), csinodes, every, allowed)
        return self.type_limits.apply(types, drivers), existing

    def _volumes(self) -> volumetopology.Volumes:
        """The cluster's PVCs, PVs and StorageClasses (read only when a pending pod mounts a PVC)."""
        try:
            return volumetopology.Volumes.of(self.cluster.list("PersistentVolumeClaim"),
                                             self.cluster.list("PersistentVolume"),
                                             self.cluster.list("StorageClass"))
        except kube_errors.KubeError as exc:
            log.warning("provisioner: cannot read volumes: %s", exc)
            return volumetopology.Volumes()

    def _create(self, claim: results.NewNodeClaim, pools: dict[str, nodepool_mod.NodePool],
                hashes: dict[str, tuple[str, str] | None], pool_hashes: dict[str, str]) -> str | None:
        """Create the NodeClaim of ``claim``; its name, or None when it could not be created."""
        pool = pools.get(claim.nodepool)
        pool_obj = self.state.raw("NodePool", claim.nodepool)
        if pool is None or pool_obj is None:
            log.warning("provisioner: NodePool %s vanished; not creating its NodeClaim", claim.nodepool)
            return None
        if pool.name not in hashes:
            hashes[pool.name] = claim_manifest.nodeclass_hash(self.cluster, pool)
            pool_hashes[pool.name] = pool.hash()  # one per run: the pool does not change within it
        relaxed = id(claim) in self.relaxed_claims
        manifest = claim_manifest.nodeclaim_manifest(claim, pool, pool_obj, hashes[pool.name], pool_hashes[pool.name])
        if relaxed:
            manifest["metadata"].setdefault("annotations", {})[policies.MIN_VALUES_RELAXED] = "true"
        try:
            created = self.cluster.create(manifest)
        except Exception as exc:  # e.g. the API server refused it; the pods stay pending
            self._create_failed = True
            log.warning("provisioner: cannot create a NodeClaim for NodePool %s: %s", pool.name, exc)
            for p in claim.pods:
                self._pod_event(p.key, events.WARNING, REASON_FAILED_SCHEDULING,
                                f"Failed to schedule pod, creating a NodeClaim of NodePool {pool.name} failed: {exc}")
            return None
        name = interface.name_of(created)
        self.metrics.nodeclaims_created.labels(CREATED_REASON, pool.name, "true" if relaxed else "false").inc()
        log.info("created nodeclaim", extra=logs.fields(
            NAME, NodePool=pool.name, NodeClaim=name,
            requests=quantity.format_list(volume_limits.without(claim.requests)),
            **{"instance-types": logs.pretty_slice(claim.instance_type_names()), "pods": len(claim.pods),
               "price": round(claim.price, 6)}))
        message = f"Pod should schedule on: nodeclaim/{name}"
        for p in claim.pods:
            self._pod_event(p.key, events.NORMAL, REASON_NOMINATED, message)
        return name

    def nodeclass_hash(self, pool: nodepool_mod.NodePool) -> tuple[str, str] | None:
        """The NodeClass hash annotation ``(key, value)`` a NodeClaim of ``pool`` is stamped with."""
        return claim_manifest.nodeclass_hash(self.cluster, pool)

    def _should_publish(self, reason: str, uid: str) -> bool:
        """Karpenter's recorder: dedupe by (reason, pod uid) for a while, then the Nominated rate limit."""
        now = self.clock.now()
        timeout = DEDUPE_SECONDS.get(reason)
        if timeout is not None:
            until = self._deduped.get((reason, uid))
            if until is not None and now < until:
                return False
            if len(self._deduped) > 4096:
                self._deduped = {k: t for k, t in self._deduped.items() if t > now}
            self._deduped[(reason, uid)] = now + timeout
        if reason != REASON_NOMINATED:
            return True
        if self._tokens_at is not None:
            self._tokens = min(float(NOMINATION_BURST), self._tokens + (now - self._tokens_at) * NOMINATION_QPS)
        self._tokens_at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def _describe_target(self, target: str) -> str:
        if self.state.raw("Node", target) is not None:
            claim = self.state.nodeclaim_for_node(target)
            return f"nodeclaim/{claim.name}, node/{target}" if claim is not None else f"node/{target}"
        return f"nodeclaim/{target}"

    def _pod_event(self, key: str, type_: str, reason: str, message: str) -> None:
        obj = self.state.raw("Pod", key)
        if obj is None:
            return
        if not self._should_publish(reason, interface.uid_of(obj) or key):
            return
        try:
            self.recorder.publish(obj, type_, reason, message)
        except Exception as exc:  # an event that cannot be written must not stop provisioning
            log.warning("provisioner: cannot publish %s on pod %s: %s", reason, key, exc)
