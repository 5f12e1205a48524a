"""The simulated volume binder and provisioner: PersistentVolumeClaims get zonal PersistentVolumes.

A stand-in, in ``karpy simulate``, for the PV controller and a CSI provisioner (such as the EBS or
Azure Disk drivers), enough to show volume topology end to end. What a caller may rely on:

* An unbound PVC (no ``spec.volumeName``) whose StorageClass has ``volumeBindingMode: Immediate``
  (the default) is provisioned at once: a PV in the first zone its class allows
  (``allowedTopologies``, values sorted), or else in the zone of the first node by name that has
  one (no zone at all: the PV has no node affinity).
* An unbound PVC of a ``WaitForFirstConsumer`` class is provisioned when a pod that mounts it is
  bound to a node: the PV is pinned to that node's zone (and to the node's values of any other
  ``allowedTopologies`` key), and the PVC gets ``volume.kubernetes.io/selected-node``.
* Provisioning creates PV ``pvc-<claim uid>`` (capacity = the claim's storage request, the
  claim's access modes and class, ``claimRef``, ``nodeAffinity.required`` on
  ``topology.kubernetes.io/zone``), and binds: the PVC gets ``spec.volumeName``, the
  ``pv.kubernetes.io/bind-completed: "yes"`` annotation and ``status.phase: Bound``; the PV
  ``status.phase: Bound``.
* PVCs without a storage class, or whose class does not exist, are left alone (a pre-created PV
  must be bound in the scenario itself). Deterministic; nothing else is simulated (no resizing,
  no attach limits, no reclaim).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from karpy.api import labels as wk
from karpy.controllers import runtime
from karpy.kube import errors, interface
from karpy.scheduling import volumetopology

log = logging.getLogger("karpy.simulator.volumes")

CONTROLLER = "simulator.volumes"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


class VolumeBinder:
    """See the module docstring. Call :meth:`register` with the Manager."""

    def __init__(self, cluster: interface.Cluster) -> None:
        self.cluster = cluster
        self.provisioned = 0

    def controller(self) -> runtime.Controller:
        return runtime.Controller(CONTROLLER, self.reconcile, watches=[
            ("PersistentVolumeClaim", self._map_claim), ("Pod", runtime.only(self._map_pod))])

    def register(self, manager: runtime.Manager) -> None:
        manager.register(self.controller())

    @staticmethod
    def _map_claim(event: str, obj: dict[str, Any]) -> Iterable[str]:
        if event == interface.DELETED or (obj.get("spec") or {}).get("volumeName"):
            return ()
        return (f"claim/{interface.namespace_of(obj)}/{interface.name_of(obj)}",)

    @staticmethod
    def _map_pod(event: str, obj: dict[str, Any]) -> Iterable[str]:
        spec = obj.get("spec") or {}
        if event == interface.DELETED or not spec.get("nodeName"):
            return ()
        if not any((v or {}).get("persistentVolumeClaim") for v in spec.get("volumes") or ()):
            return ()
        return (f"pod/{interface.namespace_of(obj)}/{interface.name_of(obj)}",)

    # ------------------------------------------------------------------------------ reconcile

    def reconcile(self, key: str) -> float | None:
        kind, namespace, name = key.split("/", 2)
        if kind == "claim":
            self._immediate(namespace, name)
        else:
            self._for_pod(namespace, name)
        return None

    def _immediate(self, namespace: str, name: str) -> None:
        pvc = self._get("PersistentVolumeClaim", name, namespace)
        storage_class = self._class_of(pvc) if pvc is not None else None
        if pvc is None or storage_class is None or (pvc.get("spec") or {}).get("volumeName"):
            return
        if volumetopology.binding_mode(storage_class) == volumetopology.WAIT_FOR_FIRST_CONSUMER:
            return
        terms = volumetopology.class_terms(storage_class)
        topology: dict[str, str] = {}
        for e in terms[0] if terms else ():
            if e.values:
                topology[e.key] = sorted(e.values)[0]
        if wk.ZONE not in topology:
            zones = sorted(str(interface.labels_of(n).get(wk.ZONE)) for n in self.cluster.list("Node")
                           if interface.labels_of(n).get(wk.ZONE))
            if zones:
                topology[wk.ZONE] = zones[0]
        self._provision(pvc, storage_class, topology, node_name="")

    def _for_pod(self, namespace: str, name: str) -> None:
        p = self._get("Pod", name, namespace)
        node_name = str(((p or {}).get("spec") or {}).get("nodeName") or "")
        if p is None or not node_name:
            return
        node = self._get("Node", node_name, "")
        node_labels = interface.labels_of(node) if node is not None else {}
        for v in (p.get("spec") or {}).get("volumes") or ():
            claim_name = ((v or {}).get("persistentVolumeClaim") or {}).get("claimName")
            pvc = self._get("PersistentVolumeClaim", str(claim_name), namespace) if claim_name else None
            storage_class = self._class_of(pvc) if pvc is not None else None
            if pvc is None or storage_class is None or (pvc.get("spec") or {}).get("volumeName"):
                continue
            if volumetopology.binding_mode(storage_class) != volumetopology.WAIT_FOR_FIRST_CONSUMER:
                continue
            keys = {e.key for t in volumetopology.class_terms(storage_class) for e in t} | {wk.ZONE}
            topology = {k: str(node_labels[k]) for k in sorted(keys) if k in node_labels}
            self._provision(pvc, storage_class, topology, node_name=node_name)

    # ------------------------------------------------------------------------------- binding

    def _provision(self, pvc: Mapping[str, Any], storage_class: Mapping[str, Any], topology: Mapping[str, str],
                   *, node_name: str) -> None:
        namespace, claim_name = interface.namespace_of(pvc), interface.name_of(pvc)
        spec = pvc.get("spec") or {}
        pv_name = f"pvc-{interface.uid_of(pvc) or namespace + '-' + claim_name}"
        pv_spec: dict[str, Any] = {
            "capacity": {"storage": str(((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi"))},
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "storageClassName": interface.name_of(storage_class),
            "persistentVolumeReclaimPolicy": str(storage_class.get("reclaimPolicy") or "Delete"),
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace,
                         "name": claim_name, "uid": interface.uid_of(pvc)},
            "csi": {"driver": str(storage_class.get("provisioner") or "simulated.csi.karpy.io"),
                    "volumeHandle": pv_name},
        }
        if topology:
            pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": k, "operator": "In", "values": [v]} for k, v in sorted(topology.items())]}]}}
        with contextlib.suppress(errors.AlreadyExists):
            self.cluster.create({"apiVersion": "v1", "kind": "PersistentVolume",
                                 "metadata": {"name": pv_name}, "spec": pv_spec})
        annotations = {volumetopology.BIND_COMPLETED: "yes"}
        if node_name:
            annotations[SELECTED_NODE] = node_name
        try:
            self.cluster.patch("PersistentVolumeClaim", claim_name,
                               {"metadata": {"annotations": annotations}, "spec": {"volumeName": pv_name}},
                               namespace)
            self.cluster.patch_status("PersistentVolumeClaim", claim_name,
                                      {"status": {"phase": "Bound", "accessModes": pv_spec["accessModes"],
                                                  "capacity": pv_spec["capacity"]}}, namespace)
            self.cluster.patch_status("PersistentVolume", pv_name, {"status": {"phase": "Bound"}})
        except errors.NotFound:
            return
        self.provisioned += 1
        log.info("volumes: bound %s/%s to %s (%s)", namespace, claim_name, pv_name,
                 ", ".join(f"{k}={v}" for k, v in sorted(topology.items())) or "no topology")

    def _class_of(self, pvc: Mapping[str, Any]) -> dict[str, Any] | None:
        name = (pvc.get("spec") or {}).get("storageClassName")
        return self._get("StorageClass", str(name), "") if name else None

    def _get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            return self.cluster.get(kind, name, namespace)
        except errors.NotFound:
            return None
