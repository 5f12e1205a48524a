"""The simulated CSI node plugins: each Node gets its CSINode with the attach limits of its type.

A stand-in, in ``karpy simulate``, for the node side of CSI drivers (the EBS or Azure Disk driver's
node plugin registering with the kubelet): when a Node appears, a ``storage.k8s.io/v1`` CSINode of the
same name is created, owned by the Node, with one ``spec.drivers`` entry per driver its instance type
names in ``volume_limits`` (``nodeID`` the node name, ``allocatable.count`` the limit; a ``*`` entry,
"any driver", is left out: a CSINode lists real drivers). The simulated kube-scheduler and karpy's
provisioner read these counts, as kube-scheduler's NodeVolumeLimits plugin and Karpenter's state do.
A Node whose type is unknown, or names no driver, gets no CSINode. The CSINode of a deleted Node is
deleted with it. Deterministic.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from karpy.api import labels
from karpy.cloudprovider import instancetype
from karpy.controllers import runtime
from karpy.kube import errors, interface

log = logging.getLogger("karpy.simulator.csinodes")

NAME = "simulator.csinodes"


def csinode(node: Mapping[str, Any], limits: Mapping[str, int]) -> dict[str, Any] | None:
    """The CSINode of ``node`` for the driver limits ``limits`` (None: no named driver)."""
    name = interface.name_of(node)
    drivers = [{"name": d, "nodeID": name, "topologyKeys": [labels.ZONE], "allocatable": {"count": n}}
               for d, n in sorted(limits.items()) if d != "*"]
    if not drivers:
        return None
    uid = (node.get("metadata") or {}).get("uid")
    meta: dict[str, Any] = {"name": name}
    if uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": meta, "spec": {"drivers": drivers}}


class CSINodePublisher:
    """See the module docstring. ``types`` lists the cloud's instance types (asked once, on first need)."""

    def __init__(self, cluster: interface.Cluster,
                 types: Callable[[], Sequence[instancetype.InstanceType]]) -> None:
        self.cluster = cluster
        self._types = types
        self._by_name: dict[str, instancetype.InstanceType] | None = None

    def register(self, manager: runtime.Manager) -> None:
        manager.register(runtime.Controller(NAME, self.reconcile, watches=[("Node", self._map_node)]))

    @staticmethod
    def _map_node(event: str, obj: dict[str, Any]) -> Iterable[str]:
        # a Node registers with its instance-type label: only its arrival and its removal matter
        return (interface.name_of(obj),) if event in (interface.ADDED, interface.DELETED) else ()

    def _limits(self, type_name: str) -> Mapping[str, int]:
        if self._by_name is None:
            try:
                self._by_name = {t.name: t for t in self._types()}
            except Exception as exc:  # a cloud that cannot list types: nodes get no CSINode
                log.warning("csinodes: cannot list instance types: %s", exc)
                self._by_name = {}
        t = self._by_name.get(type_name)
        return t.volume_limits if t is not None else {}

    def reconcile(self, name: str) -> float | None:
        try:
            node = self.cluster.get("Node", name)
        except errors.NotFound:
            node = None
        if node is None or (node.get("metadata") or {}).get("deletionTimestamp"):
            with contextlib.suppress(errors.NotFound):
                self.cluster.delete("CSINode", name)
            return None
        type_name = str(((node.get("metadata") or {}).get("labels") or {}).get(labels.INSTANCE_TYPE) or "")
        obj = csinode(node, self._limits(type_name))
        if obj is None:
            return None
        with contextlib.suppress(errors.AlreadyExists):
            self.cluster.create(obj)
        return None
