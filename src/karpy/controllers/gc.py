"""Garbage collection: cloud instances without a NodeClaim, NodeClaims without an instance.

Every :data:`INTERVAL` seconds (Karpenter's is two minutes) the collector lists the cloud's
instances. :meth:`karpy.cloudprovider.interface.CloudProvider.list` only returns instances this
cluster's karpy launched (they carry the ownership tag), so nothing else is ever touched.

* An instance that no NodeClaim refers to (neither by ``status.providerID`` nor by name, the
  ``karpenter.sh/nodeclaim`` tag) and that was launched at least :data:`MIN_AGE` seconds ago is
  terminated; the Node registered for it, if any, is deleted (its termination drains it).
* A NodeClaim that is launched (has a provider ID), not being deleted, at least :data:`MIN_AGE`
  seconds old, and whose instance is no longer in the list is deleted (Warning event
  ``InstanceTerminated``, ``karpenter_nodeclaims_disrupted_total{reason="garbage_collected"}``).

Nodes without the ``karpenter.sh/nodepool`` label and not linked to a NodeClaim are never
considered. Failures are per object: logged, counted, and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import logging

from karpy import clock as clock_mod
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.cloudprovider import errors as cp_errors
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import runtime, state
from karpy.kube import errors as kube_errors
from karpy.kube import events, interface
from karpy.observability import metrics as metrics_mod

log = logging.getLogger("karpy.controllers.gc")

NAME = "garbagecollection"
KEY = "sweep"
INTERVAL = 120.0
MIN_AGE = 30.0
REASON_INSTANCE_TERMINATED = "InstanceTerminated"


class GarbageCollector:
    """See the module docstring. Register :meth:`controller`, then enqueue :data:`KEY` once."""

    def __init__(self, cluster: interface.Cluster, cluster_state: state.ClusterState,
                 cloud: cp_interface.CloudProvider, clock: clock_mod.Clock, recorder: events.EventRecorder,
                 metrics: metrics_mod.Metrics, *, interval: float = INTERVAL, min_age: float = MIN_AGE) -> None:
        self.cluster = cluster
        self.state = cluster_state
        self.cloud = cloud
        self.clock = clock
        self.recorder = recorder
        self.metrics = metrics
        self.interval = interval
        self.min_age = min_age
        self.collected_instances: list[str] = []
        """Provider IDs of the leaked instances terminated so far."""
        self.collected_nodeclaims: list[str] = []

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [])

    def reconcile(self, key: str) -> float | None:
        self.sweep()
        return self.interval

    def sweep(self) -> None:
        """One garbage-collection pass now."""
        try:
            instances = self.metrics.timed(NAME, "List", self.cloud.name, self.cloud.list)
        except Exception as exc:
            self.metrics.cloud_error(NAME, "List", self.cloud.name, exc)
            log.warning("gc: cannot list instances: %s", exc)
            return
        now = self.clock.now()
        every = self.state.nodeclaims()
        live = {inst.status.provider_id for inst in instances}
        claims: dict[str, nodeclaim_mod.NodeClaim] | None = None  # by name, built for the first unknown instance
        for inst in instances:
            pid = inst.status.provider_id
            if self.state.nodeclaim_name_for_provider_id(pid) is not None:
                continue
            if claims is None:
                claims = {c.name: c for c in every}
            by_name = claims.get(inst.name)
            if by_name is not None and by_name.status.provider_id in ("", pid):
                continue  # launched, status not written yet
            launched = inst.metadata.creation_timestamp
            if launched is not None and now - launched < self.min_age:
                continue
            try:
                self._collect_instance(inst)
            except Exception:
                log.exception("gc: cannot collect instance %s", pid)
        for claim in every:
            pid = claim.status.provider_id
            if not pid or pid in live or claim.metadata.deletion_timestamp is not None:
                continue
            created = claim.metadata.creation_timestamp
            if created is not None and now - created < self.min_age:
                continue
            try:
                self._collect_nodeclaim(claim)
            except Exception:
                log.exception("gc: cannot collect NodeClaim %s", claim.name)

    def _collect_instance(self, inst: nodeclaim_mod.NodeClaim) -> None:
        pid = inst.status.provider_id
        try:
            self.cloud.delete(inst)
        except cp_errors.NodeClaimNotFoundError:
            return
        except cp_errors.NotOwnedError as exc:
            log.warning("gc: leaving instance %s alone: %s", pid, exc)
            return
        except Exception as exc:
            self.metrics.cloud_error(NAME, "Delete", self.cloud.name, exc)
            log.warning("gc: cannot terminate leaked instance %s: %s", pid, exc)
            return
        self.collected_instances.append(pid)
        log.info("gc: terminated instance %s (launched for NodeClaim %s, which does not exist)", pid, inst.name)
        node_name = self.state.node_name_for_provider_id(pid)
        if node_name is not None:
            with contextlib.suppress(kube_errors.NotFound):
                self.cluster.delete("Node", node_name)

    def _collect_nodeclaim(self, claim: nodeclaim_mod.NodeClaim) -> None:
        obj = self.state.raw("NodeClaim", claim.name)
        try:
            self.cluster.delete("NodeClaim", claim.name)
        except kube_errors.NotFound:
            return
        self.collected_nodeclaims.append(claim.name)
        self.metrics.nodeclaims_disrupted.labels(
            "garbage_collected", claim.nodepool_name or "", claim.labels.get("karpenter.sh/capacity-type", "")).inc()
        message = f"Instance {claim.status.provider_id} of NodeClaim {claim.name} no longer exists"
        log.info("gc: %s; deleting the NodeClaim", message)
        if obj is not None:
            try:
                self.recorder.publish(obj, events.WARNING, REASON_INSTANCE_TERMINATED, message)
            except Exception as exc:
                log.warning("gc: cannot publish event: %s", exc)
