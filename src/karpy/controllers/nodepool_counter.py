"""``nodepool.counter``: a NodePool's ``status.resources`` and ``status.nodes``, as Karpenter keeps them.

``kubectl get nodepools`` reads its Nodes column from ``status.nodes`` and, with ``-o wide``, CPU and
Memory from ``status.resources``; dashboards read the same fields. For every NodePool this controller
writes, through the status subresource and only when they change:

* ``status.resources``: the summed ``status.capacity`` of the pool's NodeClaims (launched ones; an
  unlaunched claim has no capacity yet) with Karpenter's base keys ``cpu``, ``memory``, ``pods``,
  ``ephemeral-storage`` and ``nodes`` always present (``0`` when none), ``nodes`` being the number
  of NodeClaims;
* ``status.nodes``: that number of NodeClaims.

Changes of NodeClaims are coalesced: a pool is recounted at most :data:`INTERVAL` seconds after the
first change (Karpenter recounts every 5 s), so a burst of launches costs one status write. A
NodePool whose counts were overwritten by someone else is recounted at once; its own writes do not
wake it (nor the provisioner, which ignores status-only NodePool changes).
"""

from __future__ import annotations

import logging
from typing import Any

from karpy.api import labels as wk
from karpy.api import quantity
from karpy.controllers import runtime, state
from karpy.kube import errors as kube_errors
from karpy.kube import interface

log = logging.getLogger("karpy.controllers.nodepool_counter")

NAME = "nodepool.counter"
INTERVAL = 5.0
NODES = "nodes"
BASE_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage", NODES)
ONE = 1000
"""One unit in milli-units (one node)."""


class NodePoolCounter:
    """See the module docstring."""

    def __init__(self, cluster: interface.Cluster, cluster_state: state.ClusterState) -> None:
        self.cluster = cluster
        self.state = cluster_state
        self.manager: runtime.Manager | None = None
        self._written: dict[str, tuple[Any, Any]] = {}
        """NodePool -> the (nodes, resources) this controller last wrote or found right."""

    def controller(self) -> runtime.Controller:
        return runtime.Controller(name=NAME, reconcile=self.reconcile,
                                  watches=[("NodePool", self._on_nodepool), ("NodeClaim", self._on_nodeclaim)])

    def _on_nodepool(self, event: str, obj: dict[str, Any]) -> list[str]:
        """A new NodePool is counted; so is one whose counts someone else overwrote."""
        name = interface.name_of(obj)
        if event == interface.DELETED:
            self._written.pop(name, None)
            return []
        status = obj.get("status") or {}
        if event == interface.ADDED or (status.get("nodes"), status.get("resources")) != self._written.get(name):
            return [name]
        return []

    def _on_nodeclaim(self, _event: str, obj: dict[str, Any]) -> list[str]:
        pool = interface.labels_of(obj).get(wk.NODEPOOL)
        if pool and self.manager is not None:
            self.manager.enqueue(NAME, pool, INTERVAL)  # coalesced: keeps the earliest due time
        return []

    def counts(self, pool: str) -> tuple[dict[str, int], int]:
        """(resources in milli-units, number of NodeClaims) of NodePool ``pool`` now."""
        total: dict[str, int] = dict.fromkeys(BASE_RESOURCES, 0)
        count = 0
        for claim in self.state.nodeclaims():
            if claim.nodepool_name != pool:
                continue
            count += 1
            total = quantity.add(total, claim.status.capacity)
        total[NODES] = count * ONE
        return total, count

    def reconcile(self, key: str) -> float | None:
        obj = self.state.raw("NodePool", key)
        if obj is None or interface.is_terminating(obj):
            return None
        resources, count = self.counts(key)
        status = obj.get("status") or {}
        wanted = quantity.format_list(resources)
        self._written[key] = (count, wanted)
        if status.get("nodes") == count and status.get("resources") == wanted:
            return None
        try:
            self.cluster.patch_status("NodePool", key, {"status": {"resources": wanted, "nodes": count}})
        except kube_errors.NotFound:
            self._written.pop(key, None)
        return None


def register(manager: runtime.Manager, counter: NodePoolCounter) -> None:
    """Register the counter and queue a first count of every NodePool that exists."""
    counter.manager = manager
    manager.register(counter.controller())
    for obj in counter.state.raws("NodePool"):
        manager.enqueue(NAME, interface.name_of(obj))
