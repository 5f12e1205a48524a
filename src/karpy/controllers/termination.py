"""Termination: graceful shutdown of deleted Nodes and NodeClaims behind the ``karpenter.sh/termination``
finalizer, as Karpenter v1 does it.

Keys are ``Node/<name>`` and ``NodeClaim/<name>``; only objects being deleted that still carry the
finalizer are worked on.

**Node.** (1) Its NodeClaim is deleted too (deleting either one terminates both). (2) The node gets
the ``karpenter.sh/disrupted:NoSchedule`` taint (and the label that takes it out of external load
balancers). (3) Drain (Karpenter's ``DrainReconciler``): the pods on it are evicted through the Eviction
API (:meth:`karpy.kube.interface.Cluster.evict`, with the pod's uid as precondition: a 409 means the pod
was replaced and counts as gone) in Karpenter's groups: non-critical non-DaemonSet pods, then non-critical
DaemonSet pods, then critical (``system-cluster-critical`` / ``system-node-critical`` priority class)
non-DaemonSet pods, then critical DaemonSet pods (:data:`drain.EVICTION_ORDER`); a group holds its terminating
pods too, so a group starts only once every earlier group is fully deleted. Terminal pods, static
(mirror) pods, pods tolerating the disrupted taint and pods stuck terminating (over a minute past their
deletion time) are not waited for. An eviction refused (429 by a budget, 500 for a pod under two budgets)
is retried every :data:`EVICTION_RETRY` seconds, with Warning ``FailedDraining`` events on the node
saying how many pods wait and why. Pods with ``karpenter.sh/do-not-disrupt`` are never evicted, but they
are waited for. When the NodeClaim has a ``terminationGracePeriod``, its expiry is the deletion time plus
that period (kept in the ``karpenter.sh/nodeclaim-termination-timestamp`` annotation); each remaining pod
is deleted outright (bypassing budgets and do-not-disrupt, Normal event ``Disrupted``) once ``expiry - its
terminationGracePeriodSeconds`` (default 30 s) is reached, with the grace that is left as the delete's
``gracePeriodSeconds``. The NodeClaim's ``Drained`` condition is ``False`` (``Draining``) meanwhile, then
``True``. (4) Volumes: the node's VolumeAttachments are waited for (:mod:`karpy.controllers.volume_detachment`;
``VolumesDetached`` ``False`` / ``AwaitingVolumeDetachment``, then ``True``), at most until the
termination time or :data:`karpy.controllers.volume_detachment.DETACH_WAIT` after the drain. (5) The
instance is terminated (``InstanceTerminating`` ``True``; ``cloud.delete``; ``NodeClaimNotFoundError``
means it is already gone), then the Node's finalizer is removed (``karpenter_nodes_terminated_total``).

**NodeClaim.** (1) With a ``terminationGracePeriod``, the termination timestamp annotation is set
and a Warning ``TerminationGracePeriodExpiring`` event says when pods will be deleted. (2) Its
Node is deleted and waited for (the Node's own termination drains it). (3) The instance is
terminated (``NodeClaimNotFoundError`` = already gone). (4) Only then is the NodeClaim's finalizer
removed (``karpenter_nodeclaims_terminated_total``). The finalizer is never removed before the
instance is known to be gone.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels as wk
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import pod as pod_mod
from karpy.cloudprovider import errors as cp_errors
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import claim_status, cloudcalls, drain, ownership, runtime, state, volume_detachment
from karpy.kube import errors as kube_errors
from karpy.kube import events, interface
from karpy.observability import logs
from karpy.observability import metrics as metrics_mod

log = logging.getLogger("karpy.controllers.termination")

NAME = "termination"
NODE = "Node/"
NODECLAIM = "NodeClaim/"
EVICTION_RETRY = 5.0
WAIT = 10.0
DEFAULT_POD_GRACE = 30
EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"

REASON_EVICTED = "Evicted"
REASON_DISRUPTED = "Disrupted"
REASON_FAILED_DRAINING = "FailedDraining"
REASON_TGP_EXPIRING = "TerminationGracePeriodExpiring"
REASON_AWAITING_VOLUMES = "AwaitingVolumeDetachment"

DRAINED = "Drained"
VOLUMES_DETACHED = "VolumesDetached"
INSTANCE_TERMINATING = "InstanceTerminating"
"""The NodeClaim conditions Karpenter sets while terminating (``ConditionTypeDrained`` & co.)."""
VOLUME_RETRY = 5.0


class Termination:
    """See the module docstring. Register :meth:`controller` with a Manager."""

    def __init__(self, cluster: interface.Cluster, cluster_state: state.ClusterState,
                 cloud: cp_interface.CloudProvider, clock: clock_mod.Clock, recorder: events.EventRecorder,
                 metrics: metrics_mod.Metrics, calls: cloudcalls.CloudCalls | None = None) -> None:
        self.cluster = cluster
        self.calls: cloudcalls.CloudCalls = calls if calls is not None else cloudcalls.Inline()
        self.state = cluster_state
        self.cloud = cloud
        self.clock = clock
        self.recorder = recorder
        self.metrics = metrics
        self._instance_deletes: dict[str, float] = {}
        self._drained: set[str] = set()
        self.evictions: list[str] = []
        """Pods evicted or deleted so far, ``namespace/name``, in order (for reports and tests)."""
        self._evicted = drain.RecentEvictions()
        """Granted evictions of the last few seconds: not sent again while the cache catches up."""

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [
            ("NodeClaim", self._map_claim), ("Node", self._map_node), ("Pod", runtime.only(self._map_pod)),
            ("VolumeAttachment", self._map_attachment), ("PersistentVolumeClaim", _nothing)])
        # (the claims' watch maps nothing: it has their cache filled at start, not inside a reconcile)

    # -------------------------------------------------------------------------------- watches

    def _map_claim(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        if event != interface.DELETED and interface.is_terminating(obj) and \
                interface.has_finalizer(obj, wk.FINALIZER_TERMINATION):
            return (NODECLAIM + interface.name_of(obj),)
        return ()

    def _map_node(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        if event == interface.DELETED:
            keys = [NODECLAIM + str(r.get("name")) for r in interface.owner_references(obj)
                    if r.get("kind") == "NodeClaim"]
            claim = self.state.nodeclaim_name_for_provider_id(str((obj.get("spec") or {}).get("providerID") or ""))
            if claim:
                keys.append(NODECLAIM + claim)
            return keys
        if interface.is_terminating(obj) and interface.has_finalizer(obj, wk.FINALIZER_TERMINATION):
            return (NODE + interface.name_of(obj),)
        return ()

    def _map_pod(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        node_name = str((obj.get("spec") or {}).get("nodeName") or "")
        if not node_name:
            return ()
        node = self.state.raw("Node", node_name)
        if node is None or not interface.is_terminating(node):
            return ()
        if event == interface.DELETED or (obj.get("status") or {}).get("phase") in state.TERMINAL_PHASES:
            return (NODE + node_name,)
        return ()

    def _map_attachment(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        node_name = str((obj.get("spec") or {}).get("nodeName") or "")
        node = self.state.raw("Node", node_name) if node_name and event == interface.DELETED else None
        return (NODE + node_name,) if node is not None and interface.is_terminating(node) else ()

    def reconcile(self, key: str) -> float | None:
        try:
            if key.startswith(NODE):
                return self.finalize_node(key[len(NODE):])
            if key.startswith(NODECLAIM):
                return self.finalize_nodeclaim(key[len(NODECLAIM):])
        except kube_errors.NotFound:  # gone while the watch-fed cache still had it: nothing left to do
            return None
        return None

    # ----------------------------------------------------------------------------- NodeClaims

    def finalize_nodeclaim(self, name: str) -> float | None:
        obj = self.state.raw("NodeClaim", name)
        if obj is None or not interface.is_terminating(obj) or \
                not interface.has_finalizer(obj, wk.FINALIZER_TERMINATION):
            return None
        claim = self.state.nodeclaim(name)
        if claim is None:
            log.warning("termination: NodeClaim %s is unparsable; waiting", name)
            return WAIT
        self._annotate_termination_time(obj, claim)
        waiting = False
        for node_name in self._nodes_of(claim):
            node = self.state.raw("Node", node_name)
            if node is None or not ownership.launched_by_karpenter(node):  # never a Node karpy did not launch
                continue
            waiting = True
            if not interface.is_terminating(node):
                with contextlib.suppress(kube_errors.NotFound):
                    self.cluster.delete("Node", node_name)
        if waiting:
            return WAIT
        if claim.status.provider_id and not self._delete_instance(claim, NODECLAIM + name):
            return WAIT
        if not self._remove_finalizer("NodeClaim", name):
            return None
        pool = claim.nodepool_name or ""
        self.metrics.nodeclaims_terminated.labels(
            pool, claim.labels.get(wk.CAPACITY_TYPE, ""), claim.labels.get(wk.ZONE, "")).inc()
        deleted = claim.metadata.deletion_timestamp
        if deleted is not None:
            self.metrics.nodeclaims_termination_duration.labels(pool).observe(max(0.0, self.clock.now() - deleted))
        log.info("deleted nodeclaim", extra=logs.fields(
            NAME, NodeClaim=name, NodePool=pool or None, Node=claim.status.node_name or None,
            **{"provider-id": claim.status.provider_id}))
        return None

    def _nodes_of(self, claim: nodeclaim_mod.NodeClaim) -> list[str]:
        names = []
        by_pid = self.state.node_name_for_provider_id(claim.status.provider_id)
        if by_pid:
            names.append(by_pid)
        if claim.status.node_name and claim.status.node_name not in names:
            node = self.state.raw("Node", claim.status.node_name)
            if node is not None and (node.get("spec") or {}).get("providerID") == claim.status.provider_id:
                names.append(claim.status.node_name)
        return names

    def _annotate_termination_time(self, obj: dict[str, Any], claim: nodeclaim_mod.NodeClaim) -> None:
        if claim.spec.termination_grace_period is None or \
                wk.NODECLAIM_TERMINATION_TIMESTAMP in claim.metadata.annotations:
            return
        expiry = drain.termination_time(claim)
        if expiry is None:
            return
        stamp = clock_mod.rfc3339(expiry)
        self.cluster.patch("NodeClaim", claim.name, {"metadata": {
            "annotations": {wk.NODECLAIM_TERMINATION_TIMESTAMP: stamp}}})
        self._event(self.state.raw("NodeClaim", claim.name) or obj, events.WARNING, REASON_TGP_EXPIRING,
                    f"All pods will be deleted by {stamp}")

    def _delete_instance(self, claim: nodeclaim_mod.NodeClaim, key: str) -> bool:
        """Terminate the claim's instance; True when it is gone (or not ours to terminate).

        False while the call is in flight (its completion requeues ``key``) or failed."""
        self._claim_condition(claim.name, INSTANCE_TERMINATING, "True")
        started = self._instance_deletes.setdefault(claim.metadata.uid or claim.name, self.clock.now())
        outcome = self.calls.call(
            f"delete/{claim.metadata.uid}/{key}",
            lambda: self.metrics.timed(NAME, "Delete", self.cloud.name, lambda: self.cloud.delete(claim)), (NAME, key))
        if outcome is None:
            return False
        try:
            outcome.result()
        except cp_errors.NodeClaimNotFoundError:
            self._instance_gone(claim, started)
            return True
        except cp_errors.NotOwnedError as exc:
            log.warning("termination: not terminating instance of NodeClaim %s: %s", claim.name, exc)
            return True
        except Exception as exc:
            self.metrics.cloud_error(NAME, "Delete", self.cloud.name, exc)
            self.metrics.instance_termination_failures.labels(claim.labels.get(wk.ZONE, ""), "").inc()
            log.warning("termination: terminating the instance of NodeClaim %s failed: %s", claim.name, exc)
            return False
        log.info("termination: terminated instance %s of NodeClaim %s", claim.status.provider_id, claim.name)
        self._instance_gone(claim, started)
        return True

    def _instance_gone(self, claim: nodeclaim_mod.NodeClaim, started: float) -> None:
        """``karpenter_nodeclaims_instance_termination_duration_seconds``: first delete call to gone."""
        if self._instance_deletes.pop(claim.metadata.uid or claim.name, None) is not None:
            self.metrics.nodeclaims_instance_termination_duration.labels(claim.nodepool_name or "").observe(
                max(0.0, self.clock.now() - started))

    def _remove_finalizer(self, kind: str, name: str) -> bool:
        try:
            current = self.cluster.get(kind, name)
        except kube_errors.NotFound:
            return False
        finalizers = [f for f in current["metadata"].get("finalizers") or () if f != wk.FINALIZER_TERMINATION]
        if len(finalizers) == len(current["metadata"].get("finalizers") or ()):
            return False
        current["metadata"]["finalizers"] = finalizers
        try:
            self.cluster.update(current)
        except kube_errors.NotFound:
            return False
        return True

    # ---------------------------------------------------------------------------------- Nodes

    def finalize_node(self, name: str) -> float | None:
        obj = self.state.raw("Node", name)
        if obj is None or not interface.is_terminating(obj) or \
                not interface.has_finalizer(obj, wk.FINALIZER_TERMINATION):
            return None
        claim = self.state.nodeclaim_for_node(name)
        if claim is not None and claim.metadata.deletion_timestamp is None:
            with contextlib.suppress(kube_errors.NotFound):
                self.cluster.delete("NodeClaim", claim.name)
            claim = self.state.nodeclaim(claim.name)
        self._taint(name)
        expiry = drain.termination_time(claim)
        remaining, next_check = self._drain(name, obj, expiry)
        if remaining:
            if claim is not None:
                self._claim_condition(claim.name, DRAINED, "False", "Draining")
            return next_check
        pool = interface.labels_of(obj).get(wk.NODEPOOL, "")
        uid = interface.uid_of(obj) or name
        if uid not in self._drained:
            self._drained.add(uid)
            self.metrics.nodes_drained.labels(pool).inc()
        if claim is not None:
            self._claim_condition(claim.name, DRAINED, "True")
            wait = self._await_volumes(name, obj, claim.name, expiry)
            if wait is not None:
                return wait
        if claim is not None and claim.status.provider_id and not self._delete_instance(claim, NODE + name):
            return WAIT
        if not self._remove_finalizer("Node", name):
            return None
        self._drained.discard(uid)
        self.metrics.nodes_terminated.labels(pool, interface.labels_of(obj).get(wk.ZONE, "")).inc()
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            self.metrics.nodes_termination_duration.observe(
                max(0.0, self.clock.now() - clock_mod.parse_rfc3339(str(meta["deletionTimestamp"]))), pool)
        if meta.get("creationTimestamp"):
            self.metrics.nodes_lifetime_duration.labels(pool).observe(
                max(0.0, self.clock.now() - clock_mod.parse_rfc3339(str(meta["creationTimestamp"]))))
        log.info("deleted node", extra=logs.fields(NAME, Node=name, NodePool=pool or None))
        return None

    def _taint(self, name: str) -> None:
        node = self.cluster.get("Node", name)
        spec = node.setdefault("spec", {})
        taints = [dict(t) for t in spec.get("taints") or ()]
        want = drain.DISRUPTED_TAINT.to_dict()
        has_taint = any(t.get("key") == want["key"] and t.get("effect") == want["effect"] and not t.get("value")
                        for t in taints)
        node_labels = node["metadata"].get("labels") or {}
        if has_taint and node_labels.get(EXCLUDE_LB_LABEL) == "karpenter":
            return
        if not has_taint:
            spec["taints"] = [t for t in taints if t.get("key") != wk.TAINT_DISRUPTED] + [want]
        node["metadata"]["labels"] = {**node_labels, EXCLUDE_LB_LABEL: "karpenter"}
        self.cluster.update(node)
        log.info("tainted node", extra=logs.fields(NAME, Node=name, **{
            "taint.Key": drain.DISRUPTED_TAINT.key, "taint.Value": drain.DISRUPTED_TAINT.value or "",
            "taint.Effect": drain.DISRUPTED_TAINT.effect}))

    def _drain(self, name: str, node_obj: dict[str, Any], expiry: float | None) -> tuple[int, float]:
        """Evict what may go now; returns (pods still waiting, seconds until the next look).

        Karpenter's drain: pods past their delete time (the NodeClaim's termination time less their
        grace period) are deleted with the grace that is left; the others wait in
        :data:`drain.EVICTION_ORDER` groups (terminating ones included, stuck ones not), and only the first
        group that still has pods is evicted - a group starts once every earlier one is gone."""
        now = self.clock.now()
        next_check = WAIT
        groups: dict[str, list[pod_mod.Pod]] = {g: [] for g in drain.EVICTION_ORDER}
        for p in self.state.pods_on(name):
            if drain.is_drain_ignored(p) or volume_detachment.stuck_terminating(p, now):
                continue
            if expiry is not None and not p.is_terminating:
                grace = p.termination_grace_period_seconds
                delete_at = expiry - (DEFAULT_POD_GRACE if grace is None else grace)
                if now >= delete_at:
                    self._force_delete(p, expiry, grace)
                else:
                    next_check = min(next_check, delete_at - now)
            groups[drain.eviction_group(p)].append(p)
        refused: list[str] = []
        for group in drain.EVICTION_ORDER:
            pods = [p for p in groups[group] if self._present(p)]
            if not pods:
                continue
            for p in pods:
                if not p.is_terminating and not p.protected(now) and not self._evicted.holds(p, now):
                    why = self._evict(p)
                    if why is not None:
                        refused.append(why)
            if any(self._present(p) for p in pods):
                break
        waiting = [p for p in self.state.pods_on(name)  # read again: a pod may have taken an evicted one's name
                   if not drain.is_drain_ignored(p) and not volume_detachment.stuck_terminating(p, now)]
        if refused:
            next_check = min(next_check, EVICTION_RETRY)
        if waiting:
            self._event(node_obj, events.WARNING, REASON_FAILED_DRAINING,
                        f"Failed to drain node, {len(waiting)} pods are waiting to be evicted")
            if refused:
                self._event(node_obj, events.WARNING, REASON_FAILED_DRAINING,
                            "Failed to drain node: " + "; ".join(refused[:3]) + (" ..." if len(refused) > 3 else ""))
            stuck = drain.blocking(waiting, now, expiry)
            if stuck:
                deleted = (node_obj.get("metadata") or {}).get("deletionTimestamp")
                since = clock_mod.parse_rfc3339(str(deleted)) if deleted else None
                self._event(node_obj, events.WARNING, REASON_FAILED_DRAINING,
                            drain.message(name, stuck, since, now))
        return len(waiting), max(0.0, next_check)

    def _present(self, p: pod_mod.Pod) -> bool:
        """``p`` itself is still there (not another pod that took its name)."""
        raw = self.state.raw("Pod", p.key)
        return raw is not None and (not p.metadata.uid or interface.uid_of(raw) in ("", p.metadata.uid))

    def _evict(self, p: pod_mod.Pod) -> str | None:
        """Evict one pod (the Eviction API, with its uid as precondition); why it was refused, or None."""
        obj = self.state.raw("Pod", p.key) or p.to_manifest()
        try:
            self.cluster.evict(p.name, p.namespace, uid=p.metadata.uid or None)
        except (kube_errors.NotFound, kube_errors.Conflict) as exc:  # gone, or replaced by another pod of its name
            self.metrics.pods_eviction_requests.labels("409" if isinstance(exc, kube_errors.Conflict) else "404").inc()
            return None
        except kube_errors.TooManyRequests as exc:  # 429: a budget allows no disruption now; retried
            self.metrics.pods_eviction_requests.labels("429").inc()
            log.info("termination: eviction of %s refused for now: %s", p.key, exc)
            return f"evicting pod {p.key} violates a PodDisruptionBudget ({exc})"
        except kube_errors.InternalError as exc:  # 500: e.g. more than one budget selects the pod
            self.metrics.pods_eviction_requests.labels("500").inc()
            log.warning("termination: eviction of %s refused: %s", p.key, exc)
            return f"the Eviction API refuses pod {p.key}: {exc}"
        except kube_errors.KubeError as exc:
            log.warning("termination: eviction of %s failed: %s", p.key, exc)
            return f"evicting pod {p.key} failed: {exc}"
        self.metrics.pods_eviction_requests.labels("200").inc()
        self.metrics.pods_drained.labels(self._drain_reason(p)).inc()
        self.evictions.append(p.key)
        self._evicted.remember(p, self.clock.now())
        self._event(obj, events.NORMAL, REASON_EVICTED, "Evicted pod")
        return None

    def _drain_reason(self, p: pod_mod.Pod) -> str:
        """The disruption reason of the NodeClaim the pod is drained from (``pods_drained_total``)."""
        claim = self.state.nodeclaim_for_node(p.node_name or "") if p.node_name else None
        for c in claim.status.conditions if claim is not None else ():
            if c.type == nodeclaim_mod.DISRUPTION_REASON and c.status == "True":
                return c.reason
        return ""

    def _force_delete(self, p: pod_mod.Pod, expiry: float, grace: int | None) -> None:
        """Delete ``p`` with the grace that is left before ``expiry`` (Karpenter's ``DeleteExpiringPods``:
        the delete's ``gracePeriodSeconds`` clamps the pod's own to the node's remaining time)."""
        obj = self.state.raw("Pod", p.key)
        granted = max(0, int(expiry - self.clock.now()))
        try:
            self.cluster.delete("Pod", p.name, p.namespace, grace_period_seconds=granted)
        except kube_errors.NotFound:
            return
        self.evictions.append(p.key)
        message = (f"Deleting the pod to accommodate the terminationTime {clock_mod.rfc3339(expiry)} of the node. "
                   f"The pod was granted {granted} seconds of grace-period of its "
                   f"{DEFAULT_POD_GRACE if grace is None else grace} terminationGracePeriodSeconds. "
                   "This bypasses the PDB of the pod and the do-not-disrupt annotation.")
        if obj is not None:
            self._event(obj, events.NORMAL, REASON_DISRUPTED, message)

    # -------------------------------------------------------------------- volumes, conditions

    def _await_volumes(self, name: str, node_obj: dict[str, Any], claim_name: str,
                       expiry: float | None) -> float | None:
        """Seconds until the next look while the drained node's volumes are still attached
        (:mod:`karpy.controllers.volume_detachment`); None when the instance may go."""
        claim_obj = self.state.raw("NodeClaim", claim_name) or {}
        if _condition(claim_obj, VOLUMES_DETACHED).get("status") == "True":
            return None
        now = self.clock.now()
        drained = _condition(claim_obj, DRAINED)
        drained_at = clock_mod.parse_rfc3339(str(drained["lastTransitionTime"])) \
            if drained.get("status") == "True" and drained.get("lastTransitionTime") else now
        until = volume_detachment.deadline(expiry, drained_at)
        if until is not None and now >= until:
            log.info("termination: not waiting any longer for the volumes of node %s", name)
            return None
        try:
            attachments = self.cluster.list("VolumeAttachment")
        except kube_errors.KubeError as exc:
            log.warning("termination: cannot read the VolumeAttachments of node %s: %s", name, exc)
            return VOLUME_RETRY
        blocking = volume_detachment.blocking(attachments, name, self.state.pods_on(name),
                                              volume_detachment.volume_finder(self.cluster), now)
        if blocking:
            self._claim_condition(claim_name, VOLUMES_DETACHED, "False", REASON_AWAITING_VOLUMES)
            self._event(node_obj, events.NORMAL, REASON_AWAITING_VOLUMES,
                        f"Awaiting deletion of bound volumeattachments ({volume_detachment.names(blocking)})")
            return VOLUME_RETRY if until is None else max(0.0, min(VOLUME_RETRY, until - now))
        self._claim_condition(claim_name, VOLUMES_DETACHED, "True")
        return None

    def _claim_condition(self, claim_name: str, type_: str, value: str, reason: str = "") -> None:
        """Set a condition of the NodeClaim (a status patch at the resourceVersion read: a 409 leaves it
        for the next pass); nothing when it already says so."""
        try:
            current = self.cluster.get("NodeClaim", claim_name)
        except kube_errors.NotFound:
            return
        status = dict(current.get("status") or {})
        before = status.get("conditions")
        claim_status.set_condition(status, type_, value, self.clock.now(), reason)
        if status["conditions"] == before:
            return
        with contextlib.suppress(kube_errors.Conflict, kube_errors.NotFound):
            self.cluster.patch_status("NodeClaim", claim_name, {
                "metadata": {"resourceVersion": current["metadata"].get("resourceVersion")},
                "status": {"conditions": status["conditions"]}})

    def _event(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        try:
            self.recorder.publish(obj, type_, reason, message)
        except Exception as exc:
            log.warning("termination: cannot publish %s: %s", reason, exc)


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return dict(c)
    return {}


def _nothing(_event: str, _obj: dict[str, Any]) -> Iterable[str]:
    return ()
