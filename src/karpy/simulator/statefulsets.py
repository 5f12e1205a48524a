"""The simulated StatefulSet controller: ordinal pods and their PersistentVolumeClaims.

A stand-in, in ``karpy simulate``, for kube-controller-manager's StatefulSet controller, with
``podManagementPolicy: Parallel`` semantics whatever the spec says (every missing ordinal is created at
once: enough for capacity questions). What a caller may rely on:

* For ``spec.replicas`` = N, pods ``<name>-0`` .. ``<name>-(N-1)`` exist, controlled by the StatefulSet,
  with the template's labels plus ``statefulset.kubernetes.io/pod-name`` and
  ``apps.kubernetes.io/pod-index``; a missing or terminated ordinal is created again.
* Each ``spec.volumeClaimTemplates`` entry ``t`` gives ordinal ``i`` the PVC ``<t>-<name>-<i>`` (the
  template's spec; labels the selector's), created before the pod and kept when it is scaled down
  (``persistentVolumeClaimRetentionPolicy: Retain``, the default); the pod mounts it as volume ``<t>``
  (replacing a template volume of that name).
* Scaling down deletes the highest ordinals first. ``status.replicas`` / ``readyReplicas`` follow.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping
from typing import Any

from karpy.controllers import runtime
from karpy.kube import errors, interface
from karpy.simulator import owned

NAME = "simulator.statefulset"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


class StatefulSetController:
    """See the module docstring. Call :meth:`register` with the Manager."""

    def __init__(self, cluster: interface.Cluster) -> None:
        self.cluster = cluster

    def register(self, manager: runtime.Manager) -> None:
        manager.register(runtime.Controller(NAME, self.reconcile, watches=[
            ("StatefulSet", runtime.by_name), ("Pod", runtime.only(owned.owner_mapper("StatefulSet")))]))

    def reconcile(self, key: str) -> float | None:
        ns, name = owned.split_key(key)
        try:
            sts = self.cluster.get("StatefulSet", name, ns)
        except errors.NotFound:
            return None  # the garbage collector deletes its pods
        if owned.is_deleting(sts):
            return None
        pods = {p["metadata"]["name"]: p for p in self.cluster.list("Pod", ns) if owned.is_controlled_by(p, sts)}
        want = owned.spec_replicas(sts)
        for pod_name, p in sorted(pods.items()):
            ordinal = _ordinal(name, pod_name)
            if ordinal is None or ordinal >= want:
                if not owned.is_deleting(p):
                    owned.delete_quietly(self.cluster, "Pod", pod_name, ns)
            elif not owned.is_active(p) and not owned.is_deleting(p):
                owned.delete_quietly(self.cluster, "Pod", pod_name, ns)  # terminated: made again next pass
        for i in range(want):
            if f"{name}-{i}" not in pods:
                self._create(sts, ns, i)
        kept = [p for n, p in pods.items() if (o := _ordinal(name, n)) is not None and o < want and owned.is_active(p)]
        owned.update_status_if_changed(self.cluster, sts, {
            "replicas": len(kept), "readyReplicas": sum(1 for p in kept if owned.is_pod_ready(p)),
            "availableReplicas": sum(1 for p in kept if owned.is_pod_ready(p)),
            "observedGeneration": sts.get("metadata", {}).get("generation", 0)})
        return None

    def _create(self, sts: Mapping[str, Any], ns: str, i: int) -> None:
        name = sts["metadata"]["name"]
        spec = sts.get("spec") or {}
        template = spec.get("template") or {}
        pod = owned.pod_from_template(sts, f"{name}-{i}", template,
                                      {POD_NAME_LABEL: f"{name}-{i}", POD_INDEX_LABEL: str(i)})
        volumes = [v for v in pod["spec"].get("volumes") or ()]
        selector_labels = dict((spec.get("selector") or {}).get("matchLabels") or {})
        for tmpl in spec.get("volumeClaimTemplates") or ():
            claim_tmpl = str((tmpl.get("metadata") or {}).get("name") or "")
            claim = f"{claim_tmpl}-{name}-{i}"
            with contextlib.suppress(errors.AlreadyExists):  # kept from an earlier pod of this ordinal
                self.cluster.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                     "metadata": {"name": claim, "namespace": ns, "labels": selector_labels},
                                     "spec": copy.deepcopy(dict(tmpl.get("spec") or {}))})
            volumes = [v for v in volumes if v.get("name") != claim_tmpl]
            volumes.append({"name": claim_tmpl, "persistentVolumeClaim": {"claimName": claim}})
        if volumes:
            pod["spec"]["volumes"] = volumes
        with contextlib.suppress(errors.AlreadyExists):
            self.cluster.create(pod)


def _ordinal(name: str, pod_name: str) -> int | None:
    prefix, _, tail = pod_name.rpartition("-")
    return int(tail) if prefix == name and tail.isdigit() else None
