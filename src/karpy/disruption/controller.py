"""The ``disruption`` controller: expiration and emptiness on karpy's controller runtime.

Every :data:`INTERVAL` seconds (one key, :data:`KEY`) it lists NodePools, NodeClaims, Nodes, Pods
and PodDisruptionBudgets through the :class:`karpy.kube.interface.Cluster` and:

1. Expiration (Karpenter v1, forceful): a NodeClaim older than its ``spec.expireAfter`` is
   deleted whatever the budgets, do-not-disrupt annotations or PDBs say (the termination
   controller drains it). Counted in ``karpenter_nodeclaims_disrupted_total{reason="expired"}``.
2. Emptiness: candidates (:mod:`karpy.disruption.candidates`) that are empty and have been for
   their NodePool's ``consolidateAfter`` (:mod:`karpy.disruption.emptiness`) are disrupted within
   the budgets for reason ``Empty`` (:mod:`karpy.disruption.budgets`): the Node gets the
   ``karpenter.sh/disrupted:NoSchedule`` taint and its NodeClaim is deleted; termination does the
   rest. Events ``DisruptionTerminating`` ("Disrupting Node: Empty/Delete") on the Node and the
   NodeClaim; ``DisruptionBlocked`` on a NodePool whose budget holds nodes back;
   ``Unconsolidatable`` on a node of a consolidating pool when why it cannot be disrupted changes.

"Empty since" is the NodeClaim's ``status.lastPodEventTime`` when present, else the time of the
last watched event of a non-daemon pod bound to the node, else the NodeClaim's initialization.
Use :func:`new` to build and :func:`register` to start it on a Manager.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from karpy import clock as clock_mod
from karpy.api import errors as api_errors
from karpy.api import fields as fields_mod
from karpy.api import labels, node, nodeclaim, nodepool, pod, selectors
from karpy.controllers import runtime
from karpy.disruption import budgets, candidates, emptiness
from karpy.kube import errors as kube_errors
from karpy.kube import events, interface, memory_eviction
from karpy.observability import metrics as metrics_mod

log = logging.getLogger("karpy.disruption")

NAME = "disruption"
KEY = "disruption"
INTERVAL = 10.0
DISRUPTED_TAINT = {"key": labels.TAINT_DISRUPTED, "effect": "NoSchedule"}


class DisruptionController:
    """See the module docstring."""

    def __init__(
        self,
        cluster: interface.Cluster,
        clock: clock_mod.Clock,
        recorder: events.EventRecorder | None = None,
        metrics: metrics_mod.Metrics | None = None,
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.recorder = recorder if recorder is not None else events.EventRecorder(cluster, clock)
        self.metrics = metrics
        self.last_pod_event: dict[str, float] = {}
        """Node name -> time of the last event of a non-daemon pod bound to it."""
        self._unconsolidatable: dict[str, str] = {}

    # ------------------------------------------------------------------------------ runtime glue

    def controller(self) -> runtime.Controller:
        return runtime.Controller(name=NAME, reconcile=self.reconcile, watches=[("Pod", self.on_pod)])

    def on_pod(self, _event: str, obj: dict[str, Any]) -> Iterable[str]:
        """Record the pod event time on its node; enqueues nothing (the loop polls)."""
        node_name = (obj.get("spec") or {}).get("nodeName")
        if not node_name:
            return ()
        ref = interface.owner(obj)
        if ref is not None and ref.get("kind") in ("DaemonSet", "Node"):
            return ()
        if pod.MIRROR_POD_ANNOTATION in interface.annotations_of(obj):
            return ()
        self.last_pod_event[str(node_name)] = self.clock.now()
        return ()

    def reconcile(self, _key: str) -> float | None:
        now = self.clock.now()
        self.expire(now)
        self.disrupt_empty(now)
        return INTERVAL

    # ---------------------------------------------------------------------------------- expiration

    def expire(self, now: float) -> list[str]:
        """Delete every NodeClaim past its ``expireAfter``; returns their names."""
        expired: list[str] = []
        for obj in self.cluster.list("NodeClaim"):
            if interface.is_terminating(obj):
                continue
            claim = _parse(nodeclaim.NodeClaim.from_manifest, obj)
            if claim is None or claim.spec.expire_after is None or claim.metadata.creation_timestamp is None:
                continue
            if now - claim.metadata.creation_timestamp < claim.spec.expire_after:
                continue
            try:
                self.cluster.delete("NodeClaim", claim.name)
            except kube_errors.NotFound:
                continue
            log.info("deleting expired nodeclaim %s", claim.name)
            expired.append(claim.name)
            if self.metrics is not None:
                self.metrics.nodeclaims_disrupted.labels(
                    reason="expired", nodepool=claim.nodepool_name or "").inc()
        return expired

    # ----------------------------------------------------------------------------------- emptiness

    def disrupt_empty(self, now: float) -> list[str]:
        """Disrupt the empty candidates the budgets allow; returns the node names."""
        pools: dict[str, nodepool.NodePool] = {}
        pool_objs: dict[str, dict[str, Any]] = {}
        for obj in self.cluster.list("NodePool"):
            parsed = _parse(nodepool.NodePool.from_manifest, obj)
            if parsed is not None:
                pools[parsed.name] = parsed
                pool_objs[parsed.name] = obj
        claims: dict[str, nodeclaim.NodeClaim] = {}
        claim_objs: dict[str, dict[str, Any]] = {}
        for obj in self.cluster.list("NodeClaim"):
            claim = _parse(nodeclaim.NodeClaim.from_manifest, obj)
            if claim is not None and claim.status.node_name:
                claims[claim.status.node_name] = claim
                claim_objs[claim.status.node_name] = obj
        pods_by_node: dict[str, list[pod.Pod]] = {}
        pod_dicts = self.cluster.list("Pod")
        for obj in pod_dicts:
            node_name = (obj.get("spec") or {}).get("nodeName")
            if node_name:
                p = _parse(pod.Pod.from_manifest, obj)
                if p is not None:
                    pods_by_node.setdefault(str(node_name), []).append(p)
        pdbs = self._pdbs(pod_dicts)

        total: dict[str, int] = {}
        disrupting: dict[str, int] = {}
        eligible: list[tuple[candidates.Candidate, float | None]] = []
        node_objs: dict[str, dict[str, Any]] = {}
        live_nodes: set[str] = set()
        for obj in self.cluster.list("Node"):
            n = _parse(node.Node.from_manifest, obj)
            if n is None:
                continue
            live_nodes.add(n.name)
            node_objs[n.name] = obj
            pool_name = n.labels.get(labels.NODEPOOL)
            claim = claims.get(n.name)
            if pool_name:
                total[pool_name] = total.get(pool_name, 0) + 1
                claim_deleting = claim is not None and claim.metadata.deletion_timestamp is not None
                if n.deleting or claim_deleting or not n.ready:
                    disrupting[pool_name] = disrupting.get(pool_name, 0) + 1
            pool = pools.get(pool_name) if pool_name else None
            result = candidates.candidate(n, claim, pool, pods_by_node.get(n.name, []), pdbs)
            if isinstance(result, str):
                if pool is not None and emptiness.emptiness_enabled(pool) and claim is not None:
                    self._report_unconsolidatable(obj, claim_objs[n.name], result)
                continue
            self._unconsolidatable.pop(n.name, None)
            since = emptiness.empty_since(result.nodeclaim, self.last_pod_event.get(n.name))
            if emptiness.is_consolidatable(result, since, now):
                eligible.append((result, since))
        for gone in set(self.last_pod_event) - live_nodes:
            del self.last_pod_event[gone]

        allowed = {
            name: budgets.allowed_disruptions(pool, emptiness.REASON, total.get(name, 0),
                                              disrupting.get(name, 0), now)
            for name, pool in pools.items()
        }
        chosen, blocked = emptiness.select(eligible, allowed)
        for pool_name in sorted({c.nodepool.name for c in blocked}):
            self.recorder.normal(pool_objs[pool_name], "DisruptionBlocked",
                                 "No allowed disruptions due to blocking budget")
        done: list[str] = []
        for c in chosen:
            if self._disrupt(c, node_objs[c.name]):
                done.append(c.name)
        return done

    def _disrupt(self, c: candidates.Candidate, node_obj: dict[str, Any]) -> bool:
        taints = [dict(t) for t in ((node_obj.get("spec") or {}).get("taints") or [])]
        if not any(t.get("key") == labels.TAINT_DISRUPTED for t in taints):
            taints.append(dict(DISRUPTED_TAINT))
            try:
                node_obj = self.cluster.patch("Node", c.name, {"spec": {"taints": taints}})
            except kube_errors.NotFound:
                return False
        try:
            claim_obj = self.cluster.get("NodeClaim", c.nodeclaim.name)
            self.cluster.delete("NodeClaim", c.nodeclaim.name)
        except kube_errors.NotFound:
            return False
        message = f"Disrupting Node: {emptiness.REASON}/Delete"
        self.recorder.normal(node_obj, "DisruptionTerminating", message)
        self.recorder.normal(claim_obj, "DisruptionTerminating", message)
        log.info("disrupting empty node %s (nodeclaim %s)", c.name, c.nodeclaim.name)
        if self.metrics is not None:
            self.metrics.nodeclaims_disrupted.labels(reason="empty", nodepool=c.nodepool.name).inc()
        return True

    def _report_unconsolidatable(self, node_obj: dict[str, Any], claim_obj: dict[str, Any], why: str) -> None:
        name = interface.name_of(node_obj)
        if self._unconsolidatable.get(name) == why:
            return
        self._unconsolidatable[name] = why
        self.recorder.normal(node_obj, "Unconsolidatable", why)
        self.recorder.normal(claim_obj, "Unconsolidatable", why)

    def _pdbs(self, pod_dicts: list[dict[str, Any]]) -> list[candidates.Pdb]:
        out: list[candidates.Pdb] = []
        by_ns: dict[str, list[dict[str, Any]]] = {}
        for p in pod_dicts:
            by_ns.setdefault(interface.namespace_of(p) or "default", []).append(p)

        def lookup(namespace: str, ref: Any) -> dict[str, Any] | None:
            try:
                return self.cluster.get(str(ref.get("kind", "")), str(ref.get("name", "")), namespace)
            except kube_errors.KubeError:
                return None

        for obj in self.cluster.list("PodDisruptionBudget"):
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


T = TypeVar("T")


def _parse(parser: Callable[[dict[str, Any]], T], obj: dict[str, Any]) -> T | None:
    try:
        return parser(obj)
    except api_errors.ValidationError as exc:
        log.warning("disruption: skipping unreadable %s %s: %s", obj.get("kind"), interface.name_of(obj), exc)
        return None


def new(
    cluster: interface.Cluster,
    clock: clock_mod.Clock,
    recorder: events.EventRecorder | None = None,
    metrics: metrics_mod.Metrics | None = None,
) -> DisruptionController:
    return DisruptionController(cluster, clock, recorder, metrics)


def register(manager: runtime.Manager, disruption: DisruptionController) -> None:
    """Register the controller on ``manager`` and queue its first run now."""
    manager.register(disruption.controller())
    manager.enqueue(NAME, KEY)
