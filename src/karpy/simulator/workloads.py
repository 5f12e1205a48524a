"""Simulated Kubernetes workload controllers: Deployment -> ReplicaSet -> Pods.

These stand in for kube-controller-manager in ``karpy simulate``. They run on the same
:class:`karpy.controllers.runtime.Manager` as karpy's own controllers and talk to the cluster only
through :class:`karpy.kube.interface.Cluster`, so they behave the same on the in-memory cluster and
on anything else that implements it.

What a caller may rely on:

* :class:`ReplicaSetController` keeps ``spec.replicas`` *active* pods (not terminal, not being
  deleted) owned by each ReplicaSet (``ownerReferences[].controller: true``). Pods are created
  from ``spec.template`` named ``<replicaset>-<5 chars>`` drawn from the seeded ``random.Random``
  (Kubernetes' ``generateName`` alphabet), so the same seed gives the same names. Evicted, deleted
  and failed pods are replaced. Surplus pods are deleted in Kubernetes' scale-down order:
  unassigned before assigned, Pending before Unknown before Running, not ready before ready,
  lower ``controller.kubernetes.io/pod-deletion-cost`` first, newer before older, then by name.
  Not simulated: the "more siblings on the same node first" rank, slow-start creation batches,
  adoption of orphan pods that match the selector.
* :class:`DeploymentController` keeps one ReplicaSet per pod template, told apart by the
  ``pod-template-hash`` label (a deterministic hash of ``spec.template``), named
  ``<deployment>-<hash>``. Scaling sets the current ReplicaSet's ``spec.replicas``. A template
  change creates a new ReplicaSet with the full replica count and scales every older one to zero
  **at once** (no surge/unavailability pacing; ``strategy`` and ``paused`` are ignored). Old
  ReplicaSets at zero beyond ``revisionHistoryLimit`` (default 10) are deleted.
* Both controllers write ``status`` (replicas, readyReplicas, availableReplicas, ...) only when it
  changes. Cascading deletion (a deleted Deployment's ReplicaSets, a deleted ReplicaSet's pods) is
  the cluster's garbage collector's job (see :meth:`karpy.kube.interface.Cluster.delete`).

What they share with :mod:`karpy.simulator.daemonsets` (generated names, owner references, pods from
templates, the scale-down order) is in :mod:`karpy.simulator.owned`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from karpy.api import meta
from karpy.api import workloads as api_workloads
from karpy.controllers import runtime
from karpy.kube import errors, interface, memory
from karpy.simulator import owned as owned_mod
from karpy.simulator import owner_index, replicaset_index

POD_TEMPLATE_HASH = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
REPLICASET_CONTROLLER = "simulator.replicaset"
DEPLOYMENT_CONTROLLER = "simulator.deployment"


class ReplicaSetController:
    """Keeps each ReplicaSet's pods at ``spec.replicas``. Register with :meth:`register`.

    Once registered, the Pod watch keeps an index of each ReplicaSet's pods and running counts of
    its active, ready and fully labeled pods, so a reconcile costs the same however many pods it owns
    (scaling down still ranks every active pod).
    """

    def __init__(self, cluster: interface.Cluster, rng: random.Random) -> None:
        self.cluster = cluster
        self.rng = rng
        self._index = replicaset_index.PodIndex(owned_mod.is_active, owned_mod.is_pod_ready, owned_mod.controller_ref)
        self._owned: dict[tuple[str, str], dict[str, dict[str, Any]]] | None = None
        """(namespace, ReplicaSet name) -> pod name -> pod, fed by a watch once registered."""
        self._tallies = self._index.tallies
        self._models: dict[tuple[str, str], tuple[Any, Any, api_workloads.ReplicaSet]] = {}
        """(namespace, name) -> (the stored spec it was parsed from, uid, model)."""

    def controller(self) -> runtime.Controller:
        return runtime.Controller(
            name=REPLICASET_CONTROLLER,
            reconcile=self.reconcile,
            watches=[("ReplicaSet", runtime.by_name), ("Pod", runtime.only(owned_mod.owner_mapper("ReplicaSet")))],
        )

    def register(self, manager: runtime.Manager) -> None:
        """Register the controller; from now on its pods are found through an owner index."""
        self._owned = self._index.owned
        manager.cluster.watch("Pod", interface.Filtered(self._index.index, interface.MESSAGES_ONLY))
        for p in manager.cluster.list("Pod"):
            self._index.index(interface.ADDED, p)
        manager.register(self.controller())

    def owned_pods(self, rs: Mapping[str, Any]) -> list[dict[str, Any]]:
        md = rs.get("metadata", {})
        ns = md.get("namespace") or ""
        if self._owned is not None:  # the index: only this ReplicaSet's pods are looked at
            candidates = list(self._owned.get((ns, str(md.get("name"))), {}).values())
        else:
            candidates = self.cluster.list("Pod", ns)
        return [p for p in candidates if owned_mod.is_controlled_by(p, rs)]

    def _model(self, rs: Mapping[str, Any]) -> api_workloads.ReplicaSet:
        """The ReplicaSet's model, parsed again only when its ``spec`` or uid changed (a status write,
        which changes the resourceVersion, keeps the stored ``spec`` object: the model reads no status)."""
        md = rs.get("metadata", {})
        key = (md.get("namespace") or "", str(md.get("name")))
        spec, uid = rs.get("spec"), md.get("uid")
        hit = self._models.get(key)
        if hit is not None and hit[0] is spec and hit[1] == uid and spec is not None:
            return hit[2]
        model = api_workloads.ReplicaSet.from_manifest(rs, known=hit[2] if hit is not None else None)
        self._models[key] = (spec, uid, model)
        return model

    def reconcile(self, key: str) -> float | None:
        ns, name = owned_mod.split_key(key)
        found = self.cluster.list("ReplicaSet", ns, field_selector=f"metadata.name={name}")
        if not found:
            self._models.pop((ns, name), None)
            return None  # the cluster's garbage collector deletes the pods it owned
        rs = found[0]
        model = self._model(rs)
        if self._owned is None:  # not registered: read the pods from the cluster
            pods = self.owned_pods(rs)
            active = [p for p in pods if owned_mod.is_active(p)]
            active = active if owned_mod.is_deleting(rs) else self._scale(rs, model, ns, active, pods)
            self._write_status(rs, len(active), sum(1 for p in active if owned_mod.is_pod_ready(p)), sum(
                1 for p in active if model.selector.matches(p.get("metadata", {}).get("labels") or {})))
            return None
        rs_key = (ns, name)
        uid = str(rs.get("metadata", {}).get("uid") or "")
        active_count, _, _ = self._tallies.totals(rs_key, uid, model.selector, self._owned.get(rs_key, {}))
        if not owned_mod.is_deleting(rs) and active_count != model.replicas:
            pods = self.owned_pods(rs)
            self._scale(rs, model, ns, [p for p in pods if owned_mod.is_active(p)], pods)
        active_count, ready, labeled = self._tallies.totals(rs_key, uid, model.selector, self._owned.get(rs_key, {}))
        self._write_status(rs, active_count, ready, labeled)
        return None

    def _scale(self, rs: dict[str, Any], model: api_workloads.ReplicaSet, ns: str,
               active: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        want = model.replicas
        if len(active) < want:
            active.extend(self._create(rs, want - len(active), pods))
        elif len(active) > want:
            victims = sorted(active, key=owned_mod.deletion_rank)[: len(active) - want]
            for pod in victims:
                owned_mod.delete_quietly(self.cluster, "Pod", pod["metadata"]["name"], ns)
            gone = {id(p) for p in victims}
            active = [p for p in active if id(p) not in gone]
        return active

    def _write_status(self, rs: dict[str, Any], active: int, ready: int, labeled: int) -> None:
        owned_mod.update_status_if_changed(self.cluster, rs, {
            "replicas": active,
            "fullyLabeledReplicas": labeled,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs.get("metadata", {}).get("generation", 0),
        })

    def _create(self, rs: Mapping[str, Any], count: int,
                existing: list[dict[str, Any]]) -> list[dict[str, Any]]:
        md = rs["metadata"]
        template = rs.get("spec", {}).get("template") or {}
        taken = {p["metadata"]["name"] for p in existing}
        created: list[dict[str, Any]] = []
        for _ in range(count):
            while True:
                name = owned_mod.generate_name(md["name"], self.rng, taken)
                taken.add(name)
                try:
                    pod_obj = owned_mod.pod_from_template(rs, name, template, copy_spec=False)
                    created.append(self.cluster.create(pod_obj))
                    break
                except errors.AlreadyExists:
                    continue
        return created


# ---------------------------------------------------------------------------------------------
# Deployment


def _revision(rs: Mapping[str, Any]) -> int:
    try:
        return int((rs.get("metadata", {}).get("annotations") or {}).get(REVISION_ANNOTATION, 0))
    except (TypeError, ValueError):
        return 0


class DeploymentController:
    """Keeps one ReplicaSet per pod template of each Deployment. Register with :meth:`register`.

    Once registered, a ReplicaSet watch keeps an index of each Deployment's ReplicaSets
    (:class:`karpy.simulator.owner_index.OwnerIndex`), so a reconcile reads its own ReplicaSets only,
    however many Deployments the cluster has.
    """

    def __init__(self, cluster: interface.Cluster) -> None:
        self.cluster = cluster
        self._replicasets: owner_index.OwnerIndex | None = None
        self._models: dict[tuple[str, str], tuple[Any, Any, api_workloads.Deployment, str]] = {}
        """(namespace, name) -> (the stored spec it was parsed from, uid, model, template hash)."""

    def _model(self, deploy: Mapping[str, Any]) -> tuple[api_workloads.Deployment, str]:
        """The Deployment's model and template hash, computed again only when its ``spec`` or uid
        changed (a status write keeps the stored ``spec`` object: the model reads no status)."""
        md = deploy.get("metadata", {})
        key = (md.get("namespace") or "", str(md.get("name")))
        spec, uid = deploy.get("spec"), md.get("uid")
        hit = self._models.get(key)
        if hit is not None and hit[0] is spec and hit[1] == uid and spec is not None:
            return hit[2], hit[3]
        model = api_workloads.Deployment.from_manifest(deploy, known=hit[2] if hit is not None else None)
        hash_ = owned_mod.template_hash(model.template)
        self._models[key] = (spec, uid, model, hash_)
        return model, hash_

    def controller(self) -> runtime.Controller:
        return runtime.Controller(
            name=DEPLOYMENT_CONTROLLER,
            reconcile=self.reconcile,
            watches=[("Deployment", runtime.by_name), ("ReplicaSet", owned_mod.owner_mapper("Deployment"))],
        )

    def register(self, manager: runtime.Manager) -> None:
        """Register the controller; from now on its ReplicaSets are found through an owner index."""
        index = owner_index.OwnerIndex("Deployment", owned_mod.controller_ref)
        manager.cluster.watch("ReplicaSet", interface.Filtered(index.index, interface.MESSAGES_ONLY))
        for rs in manager.cluster.list("ReplicaSet"):
            index.index(interface.ADDED, rs)
        self._replicasets = index
        manager.register(self.controller())

    def owned_replicasets(self, deploy: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The ReplicaSets ``deploy`` controls (through the index once registered)."""
        md = deploy.get("metadata", {})
        ns = md.get("namespace") or ""
        if self._replicasets is not None:
            candidates = self._replicasets.owned(ns, str(md.get("name")))
        else:
            candidates = self.cluster.list("ReplicaSet", ns)
        return [rs for rs in candidates if owned_mod.is_controlled_by(rs, deploy)]

    def _wrote(self, event: str, rs: dict[str, Any]) -> dict[str, Any]:
        """What this controller just wrote goes into its index at once (a watch may deliver it later)."""
        if self._replicasets is not None:
            self._replicasets.index(event, rs)
        return rs

    def reconcile(self, key: str) -> float | None:
        ns, name = owned_mod.split_key(key)
        found = self.cluster.list("Deployment", ns, field_selector=f"metadata.name={name}")
        if not found:
            self._models.pop((ns, name), None)
            return None  # the cluster's garbage collector deletes the ReplicaSets it owned
        deploy = found[0]
        owned = self.owned_replicasets(deploy)
        model, hash_ = self._model(deploy)
        if not owned_mod.is_deleting(deploy):
            owned = self._sync(deploy, model, owned, hash_)
        self._write_status(deploy, model, owned, hash_)
        return None

    def _sync(self, deploy: dict[str, Any], model: api_workloads.Deployment,
              owned: list[dict[str, Any]], hash_: str) -> list[dict[str, Any]]:
        ns = deploy["metadata"].get("namespace") or ""
        want = model.replicas
        current = next((rs for rs in owned if (rs["metadata"].get("labels") or {}).get(POD_TEMPLATE_HASH)
                        == hash_), None)
        result: list[dict[str, Any]] = []
        if current is None:
            created = self.cluster.create(self._new_replicaset(deploy, model, hash_, owned))
            current = self._wrote(interface.ADDED, created)
        elif owned_mod.spec_replicas(current) != want:
            updated = memory.copy_dict(current)
            updated.setdefault("spec", {})["replicas"] = want
            current = self._wrote(interface.MODIFIED, self.cluster.update(updated))
        result.append(current)
        old = [rs for rs in owned if rs["metadata"]["name"] != current["metadata"]["name"]]
        for rs in old:
            if owned_mod.spec_replicas(rs) != 0:
                updated = memory.copy_dict(rs)
                updated.setdefault("spec", {})["replicas"] = 0
                rs = self._wrote(interface.MODIFIED, self.cluster.update(updated))
            result.append(rs)
        limit = deploy.get("spec", {}).get("revisionHistoryLimit", 10)
        idle = sorted((rs for rs in old if not (rs.get("status") or {}).get("replicas")), key=_revision)
        for rs in idle[: max(0, len(idle) - int(limit))]:
            owned_mod.delete_quietly(self.cluster, "ReplicaSet", rs["metadata"]["name"], ns)
            self._wrote(interface.DELETED, rs)
            result = [r for r in result if r["metadata"]["name"] != rs["metadata"]["name"]]
        return result

    def _new_replicaset(self, deploy: dict[str, Any], model: api_workloads.Deployment, hash_: str,
                        owned: list[dict[str, Any]]) -> dict[str, Any]:
        md = deploy["metadata"]
        tmpl = memory.copy_dict(model.template)
        tmpl.setdefault("metadata", {}).setdefault("labels", {})[POD_TEMPLATE_HASH] = hash_
        selector = model.selector.to_dict()
        selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH] = hash_
        revision = max((_revision(rs) for rs in owned), default=0) + 1
        return {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{md['name'][: owned_mod.MAX_NAME - len(hash_) - 1]}-{hash_}",
                "namespace": md.get("namespace") or meta.DEFAULT_NAMESPACE,
                "labels": dict(tmpl["metadata"]["labels"]),
                "annotations": {REVISION_ANNOTATION: str(revision)},
                "ownerReferences": [interface.owner_reference(deploy)],
            },
            "spec": {"replicas": model.replicas, "selector": selector, "template": tmpl},
        }

    def _write_status(self, deploy: dict[str, Any], model: api_workloads.Deployment,
                      owned: list[dict[str, Any]], hash_: str) -> None:

        def total(field: str, rss: Iterable[dict[str, Any]]) -> int:
            return sum(int((rs.get("status") or {}).get(field, 0) or 0) for rs in rss)

        updated = [rs for rs in owned if (rs["metadata"].get("labels") or {}).get(POD_TEMPLATE_HASH) == hash_]
        available = total("availableReplicas", owned)
        owned_mod.update_status_if_changed(self.cluster, deploy, {
            "replicas": total("replicas", owned),
            "updatedReplicas": total("replicas", updated),
            "readyReplicas": total("readyReplicas", owned),
            "availableReplicas": available,
            "unavailableReplicas": max(0, model.replicas - available),
            "observedGeneration": deploy.get("metadata", {}).get("generation", 0),
        })
