"""Termination: graceful shutdown of deleted Nodes and NodeClaims behind the ``karpenter.sh/termination``
finalizer, as Karpenter v1 does it.

Keys are ``Node/<name>`` and ``NodeClaim/<name>``; only objects being deleted that still carry the
finalizer are worked on.

**Node.** (1) Its NodeClaim is deleted too (deleting either one terminates both). (2) The node gets
the ``karpenter.sh/disrupted:NoSchedule`` taint (and the label that takes it out of external load
balancers). (3) Drain: the pods on it are evicted through the Eviction API
(:meth:`karpy.kube.interface.Cluster.evict`, which respects PodDisruptionBudgets) in Karpenter's
order: non-critical non-DaemonSet pods, then non-critical DaemonSet pods, then critical
non-DaemonSet pods, then critical DaemonSet pods (:data:`EVICTION_ORDER`); a group is only started
once every earlier group is gone. Terminal pods, static (mirror) pods and pods tolerating the
disrupted taint are ignored. An eviction refused by a budget (429) is retried every
:data:`EVICTION_RETRY` seconds, with a Warning ``FailedDraining`` event on the node. Pods with
``karpenter.sh/do-not-disrupt: "true"`` are never evicted, but they are waited for. When the
NodeClaim has a ``terminationGracePeriod``, its expiry is the deletion time plus that period
(kept in the ``karpenter.sh/nodeclaim-termination-timestamp`` annotation); each remaining pod is
deleted outright (bypassing budgets and do-not-disrupt, Normal event ``Disrupted``) once
``expiry - its terminationGracePeriodSeconds`` (default 30 s) is reached. (4) Drained: the
instance is terminated (``cloud.delete``; ``NodeClaimNotFoundError`` means it is already gone),
then the Node's finalizer is removed (``karpenter_nodes_terminated_total``).

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
from karpy.api import node as node_mod
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import pod as pod_mod
from karpy.cloudprovider import errors as cp_errors
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import cloudcalls, drain_report, ownership, runtime, state
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

DISRUPTED_TAINT = node_mod.Taint(key=wk.TAINT_DISRUPTED, effect="NoSchedule")

NON_CRITICAL_NON_DAEMON = "non-critical"
NON_CRITICAL_DAEMON = "non-critical-daemon"
CRITICAL_NON_DAEMON = "critical"
CRITICAL_DAEMON = "critical-daemon"
EVICTION_ORDER = (NON_CRITICAL_NON_DAEMON, NON_CRITICAL_DAEMON, CRITICAL_NON_DAEMON, CRITICAL_DAEMON)
"""Karpenter's eviction groups, first to last (sigs.k8s.io/karpenter ``Terminator.Evict``)."""

REASON_EVICTED = "Evicted"
REASON_DISRUPTED = "Disrupted"
REASON_FAILED_DRAINING = "FailedDraining"
REASON_TGP_EXPIRING = "TerminationGracePeriodExpiring"


def eviction_group(p: pod_mod.Pod) -> str:
    daemon = p.owner_kind == "DaemonSet"
    if p.is_critical:
        return CRITICAL_DAEMON if daemon else CRITICAL_NON_DAEMON
    return NON_CRITICAL_DAEMON if daemon else NON_CRITICAL_NON_DAEMON


def is_drain_ignored(p: pod_mod.Pod) -> bool:
    """Terminal pods, static pods and pods tolerating the disrupted taint are not drained."""
    if p.is_terminal or p.owner_kind == "Node" or pod_mod.MIRROR_POD_ANNOTATION in p.annotations:
        return True
    return any(t.tolerates(DISRUPTED_TAINT) for t in p.tolerations)


def termination_time(claim: nodeclaim_mod.NodeClaim | None) -> float | None:
    """When every pod of the claim's node must be gone: deletion time + terminationGracePeriod."""
    if claim is None:
        return None
    text = claim.metadata.annotations.get(wk.NODECLAIM_TERMINATION_TIMESTAMP)
    if text:
        with contextlib.suppress(ValueError):
            return clock_mod.parse_rfc3339(text)
    tgp = claim.spec.termination_grace_period
    deleted = claim.metadata.deletion_timestamp
    if tgp is None or deleted is None:
        return None
    return deleted + tgp


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

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [
            ("NodeClaim", self._map_claim), ("Node", self._map_node), ("Pod", runtime.only(self._map_pod))])

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
        expiry = termination_time(claim)
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
        remaining, next_check = self._drain(name, obj, termination_time(claim))
        if remaining:
            return next_check
        pool = interface.labels_of(obj).get(wk.NODEPOOL, "")
        uid = interface.uid_of(obj) or name
        if uid not in self._drained:
            self._drained.add(uid)
            self.metrics.nodes_drained.labels(pool).inc()
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
        want = DISRUPTED_TAINT.to_dict()
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
            "taint.Key": DISRUPTED_TAINT.key, "taint.Value": DISRUPTED_TAINT.value or "",
            "taint.Effect": DISRUPTED_TAINT.effect}))

    def _drain(self, name: str, node_obj: dict[str, Any], expiry: float | None) -> tuple[int, float]:
        """Evict what may go now; returns (pods still waiting, seconds until the next look)."""
        now = self.clock.now()
        next_check = WAIT
        groups: dict[str, list[pod_mod.Pod]] = {g: [] for g in EVICTION_ORDER}
        waiting: list[pod_mod.Pod] = []
        for p in self.state.pods_on(name):
            if is_drain_ignored(p):
                continue
            if expiry is not None:
                grace = p.termination_grace_period_seconds
                delete_at = expiry - (DEFAULT_POD_GRACE if grace is None else grace)
                if now >= delete_at:
                    self._force_delete(p, expiry, grace)
                    continue
                next_check = min(next_check, delete_at - now)
            waiting.append(p)
            if p.is_terminating or p.protected(now):
                continue
            groups[eviction_group(p)].append(p)
        blocked = 0
        for group in EVICTION_ORDER:
            pods = groups[group]
            if not pods:
                continue
            for p in pods:
                blocked += self._evict(p)
            if blocked:
                next_check = min(next_check, EVICTION_RETRY)
                break
        remaining = sum(1 for p in waiting if self.state.raw("Pod", p.key) is not None)
        if remaining:
            self._event(node_obj, events.WARNING, REASON_FAILED_DRAINING,
                        f"Failed to drain node, {remaining} pods are waiting to be evicted")
            stuck = drain_report.blocking(waiting, now, expiry)
            if stuck:
                deleted = (node_obj.get("metadata") or {}).get("deletionTimestamp")
                since = clock_mod.parse_rfc3339(str(deleted)) if deleted else None
                self._event(node_obj, events.WARNING, REASON_FAILED_DRAINING,
                            drain_report.message(name, stuck, since, now))
        return remaining, max(0.0, next_check)

    def _evict(self, p: pod_mod.Pod) -> int:
        """Evict one pod; 1 when a budget (or the server) refused it for now."""
        obj = self.state.raw("Pod", p.key) or p.to_manifest()
        try:
            self.cluster.evict(p.name, p.namespace)
        except kube_errors.NotFound:
            self.metrics.pods_eviction_requests.labels("404").inc()
            return 0
        except (kube_errors.TooManyRequests, kube_errors.InternalError) as exc:
            self.metrics.pods_eviction_requests.labels(
                "429" if isinstance(exc, kube_errors.TooManyRequests) else "500").inc()
            log.info("termination: eviction of %s refused for now: %s", p.key, exc)
            return 1
        self.metrics.pods_eviction_requests.labels("200").inc()
        self.metrics.pods_drained.labels(self._drain_reason(p)).inc()
        self.evictions.append(p.key)
        self._event(obj, events.NORMAL, REASON_EVICTED, "Evicted pod")
        return 0

    def _drain_reason(self, p: pod_mod.Pod) -> str:
        """The disruption reason of the NodeClaim the pod is drained from (``pods_drained_total``)."""
        claim = self.state.nodeclaim_for_node(p.node_name or "") if p.node_name else None
        for c in claim.status.conditions if claim is not None else ():
            if c.type == nodeclaim_mod.DISRUPTION_REASON and c.status == "True":
                return c.reason
        return ""

    def _force_delete(self, p: pod_mod.Pod, expiry: float, grace: int | None) -> None:
        obj = self.state.raw("Pod", p.key)
        try:
            self.cluster.delete("Pod", p.name, p.namespace)
        except kube_errors.NotFound:
            return
        self.evictions.append(p.key)
        granted = max(0, int(expiry - self.clock.now()))
        message = (f"Deleting the pod to accommodate the terminationTime {clock_mod.rfc3339(expiry)} of the node. "
                   f"The pod was granted {granted} seconds of grace-period of its "
                   f"{DEFAULT_POD_GRACE if grace is None else grace} terminationGracePeriodSeconds. "
                   "This bypasses the PDB of the pod and the do-not-disrupt annotation.")
        if obj is not None:
            self._event(obj, events.NORMAL, REASON_DISRUPTED, message)

    def _event(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        try:
            self.recorder.publish(obj, type_, reason, message)
        except Exception as exc:
            log.warning("termination: cannot publish %s: %s", reason, exc)
