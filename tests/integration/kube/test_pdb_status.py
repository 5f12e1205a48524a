"""PodDisruptionBudget status as kube-controller-manager keeps it (the simulator's status controller), and
the in-memory Eviction API refusing by that status only, as the API server does (issue 19, issue 22 item 10)."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.controllers import runtime
from karpy.kube import errors, interface, memory
from karpy.simulator import pdb_status

from . import builders

APP = {"matchLabels": {"app": "web"}}


def _deployment(cluster: memory.InMemoryCluster, replicas: int) -> dict[str, Any]:
    return cluster.create({"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": "web", "namespace": "default"},
                           "spec": {"replicas": replicas, "selector": APP}})


def _status(cluster: memory.InMemoryCluster, name: str = "web") -> dict[str, Any]:
    status: dict[str, Any] = cluster.get("PodDisruptionBudget", name, "default")["status"]
    return status


def test_expected_pods_come_from_the_deployment_not_its_just_scaled_replicaset() -> None:
    """Issue 22 item 10: the Deployment was scaled 12 -> 40 and its ReplicaSet still says 12; with 12 ready pods
    and maxUnavailable 10% the budget allows nothing (40 expected, 36 desired), as kube-controller-manager's
    ``getPodDeployment`` finder gives it."""
    cluster, vclock = builders.new_cluster()
    deploy = _deployment(cluster, 40)
    rs = cluster.create(builders.replicaset("web", 12, ownerReferences=[
        {**interface.owner_reference(deploy), "controller": True}]))
    builders.owned_pods(cluster, rs, 12)
    cluster.create(builders.pdb("web", APP, max_unavailable="10%"))
    pdb_status.sync_all(cluster, vclock)
    status = _status(cluster)
    assert (status["expectedPods"], status["desiredHealthy"], status["currentHealthy"],
            status["disruptionsAllowed"]) == (40, 36, 12, 0)
    with pytest.raises(errors.TooManyRequests):
        cluster.evict("web-0", "default")


def test_the_eviction_api_refuses_while_the_budget_has_no_status_yet() -> None:
    """The API server: ``observedGeneration < generation`` is a 429 ("still being processed")."""
    cluster, _ = builders.new_cluster()
    rs = cluster.create(builders.replicaset("web", 3))
    builders.owned_pods(cluster, rs, 3)
    cluster.create(builders.pdb("web", APP, max_unavailable=1))
    with pytest.raises(errors.TooManyRequests, match="still being processed"):
        cluster.evict("web-0", "default")


def test_a_granted_eviction_spends_the_budget_before_the_controller_syncs_again() -> None:
    cluster, vclock = builders.new_cluster()
    rs = cluster.create(builders.replicaset("web", 3))
    builders.owned_pods(cluster, rs, 3)
    cluster.create(builders.pdb("web", APP, max_unavailable=1))
    pdb_status.sync_all(cluster, vclock)
    cluster.evict("web-0", "default")
    status = _status(cluster)
    assert status["disruptionsAllowed"] == 0 and "web-0" in status["disruptedPods"]
    with pytest.raises(errors.TooManyRequests):
        cluster.evict("web-1", "default")


def test_a_job_owned_pod_under_max_unavailable_fails_safe_and_an_integer_min_available_works() -> None:
    """A Job has no scale: maxUnavailable cannot be computed (``failSafe``: 0 allowed, SyncFailed);
    an integer minAvailable counts the selected pods instead."""
    cluster, vclock = builders.new_cluster()
    job = cluster.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "web", "namespace": "default"},
                          "spec": {}})
    builders.owned_pods(cluster, job, 3)
    cluster.create(builders.pdb("web", APP, max_unavailable=1))
    pdb_status.sync_all(cluster, vclock)
    status = _status(cluster)
    assert status["disruptionsAllowed"] == 0
    (cond,) = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("DisruptionAllowed", "False", "SyncFailed")
    cluster.delete("PodDisruptionBudget", "web", "default")
    cluster.create(builders.pdb("web", APP, min_available=2))
    pdb_status.sync_all(cluster, vclock)
    assert (_status(cluster)["expectedPods"], _status(cluster)["disruptionsAllowed"]) == (3, 1)
    cluster.evict("web-0", "default")


def test_eviction_with_another_pods_uid_is_a_conflict() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.pod("p"))
    with pytest.raises(errors.Conflict):
        cluster.evict("p", "default", uid="not-its-uid")
    uid = cluster.get("Pod", "p", "default")["metadata"]["uid"]
    cluster.evict("p", "default", uid=uid)
    assert cluster.list("Pod") == []


def test_a_delete_with_a_grace_period_gives_the_pod_that_grace_period() -> None:
    cluster, _ = builders.new_cluster()
    cluster.graceful_pods = True
    obj = builders.pod("p", node="n1")
    obj["spec"]["terminationGracePeriodSeconds"] = 600
    cluster.create(obj)
    cluster.delete("Pod", "p", "default", grace_period_seconds=42)
    assert cluster.get("Pod", "p", "default")["metadata"]["deletionGracePeriodSeconds"] == 42


def test_the_status_controller_follows_pods_and_scales_as_they_change() -> None:
    cluster, vclock = builders.new_cluster()
    manager = runtime.Manager(cluster, vclock)
    pdb_status.PdbStatusController(cluster, vclock).register(manager)
    deploy = _deployment(cluster, 3)
    rs = cluster.create(builders.replicaset("web", 3, ownerReferences=[
        {**interface.owner_reference(deploy), "controller": True}]))
    builders.owned_pods(cluster, rs, 3)
    cluster.create(builders.pdb("web", APP, min_available="50%"))
    vclock.advance(1.0)
    manager.run_due()
    assert {k: _status(cluster)[k] for k in ("observedGeneration", "expectedPods", "desiredHealthy",
                                             "currentHealthy", "disruptionsAllowed")} == {
        "observedGeneration": 1, "expectedPods": 3, "desiredHealthy": 2, "currentHealthy": 3, "disruptionsAllowed": 1}
    cluster.evict("web-0", "default")  # spends the budget; the controller then sees the pod gone
    vclock.advance(1.0)
    manager.run_due()
    status = _status(cluster)
    assert (status["currentHealthy"], status["disruptionsAllowed"], status.get("disruptedPods")) == (2, 0, None)
    scaled = cluster.get("Deployment", "web", "default")
    scaled["spec"]["replicas"] = 1
    cluster.update(scaled)
    vclock.advance(1.0)
    manager.run_due()
    assert (_status(cluster)["expectedPods"], _status(cluster)["disruptionsAllowed"]) == (1, 1)
