"""The simulated attach/detach controller: VolumeAttachments for the CSI volumes pods use on a node.

A stand-in, in ``karpy simulate``, for kube-controller-manager's attach/detach controller and a CSI
attacher, so that node termination waits for volumes to detach as on a real cluster. What a caller may
rely on:

* A pod bound to a node (``spec.nodeName``) that is not Succeeded/Failed, and mounts a
  PersistentVolumeClaim bound to a CSI PersistentVolume (``spec.csi``), has that volume attached to the
  node: a ``storage.k8s.io/v1`` VolumeAttachment named ``csi-<sha256 of volume, attacher and node>``
  (``spec.attacher`` = the CSI driver, ``spec.nodeName``, ``spec.source.persistentVolumeName``,
  ``status.attached: true``) is created at once. Terminating pods still hold their volumes.
* Once no such pod on the node uses the volume, it detaches :data:`DETACH_SECONDS` later (the
  VolumeAttachment is deleted); the VolumeAttachments of a deleted Node are deleted at once.
* Nothing else: no attach limits, no failures, no multi-attach errors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from karpy import clock as clock_mod
from karpy.controllers import runtime
from karpy.kube import errors, interface

NAME = "simulator.attach-detach"
DETACH_SECONDS = 10.0
"""How long a CSI volume takes to detach once no pod on the node uses it."""
TERMINAL = ("Succeeded", "Failed")


def attachment_name(pv: str, attacher: str, node: str) -> str:
    """The name the attach/detach controller gives a VolumeAttachment."""
    return "csi-" + hashlib.sha256(f"{pv}{attacher}{node}".encode()).hexdigest()


def _claims(pod: dict[str, Any]) -> list[str]:
    return [str(c) for v in (pod.get("spec") or {}).get("volumes") or ()
            if (c := ((v or {}).get("persistentVolumeClaim") or {}).get("claimName"))]


class AttachDetachController:
    """See the module docstring. Register with :meth:`register`."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock) -> None:
        self.cluster = cluster
        self.clock = clock
        self._unused_since: dict[tuple[str, str], float] = {}
        """(node, VolumeAttachment name) -> when no pod of the node used its volume any more."""

    def register(self, manager: runtime.Manager) -> None:
        manager.register(runtime.Controller(NAME, self.reconcile, [
            ("Pod", self._map_pod), ("PersistentVolumeClaim", self._map_claim), ("Node", self._map_node)]))

    @staticmethod
    def _map_pod(_event: str, obj: dict[str, Any]) -> Iterable[str]:
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        return (node,) if node and _claims(obj) else ()

    def _map_claim(self, _event: str, obj: dict[str, Any]) -> Iterable[str]:
        if not (obj.get("spec") or {}).get("volumeName"):
            return ()
        ns, name = interface.namespace_of(obj), interface.name_of(obj)
        return sorted({str(p["spec"]["nodeName"]) for p in self.cluster.list("Pod", ns)
                       if (p.get("spec") or {}).get("nodeName") and name in _claims(p)})

    @staticmethod
    def _map_node(event: str, obj: dict[str, Any]) -> Iterable[str]:
        return (interface.name_of(obj),) if event == interface.DELETED else ()

    def _wanted(self, node: str) -> dict[str, dict[str, Any]]:
        """VolumeAttachment name -> the one the node's pods need now."""
        out: dict[str, dict[str, Any]] = {}
        for p in self.cluster.list("Pod", field_selector=f"spec.nodeName={node}"):
            if (p.get("status") or {}).get("phase") in TERMINAL:
                continue
            for claim in _claims(p):
                pv_name = self._volume_of(interface.namespace_of(p), claim)
                pv = self._get("PersistentVolume", pv_name) if pv_name else None
                driver = (((pv or {}).get("spec") or {}).get("csi") or {}).get("driver")
                if pv is None or not driver:
                    continue
                name = attachment_name(pv_name, str(driver), node)
                out[name] = {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                             "metadata": {"name": name},
                             "spec": {"attacher": str(driver), "nodeName": node,
                                      "source": {"persistentVolumeName": pv_name}},
                             "status": {"attached": True}}
        return out

    def _volume_of(self, namespace: str, claim: str) -> str:
        pvc = self._get("PersistentVolumeClaim", claim, namespace)
        return str(((pvc or {}).get("spec") or {}).get("volumeName") or "")

    def _get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        try:
            return self.cluster.get(kind, name, namespace)
        except errors.NotFound:
            return None

    def reconcile(self, node: str) -> float | None:
        now = self.clock.now()
        gone = self._get("Node", node) is None
        wanted = {} if gone else self._wanted(node)
        have = {interface.name_of(va): va for va in self.cluster.list("VolumeAttachment")
                if (va.get("spec") or {}).get("nodeName") == node}
        for name, va in wanted.items():
            self._unused_since.pop((node, name), None)
            if name not in have:
                try:
                    self.cluster.create(va)
                except errors.AlreadyExists:
                    continue
        due: float | None = None
        for name in sorted(set(have) - set(wanted)):
            since = self._unused_since.setdefault((node, name), now)
            if gone or now - since >= DETACH_SECONDS:
                self._unused_since.pop((node, name), None)
                try:
                    self.cluster.delete("VolumeAttachment", name)
                except errors.NotFound:
                    continue
            else:
                left = since + DETACH_SECONDS - now
                due = left if due is None else min(due, left)
        return due
