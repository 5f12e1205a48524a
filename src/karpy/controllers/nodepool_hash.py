"""``nodepool.hash``: the NodePool's own ``karpenter.sh/nodepool-hash`` annotations, as Karpenter keeps them.

Karpenter's NodePool hash controller (``pkg/controllers/nodepool/hash/controller.go``) stamps every
NodePool with ``karpenter.sh/nodepool-hash`` (the hash of its template's static drift fields, the
value its NodeClaims carry) and ``karpenter.sh/nodepool-hash-version``, and re-stamps them when the
template changes. Tools and dashboards read them to see which NodeClaims are of an older template.
This controller writes both with a metadata merge patch, only when they differ from
:meth:`karpy.api.nodepool.NodePool.hash` and :data:`karpy.api.nodepool.HASH_VERSION` (the hash covers
the template only, so its own write changes nothing and wakes it once). A NodePool that does not
parse is left alone (the provisioner reports it). NodeClaims stamped by another hash version are
re-stamped by the disruption controller's drift marking, as before.
"""

from __future__ import annotations

import logging
from typing import Any

from karpy.api import errors as api_errors
from karpy.api import labels as wk
from karpy.api import nodepool as nodepool_mod
from karpy.controllers import runtime
from karpy.kube import errors as kube_errors
from karpy.kube import interface

log = logging.getLogger("karpy.controllers.nodepool_hash")

NAME = "nodepool.hash"


class NodePoolHash:
    """See the module docstring."""

    def __init__(self, cluster: interface.Cluster) -> None:
        self.cluster = cluster
        self.writes = 0

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [("NodePool", self._map)])

    @staticmethod
    def _map(event: str, obj: dict[str, Any]) -> list[str]:
        return [] if event == interface.DELETED else [interface.name_of(obj)]

    def wanted(self, obj: dict[str, Any]) -> dict[str, str] | None:
        """The two annotations NodePool ``obj`` should carry (``None`` when it does not parse)."""
        try:
            pool = nodepool_mod.NodePool.from_manifest(obj)
        except (api_errors.ValidationError, ValueError):
            return None
        return {wk.NODEPOOL_HASH: pool.hash(), wk.NODEPOOL_HASH_VERSION: nodepool_mod.HASH_VERSION}

    def reconcile(self, key: str) -> float | None:
        try:
            obj = self.cluster.get("NodePool", key)
        except kube_errors.NotFound:
            return None
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None
        want = self.wanted(obj)
        if want is None:
            return None
        have = interface.annotations_of(obj)
        if all(have.get(k) == v for k, v in want.items()):
            return None
        self.cluster.patch("NodePool", key, {"metadata": {"annotations": want}})
        self.writes += 1
        log.debug("nodepool.hash: NodePool %s annotated with hash %s", key, want[wk.NODEPOOL_HASH])
        return None


def register(manager: runtime.Manager, cluster: interface.Cluster) -> NodePoolHash:
    """Register the controller and queue every NodePool that exists."""
    ctl = NodePoolHash(cluster)
    manager.register(ctl.controller())
    for obj in cluster.list("NodePool"):
        manager.enqueue(NAME, interface.name_of(obj))
    return ctl
