"""The workloads with a spot share (``karpy.io/max-spot-percent``), kept from watches.

:func:`karpy.provisioning.spot_share.read` lists every Deployment and StatefulSet of the cluster;
the provisioner asks for them on every scheduling run and the disruption controller on every
pass, so with thousands of Deployments each run read them all. :class:`SpotWorkloads` watches the
two kinds and keeps only the annotated objects (any value: a bad one is reported as before), so a
run costs what is annotated, and a change costs one look-up. ReplicaSets (which Deployment a pod
belongs to) are listed only while some Deployment is annotated, as ``read`` does.

The annotated workloads are handed to :class:`karpy.provisioning.spot_share.Workloads` in
namespace/name order (a real API server's list order), so what it reports (an invalid value's
warning) comes in that order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from karpy.kube import interface
from karpy.provisioning import spot_share


class SpotWorkloads:
    """See the module docstring. :meth:`start` before :meth:`read` (else it reads the cluster)."""

    def __init__(self, cluster: interface.Cluster) -> None:
        self.cluster = cluster
        self._annotated: dict[str, dict[tuple[str, str], Mapping[str, Any]]] = {k: {} for k in spot_share.KINDS}
        self._unsubscribe: list[interface.Unsubscribe] = []

    def start(self) -> SpotWorkloads:
        """Watch the annotated kinds and load what exists; idempotent."""
        if self._unsubscribe:
            return self
        for kind in spot_share.KINDS:
            self._unsubscribe.append(self.cluster.watch(kind, self._handler(kind)))
            for obj in self.cluster.list(kind):
                self.observe(kind, interface.ADDED, obj)
        return self

    def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()

    def _handler(self, kind: str) -> interface.WatchHandler:
        def handle(event: str, obj: dict[str, Any]) -> None:
            self.observe(kind, event, obj)

        return handle

    def observe(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        """Record one watch event of a Deployment or StatefulSet."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        if event != interface.DELETED and (meta.get("annotations") or {}).get(spot_share.ANNOTATION) is not None:
            self._annotated[kind][key] = obj
        else:
            self._annotated[kind].pop(key, None)

    def read(self) -> spot_share.Workloads:
        """What :func:`karpy.provisioning.spot_share.read` finds, from the annotated objects only.
        Raises what the cluster's ``list`` raises (ReplicaSets, when a Deployment is annotated)."""
        if not self._unsubscribe:
            return spot_share.read(self.cluster)

        def replicasets() -> Iterator[Mapping[str, Any]]:
            yield from self.cluster.list("ReplicaSet")

        deployments, statefulsets = (
            [objs[k] for k in sorted(objs)] for objs in (self._annotated[kind] for kind in spot_share.KINDS))
        return spot_share.Workloads(deployments, statefulsets, replicasets())
