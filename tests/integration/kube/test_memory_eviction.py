"""The Pod eviction subresource with PodDisruptionBudgets on the in-memory cluster."""

from __future__ import annotations

from typing import Any

import pytest

from karpy import clock
from karpy.kube import errors, interface, memory
from karpy.simulator import pdb_status

from . import builders

APP = {"matchLabels": {"app": "web"}}


def _evict(cluster: memory.InMemoryCluster, vclock: clock.VirtualClock, name: str, namespace: str) -> None:
    """Evict after kube-controller-manager's disruption controller synced every budget's status."""
    pdb_status.sync_all(cluster, vclock)
    cluster.evict(name, namespace)


def _bare_pods(cluster: memory.InMemoryCluster, count: int, **kwargs: Any) -> None:
    for i in range(count):
        cluster.create(builders.pod(f"web-{i}", labels={"app": "web"}, **kwargs))


def test_a_pod_without_a_budget_is_evicted_and_gone() -> None:
    cluster, vclock = builders.new_cluster()
    cluster.create(builders.pod("p"))
    _evict(cluster, vclock, "p", "default")
    assert cluster.list("Pod") == []


def test_evicting_a_missing_pod_is_not_found() -> None:
    cluster, vclock = builders.new_cluster()
    with pytest.raises(errors.NotFound):
        _evict(cluster, vclock, "p", "default")


def test_min_available_equal_to_the_healthy_pods_blocks_eviction_with_429() -> None:
    cluster, vclock = builders.new_cluster()
    _bare_pods(cluster, 3)
    cluster.create(builders.pdb("web", APP, min_available=3))
    with pytest.raises(errors.TooManyRequests) as info:
        _evict(cluster, vclock, "web-0", "default")
    assert info.value.status == 429
    assert info.value.retryable is True
    assert len(cluster.list("Pod")) == 3


def test_min_available_int_allows_evictions_down_to_the_minimum() -> None:
    cluster, vclock = builders.new_cluster()
    _bare_pods(cluster, 3)
    cluster.create(builders.pdb("web", APP, min_available=2))
    _evict(cluster, vclock, "web-0", "default")
    with pytest.raises(errors.TooManyRequests):
        _evict(cluster, vclock, "web-1", "default")
    assert builders.names(cluster.list("Pod")) == ["web-1", "web-2"]


def test_min_available_percent_rounds_up() -> None:
    cluster, vclock = builders.new_cluster()
    rs = cluster.create(builders.replicaset("web", 3))
    builders.owned_pods(cluster, rs, 3)
    cluster.create(builders.pdb("web", APP, min_available="50%"))  # ceil(1.5) = 2 must stay
    _evict(cluster, vclock, "web-0", "default")
    with pytest.raises(errors.TooManyRequests):
        _evict(cluster, vclock, "web-1", "default")


def test_max_unavailable_int_counts_against_the_replicaset_scale() -> None:
    cluster, vclock = builders.new_cluster()
    rs = cluster.create(builders.replicaset("web", 3))
    builders.owned_pods(cluster, rs, 3)
    cluster.create(builders.pdb("web", APP, max_unavailable=1))
    _evict(cluster, vclock, "web-0", "default")
    with pytest.raises(errors.TooManyRequests):
        _evict(cluster, vclock, "web-1", "default")  # expected stays 3 (replicas), healthy 2, desired 2


def test_max_unavailable_percent_rounds_up() -> None:
    cluster, vclock = builders.new_cluster()
    rs = cluster.create(builders.replicaset("web", 3))
    builders.owned_pods(cluster, rs, 3)
    cluster.create(builders.pdb("web", APP, max_unavailable="10%"))  # ceil(0.3) = 1 may go
    _evict(cluster, vclock, "web-0", "default")
    with pytest.raises(errors.TooManyRequests):
        _evict(cluster, vclock, "web-1", "default")


def test_max_unavailable_zero_blocks_every_running_pod() -> None:
    cluster, vclock = builders.new_cluster()
    _bare_pods(cluster, 2)
    cluster.create(builders.pdb("web", APP, max_unavailable=0))
    with pytest.raises(errors.TooManyRequests):
        _evict(cluster, vclock, "web-0", "default")


def test_pending_and_terminal_pods_can_always_be_evicted() -> None:
    cluster, vclock = builders.new_cluster()
    cluster.create(builders.pod("pending", labels={"app": "web"}, phase="Pending", ready=None))
    cluster.create(builders.pod("done", labels={"app": "web"}, phase="Succeeded", ready=None))
    cluster.create(builders.pdb("web", APP, max_unavailable=0))
    _evict(cluster, vclock, "pending", "default")
    _evict(cluster, vclock, "done", "default")
    assert cluster.list("Pod") == []


def test_a_running_pod_without_ready_condition_counts_as_healthy() -> None:
    cluster, vclock = builders.new_cluster()
    _bare_pods(cluster, 2, ready=None)
    cluster.create(builders.pdb("web", APP, min_available=1))
    _evict(cluster, vclock, "web-0", "default")
    with pytest.raises(errors.TooManyRequests):
        _evict(cluster, vclock, "web-1", "default")


def test_an_unready_pod_may_go_only_while_the_budget_is_met_unless_always_allow() -> None:
    cluster, vclock = builders.new_cluster()
    _bare_pods(cluster, 2)
    cluster.create(builders.pod("web-sick", labels={"app": "web"}, ready=False))
    cluster.create(builders.pdb("web", APP, min_available=3))
    with pytest.raises(errors.TooManyRequests):
        _evict(cluster, vclock, "web-sick", "default")  # healthy 2 < desired 3
    cluster.patch(
        "PodDisruptionBudget", "web", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}, "default"
    )
    _evict(cluster, vclock, "web-sick", "default")
    assert builders.names(cluster.list("Pod")) == ["web-0", "web-1"]


def test_an_unready_pod_may_go_when_the_healthy_pods_meet_the_budget() -> None:
    cluster, vclock = builders.new_cluster()
    _bare_pods(cluster, 2)
    cluster.create(builders.pod("web-sick", labels={"app": "web"}, ready=False))
    cluster.create(builders.pdb("web", APP, min_available=2))
    _evict(cluster, vclock, "web-sick", "default")
    assert len(cluster.list("Pod")) == 2


def test_a_budget_in_another_namespace_or_with_another_selector_does_not_apply() -> None:
    cluster, vclock = builders.new_cluster()
    _bare_pods(cluster, 1)
    cluster.create(builders.pdb("web", APP, "other", max_unavailable=0))
    cluster.create(builders.pdb("db", {"matchLabels": {"app": "db"}}, max_unavailable=0))
    _evict(cluster, vclock, "web-0", "default")
    assert cluster.list("Pod", "default") == []


def test_an_empty_selector_selects_every_pod_in_the_namespace() -> None:
    cluster, vclock = builders.new_cluster()
    _bare_pods(cluster, 1)
    cluster.create(builders.pdb("all", {}, max_unavailable=0))
    with pytest.raises(errors.TooManyRequests):
        _evict(cluster, vclock, "web-0", "default")


def test_a_pod_selected_by_two_budgets_is_an_internal_error() -> None:
    cluster, vclock = builders.new_cluster()
    _bare_pods(cluster, 3)
    cluster.create(builders.pdb("one", APP, max_unavailable=1))
    cluster.create(builders.pdb("two", {}, max_unavailable=1))
    with pytest.raises(errors.InternalError) as info:
        _evict(cluster, vclock, "web-0", "default")
    assert info.value.status == 500


def test_an_evicted_pod_with_a_finalizer_becomes_terminating() -> None:
    cluster, vclock = builders.new_cluster()
    cluster.create(builders.pod("p", finalizers=["example.com/wait"]))
    _evict(cluster, vclock, "p", "default")
    assert interface.is_terminating(cluster.get("Pod", "p", "default"))


def test_a_budget_without_selector_blocks_nothing_and_one_without_limits_blocks_everything() -> None:
    """kube-controller-manager: neither minAvailable nor maxUnavailable gives expectedPods 0, and a budget
    expecting no pod allows no disruption (``updatePdbStatus``)."""
    cluster, vclock = builders.new_cluster()
    _bare_pods(cluster, 2)
    cluster.create(builders.pdb("no-selector", None, max_unavailable=0))
    _evict(cluster, vclock, "web-0", "default")
    cluster.delete("PodDisruptionBudget", "no-selector", "default")
    cluster.create(builders.pdb("no-limits", APP))
    with pytest.raises(errors.TooManyRequests):
        _evict(cluster, vclock, "web-1", "default")
    status = cluster.get("PodDisruptionBudget", "no-limits", "default")["status"]
    assert (status["expectedPods"], status["disruptionsAllowed"]) == (0, 0)
