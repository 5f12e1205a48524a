"""The simulated cluster's PodDisruptionBudget status controller (kube-controller-manager's disruption
controller), so that karpy reads a budget's ``status`` in ``karpy simulate`` as on a real cluster.

:class:`PdbStatusController` keeps every PodDisruptionBudget's ``status`` (:func:`karpy.kube.memory_eviction
.budget_status`: ``observedGeneration``, ``expectedPods``, ``currentHealthy``, ``desiredHealthy``,
``disruptionsAllowed``, ``disruptedPods`` and the ``DisruptionAllowed`` condition). It syncs a budget when
the budget, a pod of its namespace its selector matches, or a Deployment / ReplicaSet / StatefulSet /
ReplicationController of its namespace changes, and again when a ``disruptedPods`` entry expires.

*Expected* pods come from the scale of each selected pod's controller as kube-controller-manager's
"finders" give it: a ReplicaSet owned by a Deployment counts the Deployment's ``spec.replicas`` (not the
ReplicaSet's, which lags a scale of the Deployment); a ReplicaSet, StatefulSet or ReplicationController of
its own counts its ``spec.replicas`` (1 when unset). Any other controller (a Job, a custom resource) has no
scale here: a budget needing one (``maxUnavailable``, a percentage ``minAvailable``) then fails safe with
``disruptionsAllowed: 0``.

:func:`sync_all` syncs every budget at once, for a cluster that no :class:`karpy.controllers.runtime.Manager`
drives (tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.controllers import runtime
from karpy.kube import errors, interface, memory_eviction

NAME = "simulator.pdb-status"
SCALED_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "ReplicationController")


def _one(cluster: interface.Cluster, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    found = cluster.list(kind, namespace, field_selector=f"metadata.name={name}")
    return found[0] if found else None


def _replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def scale_finder(cluster: interface.Cluster) -> memory_eviction.ScaleOf:
    """``scale_of(namespace, controller_ref)`` over ``cluster`` (module docstring)."""

    def scale_of(namespace: str, ref: Mapping[str, Any]) -> int | None:
        kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        if kind not in SCALED_KINDS or kind == "Deployment":  # pods are never a Deployment's own
            return None
        obj = _one(cluster, kind, namespace, name)
        if obj is None:
            return None
        if kind == "ReplicaSet":
            owner = next((r for r in interface.owner_references(obj) if r.get("controller")), None)
            if owner is not None and owner.get("kind") == "Deployment":
                deploy = _one(cluster, "Deployment", namespace, str(owner.get("name") or ""))
                return None if deploy is None else _replicas(deploy)
        return _replicas(obj)

    return scale_of


def sync(cluster: interface.Cluster, namespace: str, name: str, now: float) -> float | None:
    """Write one budget's status when it changed; seconds until it must be synced again, or None."""
    pdb = _one(cluster, "PodDisruptionBudget", namespace, name)
    if pdb is None:
        return None
    pods = cluster.list("Pod", namespace)
    status = memory_eviction.budget_status(pdb, pods, scale_finder(cluster), now)
    if status != (pdb.get("status") or {}):
        cluster.patch_status("PodDisruptionBudget", name, {
            "metadata": {"resourceVersion": pdb["metadata"]["resourceVersion"]},
            "status": {**{k: None for k in (pdb.get("status") or {}) if k not in status}, **status}}, namespace)
    return memory_eviction.recheck_after(status, now)


def sync_all(cluster: interface.Cluster, clock: clock_mod.Clock) -> None:
    """Sync every budget once (a cluster no manager drives)."""
    for pdb in cluster.list("PodDisruptionBudget"):
        sync(cluster, interface.namespace_of(pdb) or "default", interface.name_of(pdb), clock.now())


class PdbStatusController:
    """See the module docstring. Register with :meth:`register`."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock) -> None:
        self.cluster = cluster
        self.clock = clock

    def register(self, manager: runtime.Manager) -> None:
        manager.register(runtime.Controller(NAME, self.reconcile, [
            ("PodDisruptionBudget", runtime.by_name),
            ("Pod", self._map_pod),
            *[(kind, self._map_namespace) for kind in SCALED_KINDS]]))

    def _budgets(self, namespace: str) -> list[dict[str, Any]]:
        return self.cluster.list("PodDisruptionBudget", namespace) if namespace else []

    def _map_namespace(self, _event: str, obj: dict[str, Any]) -> Iterable[str]:
        ns = interface.namespace_of(obj)
        return [f"{ns}/{interface.name_of(b)}" for b in self._budgets(ns)]

    def _map_pod(self, _event: str, obj: dict[str, Any]) -> Iterable[str]:
        ns = interface.namespace_of(obj)
        return [f"{ns}/{interface.name_of(b)}" for b in self._budgets(ns) if memory_eviction.selects(b, obj)]

    def reconcile(self, key: str) -> float | None:
        ns, _, name = key.rpartition("/")
        try:
            return sync(self.cluster, ns, name, self.clock.now())
        except errors.Conflict:
            return 0.0  # the budget changed meanwhile (an eviction spent it): read it again
        except errors.NotFound:
            return None
