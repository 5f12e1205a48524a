"""``static.provisioning`` and ``static.deprovisioning``: a static NodePool keeps ``spec.replicas`` nodes.

Karpenter v1.14's static capacity (feature gate ``StaticCapacity``, off by default; the operator
registers this controller only when it is on). For every NodePool with ``spec.replicas`` (a *static*
NodePool, :attr:`karpy.api.nodepool.NodePool.is_static`), whatever its pods need:

* **scale up** (Karpenter's ``static.provisioning``): when the pool's running NodeClaims (not being
  deleted, not being disrupted) and those being disrupted (drift replacement under way) are fewer than
  ``replicas``, ``replicas - running`` NodeClaims are created from the pool's template
  (:func:`karpy.provisioning.static.template_claim`: the cheapest instance type the template admits),
  bounded by ``limits.nodes`` (which counts every NodeClaim of the pool, deleting ones too; "nodepool
  node limit reached" is logged when it stops a launch). Only while the NodePool's NodeClass is ready.
* **scale down** (``static.deprovisioning``): when more NodeClaims run than ``replicas``, the surplus
  is deleted (graceful: the termination controller drains them) in Karpenter's order
  (:func:`karpy.provisioning.static.scale_down_order`: not launched yet, empty, cheapest to disrupt).
* a NodeClaim deleted by anyone (expiration, interruption, a user) is replaced at once: one for one.

NodeClaims this controller created count as running until the cluster state shows them (Karpenter
reserves them in its NodePool state), so a burst of events never launches twice. Each pool is looked at
again every :data:`RESYNC` seconds. The provisioner never launches for pods into a static pool and
consolidation never removes its nodes (:mod:`karpy.disruption.consolidation`); drift replaces them one
for one (:mod:`karpy.disruption.static_drift`). ``status.nodes`` is kept by ``nodepool.counter``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels as wk
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import nodepool as nodepool_mod
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import nodeclaim_manifest, nodeclass_status, offerings, provisioner, runtime, state
from karpy.kube import errors as kube_errors
from karpy.kube import interface
from karpy.observability import logs
from karpy.observability import metrics as metrics_mod
from karpy.provisioning import static

log = logging.getLogger("karpy.controllers.static_capacity")

NAME = "static.capacity"
RESYNC = 60.0
"""Karpenter's static controllers requeue every minute."""
LIMIT_RETRY = 30.0
"""Seconds before looking again when ``limits.nodes`` stopped a launch (Karpenter: 30 s)."""
GATE = "StaticCapacity"

NodeClassHash = Callable[[nodepool_mod.NodePool], "tuple[str, str] | None"]


def _lifetime_left(claim: nodeclaim_mod.NodeClaim, now: float) -> float:
    expire = claim.spec.expire_after
    created = claim.metadata.creation_timestamp
    if expire is None or expire <= 0 or created is None:
        return 1.0
    return max(0.0, min(1.0, (expire - (now - created)) / expire))


class StaticCapacity:
    """See the module docstring."""

    def __init__(self, cluster: interface.Cluster, cluster_state: state.ClusterState,
                 cloud: cp_interface.CloudProvider, clock: clock_mod.Clock,
                 unavailable: offerings.UnavailableOfferings, metrics: metrics_mod.Metrics | None = None,
                 nodeclass_hash: NodeClassHash | None = None) -> None:
        self.cluster = cluster
        self.state = cluster_state
        self.cloud = cloud
        self.clock = clock
        self.unavailable = unavailable
        self.metrics = metrics
        self.nodeclass_hash = nodeclass_hash
        self._reserved: dict[str, set[str]] = {}
        """NodePool -> NodeClaims created here that the cluster state does not show yet."""
        self._seen: dict[str, tuple[Any, ...]] = {}
        self.created: list[str] = []
        """Every NodeClaim this controller created, in order."""
        self.deleted: list[str] = []
        """Every NodeClaim this controller deleted to scale down, in order."""

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [("NodePool", self._map_pool),
                                                         ("NodeClaim", self._map_claim)])

    def _map_pool(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        name = interface.name_of(obj)
        if event == interface.DELETED:
            self._seen.pop(name, None)
            self._reserved.pop(name, None)
            return ()
        if (obj.get("spec") or {}).get("replicas") is None:
            return ()
        seen = ((obj.get("spec") or {}).get("replicas"), (obj.get("metadata") or {}).get("generation"),
                tuple(sorted((str(c.get("type")), str(c.get("status")))
                             for c in (obj.get("status") or {}).get("conditions") or () if isinstance(c, dict))))
        if self._seen.get(name) == seen:
            return ()
        self._seen[name] = seen
        return (name,)

    def _map_claim(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        pool = interface.labels_of(obj).get(wk.NODEPOOL)
        if not pool or pool not in self._seen:
            return ()
        if event in (interface.ADDED, interface.DELETED) or interface.is_terminating(obj):
            return (pool,)
        return ()

    # ---------------------------------------------------------------------------------- reconcile

    def reconcile(self, key: str) -> float | None:
        pool = self.state.nodepool(key)
        if pool is None or not pool.is_static or pool.metadata.deletion_timestamp is not None:
            self._reserved.pop(key, None)
            return None
        claims = [c for c in self.state.nodeclaims() if c.nodepool_name == pool.name]
        names = {c.name for c in claims}
        reserved = self._reserved.setdefault(pool.name, set())
        reserved.difference_update(names)
        counts = static.count(claims, self._disrupting, len(reserved))
        down = static.scale_down_count(pool, counts.running)
        if down:
            running = [c for c in claims if c.metadata.deletion_timestamp is None and not self._disrupting(c)]
            self._scale_down(pool, running, down)
            return RESYNC
        up = static.scale_up_count(pool, counts.running, counts.pending, counts.deleting)
        if up <= 0:
            if counts.running + counts.pending < (pool.replicas or 0):
                log.info("nodepool node limit reached", extra=logs.fields(NAME, NodePool=pool.name))
                return LIMIT_RETRY
            return RESYNC
        raw = self.state.raw("NodePool", pool.name)
        if raw is None or not nodeclass_status.readiness(self.cluster, raw).ready:
            return RESYNC
        return self._scale_up(pool, raw, counts.running, up)

    def _disrupting(self, claim: nodeclaim_mod.NodeClaim) -> bool:
        """A disruption command holds this NodeClaim (its node carries ``karpenter.sh/disrupted``)."""
        node = self.state.node(claim.status.node_name) if claim.status.node_name else None
        return node is not None and static.held_by_disruption(node.taints)

    def _scale_up(self, pool: nodepool_mod.NodePool, raw: dict[str, Any], running: int, count: int) -> float:
        try:
            types = self.unavailable.apply(self.cloud.get_instance_types(pool))
        except Exception as exc:  # the cloud may fail: look again later
            log.warning("%s: cannot get instance types of NodePool %s: %s", NAME, pool.name, exc)
            return LIMIT_RETRY
        claim = static.template_claim(pool, types)
        if claim is None:
            log.warning("%s: NodePool %s: no instance type its template admits is available", NAME, pool.name)
            return LIMIT_RETRY
        log.info("provisioning nodeclaims to satisfy replica count", extra=logs.fields(
            NAME, NodePool=pool.name, current=running, desired=pool.replicas, **{"provision-count": count}))
        hash_ = self.nodeclass_hash(pool) if self.nodeclass_hash is not None else None
        pool_hash = pool.hash()
        for _ in range(count):
            manifest = nodeclaim_manifest.nodeclaim_manifest(claim, pool, raw, hash_, pool_hash)
            try:
                created = self.cluster.create(manifest)
            except kube_errors.KubeError as exc:
                log.warning("%s: cannot create a NodeClaim for NodePool %s: %s", NAME, pool.name, exc)
                return LIMIT_RETRY
            name = interface.name_of(created)
            self._reserved[pool.name].add(name)
            self.created.append(name)
            if self.metrics is not None:
                self.metrics.nodeclaims_created.labels(provisioner.CREATED_REASON, pool.name, "false").inc()
            log.info("created nodeclaim", extra=logs.fields(
                NAME, NodePool=pool.name, NodeClaim=name,
                **{"instance-types": logs.pretty_slice(claim.instance_type_names()), "price": round(claim.price, 6)}))
        return RESYNC

    def _scale_down(self, pool: nodepool_mod.NodePool, running: list[nodeclaim_mod.NodeClaim], count: int) -> None:
        now = self.clock.now()
        members = [static.Member(c.name, bool(c.status.provider_id),
                                 tuple(self.state.pods_on(c.status.node_name)) if c.status.node_name else (),
                                 _lifetime_left(c, now)) for c in sorted(running, key=lambda c: c.name)]
        chosen = static.scale_down_order(members, count, now)
        log.info("deprovisioning nodeclaims to satisfy replica count", extra=logs.fields(
            NAME, NodePool=pool.name, current=len(running), desired=pool.replicas,
            **{"deprovision-count": len(chosen)}))
        for name in chosen:
            try:
                self.cluster.delete("NodeClaim", name)
            except kube_errors.NotFound:
                continue
            except kube_errors.KubeError as exc:
                log.warning("%s: cannot delete NodeClaim %s: %s", NAME, name, exc)
                continue
            self.deleted.append(name)
            log.info("deleting nodeclaim", extra=logs.fields(NAME, NodePool=pool.name, NodeClaim=name))


def register(manager: runtime.Manager, ctl: StaticCapacity) -> StaticCapacity:
    manager.register(ctl.controller())
    for pool in ctl.state.nodepools():
        if pool.is_static:
            ctl._seen[pool.name] = ()
            manager.enqueue(NAME, pool.name)
    return ctl
