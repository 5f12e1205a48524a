"""``nodepool.counter``: a NodePool's ``status.resources`` and ``status.nodes``, as Karpenter keeps them.

``kubectl get nodepools`` reads its Nodes column from ``status.nodes`` and, with ``-o wide``, CPU and
Memory from ``status.resources``; dashboards read the same fields. For every NodePool this controller
writes, through the status subresource and only when they change:

* ``status.resources``: the summed ``status.capacity`` of the pool's NodeClaims (launched ones; an
  unlaunched claim has no capacity yet) with Karpenter's base keys ``cpu``, ``memory``, ``pods``,
  ``ephemeral-storage`` and ``nodes`` always present (``0`` when none), ``nodes`` being the number
  of NodeClaims;
* ``status.nodes``: that number of NodeClaims.

Once registered, the sums are kept per NodePool and only NodeClaims with an event since the last
count are read again (no walk over every NodeClaim per count). Changes of NodeClaims are
coalesced: a pool is recounted at most :data:`INTERVAL` seconds after the first change
(Karpenter recounts every 5 s), so a burst of launches costs one status write. A NodePool whose
counts were overwritten by someone else is recounted at once; its own writes do not wake it (nor
the provisioner, which ignores status-only NodePool changes).
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
        self._changed: set[str] = set()
        """NodeClaims with an event since the sums were last brought up to date."""
        self._all = True
        """The sums are to be built from every NodeClaim (nothing counted yet)."""
        self._claims: dict[str, tuple[str, dict[str, int]]] = {}
        """NodeClaim -> (its NodePool, its capacity) as counted in the sums."""
        self._sums: dict[str, dict[str, int]] = {}
        """NodePool -> resource -> summed capacity of its claims."""
        self._having: dict[str, dict[str, int]] = {}
        """NodePool -> resource -> how many of its claims list that resource."""
        self._count: dict[str, int] = {}

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
        self._changed.add(interface.name_of(obj))
        pool = interface.labels_of(obj).get(wk.NODEPOOL)
        if pool and self.manager is not None:
            self.manager.enqueue(NAME, pool, INTERVAL)  # coalesced: keeps the earliest due time
        return []

    def counts(self, pool: str) -> tuple[dict[str, int], int]:
        """(resources in milli-units, number of NodeClaims) of NodePool ``pool`` now.

        From per-NodePool sums that re-read only the NodeClaims with an event since the last count:
        the counter must be registered (:func:`register`), its NodeClaim watch feeding it."""
        if self.manager is None:
            raise RuntimeError(f"NodePoolCounter.counts({pool!r}): the counter is not registered, so no NodeClaim "
                               "watch keeps its sums (call nodepool_counter.register first)")
        self._update()
        total: dict[str, int] = dict.fromkeys(BASE_RESOURCES, 0)
        total.update(self._sums.get(pool, {}))
        count = self._count.get(pool, 0)
        total[NODES] = count * ONE
        return total, count

    def _update(self) -> None:
        if self._all:
            self._all = False
            self._changed.clear()
            self._claims.clear()
            self._sums.clear()
            self._having.clear()
            self._count.clear()
            for claim in self.state.nodeclaims():
                self._add(claim.name, claim.nodepool_name, claim.status.capacity)
            return
        changed, self._changed = self._changed, set()
        for name in changed:
            counted = self._claims.pop(name, None)
            if counted is not None:
                self._subtract(*counted)
            current = self.state.nodeclaim(name)
            if current is not None:
                self._add(name, current.nodepool_name, current.status.capacity)

    def _add(self, name: str, pool: str | None, capacity: dict[str, int]) -> None:
        if not pool:
            return
        self._claims[name] = (pool, capacity)
        self._count[pool] = self._count.get(pool, 0) + 1
        sums, having = self._sums.setdefault(pool, {}), self._having.setdefault(pool, {})
        for k, v in capacity.items():
            sums[k] = sums.get(k, 0) + v
            having[k] = having.get(k, 0) + 1

    def _subtract(self, pool: str, capacity: dict[str, int]) -> None:
        self._count[pool] -= 1
        sums, having = self._sums[pool], self._having[pool]
        for k, v in capacity.items():
            sums[k] -= v
            having[k] -= 1
            if not having[k]:  # no claim lists it any more: gone from the sum, as from a fresh walk
                del having[k], sums[k]

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
