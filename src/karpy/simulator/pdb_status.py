"""The simulated cluster's PodDisruptionBudget status controller (kube-controller-manager's disruption
controller), so that karpy reads a budget's ``status`` in ``karpy simulate`` as on a real cluster.

:class:`PdbStatusController` keeps every PodDisruptionBudget's ``status`` (:func:`karpy.kube.memory_eviction
.budget_status`: ``observedGeneration``, ``expectedPods``, ``currentHealthy``, ``desiredHealthy``,
``disruptionsAllowed``, ``disruptedPods`` and the ``DisruptionAllowed`` condition). It syncs a budget when
the budget, a pod of its namespace its selector matches, or a Deployment / ReplicaSet / StatefulSet /
ReplicationController of its namespace changes (:data:`SYNC_DELAY` later), and again when a
``disruptedPods`` entry expires.

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
from karpy.kube import errors, interface, memory_eviction, selectors

NAME = "simulator.pdb-status"
MATCH_CACHE = 4096
"""Distinct pod label sets whose matching budgets are remembered at most."""
SYNC_DELAY = 0.5
"""Seconds from a change to the sync of the budgets it concerns (kube-controller-manager's queue is not
instant either); the Eviction API spends a budget at once, so no eviction can outrun it."""
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


def sync(cluster: interface.Cluster, namespace: str, name: str, now: float,
         pods: Iterable[Mapping[str, Any]] | None = None) -> float | None:
    """Write one budget's status when it changed; seconds until it must be synced again, or None.
    ``pods``: the pods of its namespace its selector may match (default: listed)."""
    pdb = _one(cluster, "PodDisruptionBudget", namespace, name)
    if pdb is None:
        return None
    selected = cluster.list("Pod", namespace) if pods is None else pods
    status = memory_eviction.budget_status(pdb, selected, scale_finder(cluster), now)
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
    """See the module docstring. Register with :meth:`register`.

    It keeps, per budget, the pods its selector matches (updated from pod events, so a sync reads only
    those), and syncs a budget :data:`SYNC_DELAY` after the first change that concerns it (changes in
    between are taken by the same sync, as the controller's work queue coalesces them)."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock) -> None:
        self.cluster = cluster
        self.clock = clock
        self._manager: runtime.Manager | None = None
        self._queries: dict[str, dict[str, selectors.LabelQuery | None]] = {}
        """namespace -> budget name -> its pod selector (None: selects no pod)."""
        self._selected: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
        """(namespace, budget) -> pod name -> the pod as last seen."""
        self._selectors: dict[tuple[str, str], Any] = {}
        """(namespace, budget) -> its ``spec.selector`` as last seen."""
        self._matching: dict[tuple[str, frozenset[tuple[str, str]]], frozenset[str]] = {}
        """(namespace, pod labels) -> the budgets selecting such pods (emptied when a selector changes)."""

    def register(self, manager: runtime.Manager) -> None:
        self._manager = manager
        manager.register(runtime.Controller(NAME, self.reconcile, []))
        self.cluster.watch("PodDisruptionBudget", self._on_budget)
        self.cluster.watch("Pod", self._on_pod)
        for kind in SCALED_KINDS:
            self.cluster.watch(kind, self._on_scaled)

    def _enqueue(self, namespace: str, name: str) -> None:
        if self._manager is not None:
            self._manager.enqueue(NAME, f"{namespace}/{name}", SYNC_DELAY)

    def _on_budget(self, event: str, obj: dict[str, Any]) -> None:
        ns, name = interface.namespace_of(obj), interface.name_of(obj)
        if event == interface.DELETED:
            self._queries.get(ns, {}).pop(name, None)
            self._selected.pop((ns, name), None)
            self._selectors.pop((ns, name), None)
            self._matching.clear()
            return
        selector = (obj.get("spec") or {}).get("selector")
        known = self._queries.setdefault(ns, {})
        if name not in known or self._selectors.get((ns, name)) != selector:
            self._selectors[(ns, name)] = selector
            self._matching.clear()
            query = known[name] = memory_eviction.pod_query(obj)
            self._selected[(ns, name)] = {} if query is None else {
                interface.name_of(p): p for p in self.cluster.list("Pod", ns)
                if query.matches(interface.labels_of(p))}
        if (obj.get("status") or {}).get("observedGeneration") != (obj.get("metadata") or {}).get("generation"):
            self._enqueue(ns, name)

    def _on_pod(self, event: str, obj: dict[str, Any]) -> None:
        ns = interface.namespace_of(obj)
        budgets = self._queries.get(ns)
        if not budgets:
            return
        pod_name, labels = interface.name_of(obj), interface.labels_of(obj)
        key = (ns, frozenset(labels.items()))
        matching = self._matching.get(key)
        if matching is None:  # pods of one template share the answer
            if len(self._matching) >= MATCH_CACHE:  # pods with labels of their own (a StatefulSet's, a Job's)
                self._matching.clear()
            matching = self._matching[key] = frozenset(
                name for name, query in budgets.items() if query is not None and query.matches(labels))
        for name in budgets:
            selected = self._selected[(ns, name)]
            if event != interface.DELETED and name in matching:
                selected[pod_name] = obj
            elif selected.pop(pod_name, None) is None:
                continue
            self._enqueue(ns, name)

    def _on_scaled(self, _event: str, obj: dict[str, Any]) -> None:
        ns = interface.namespace_of(obj)
        for name in self._queries.get(ns, {}):
            self._enqueue(ns, name)

    def reconcile(self, key: str) -> float | None:
        ns, _, name = key.rpartition("/")
        selected = self._selected.get((ns, name))
        if selected is None:
            return None
        try:
            return sync(self.cluster, ns, name, self.clock.now(), list(selected.values()))
        except errors.Conflict:
            return 0.0  # the budget changed meanwhile (an eviction spent it): read it again
        except errors.NotFound:
            return None
