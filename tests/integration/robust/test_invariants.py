"""The chaos runs' independent invariant checker, on hand-made evictions: a budget broken by evicting a
running pod is a violation; evicting a pod that was already dead (the pods of a reclaimed spot instance)
or never started is not, as the Eviction API ignores budgets for those."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.simulator import invariants

from ..controllers import builders


def _evicted(w: builders.World, pod: str) -> None:
    w.cluster.create({"apiVersion": "v1", "kind": "Event",
                      "metadata": {"name": f"{pod}.evicted", "namespace": "default"}, "reason": "Evicted",
                      "message": "Evicted pod", "involvedObject": {"kind": "Pod", "name": pod, "namespace": "default"}})


def _world_with_budget(min_available: int) -> tuple[builders.World, invariants.Checker]:
    w = builders.make_world()
    w.cluster.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"name": "web", "namespace": "default"},
                      "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}})
    checker = invariants.Checker(w.cluster, None, w.clock).attach()
    for name in ("web-a", "web-b", "web-c"):
        w.cluster.create(builders.running_pod(name, "node-1", labels={"app": "web"}))
    return w, checker


def _set_phase(w: builders.World, name: str, phase: str) -> None:
    pod: dict[str, Any] = w.cluster.get("Pod", name, "default")
    pod["status"] = {"phase": phase, "conditions": [{"type": "Ready", "status": "False"}]}
    w.cluster.update_status(pod)


def test_evicting_a_running_pod_below_its_budget_is_a_violation() -> None:
    w, checker = _world_with_budget(3)
    w.cluster.delete("Pod", "web-a", "default")
    _evicted(w, "web-a")
    assert len(checker.violations) == 1 and "PDB web, which demands 3" in checker.violations[0]


def test_evicting_a_running_pod_within_its_budget_is_fine() -> None:
    w, checker = _world_with_budget(2)
    w.cluster.delete("Pod", "web-a", "default")
    _evicted(w, "web-a")
    assert checker.violations == []


@pytest.mark.parametrize("phase", ["Failed", "Succeeded", "Pending"])
def test_evicting_a_pod_that_was_not_running_is_no_violation_however_few_are_left(phase: str) -> None:
    w, checker = _world_with_budget(3)
    _set_phase(w, "web-b", "Failed")  # the budget is already broken before the eviction
    _set_phase(w, "web-a", phase)
    w.cluster.delete("Pod", "web-a", "default")
    _evicted(w, "web-a")
    assert checker.violations == []


def test_a_budget_counts_the_deployments_scale_not_its_just_scaled_replicasets() -> None:
    """Issue 22 item 10: expected pods come from the Deployment (scaled to 4) even while its ReplicaSet still
    says 3; with maxUnavailable 1 and 3 pods, evicting one leaves 2 of the 3 demanded."""
    w = builders.make_world()
    deploy = w.cluster.create({"apiVersion": "apps/v1", "kind": "Deployment",
                               "metadata": {"name": "web", "namespace": "default"},
                               "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}}}})
    rs = w.cluster.create({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                           "metadata": {"name": "web-1", "namespace": "default", "ownerReferences": [
                               {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                "uid": deploy["metadata"]["uid"], "controller": True}]},
                           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}}})
    w.cluster.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"name": "web", "namespace": "default"},
                      "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    checker = invariants.Checker(w.cluster, None, w.clock).attach()
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": rs["metadata"]["uid"],
             "controller": True}
    for name in ("web-a", "web-b", "web-c"):
        w.cluster.create(builders.running_pod(name, "node-1", labels={"app": "web"}, owner=owner))
    w.cluster.delete("Pod", "web-a", "default")
    _evicted(w, "web-a")
    assert len(checker.violations) == 1 and "which demands 3" in checker.violations[0]
