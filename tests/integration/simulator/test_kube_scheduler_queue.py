"""The simulated kube-scheduler's queue: backoff, the unschedulable pool and queueing hints."""

from __future__ import annotations

import itertools
from typing import Any

from karpy.kube import interface
from karpy.simulator import kube_scheduler

from . import conftest

UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}


def _scheduler(world: conftest.World) -> kube_scheduler.KubeScheduler:
    ks = kube_scheduler.KubeScheduler(world.cluster, world.clock, record_events=False)
    ks.register(world.manager)
    return ks


def _pod(name: str, cpu: str = "100m", node_name: str = "") -> dict[str, Any]:
    p = conftest.pod(name, node_name=node_name)
    p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return p


def _bound_to(world: conftest.World, name: str) -> str | None:
    bound = world.cluster.get("Pod", name, "default")["spec"].get("nodeName")
    return None if bound is None else str(bound)


def _ready(world: conftest.World, name: str) -> None:
    """What Karpenter and the kubelet do to a registering node: drop the taint, turn Ready."""
    world.cluster.patch("Node", name, {"spec": {"taints": []}})
    world.cluster.patch_status("Node", name, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})


def test_a_pod_that_fits_nowhere_is_not_tried_again_while_nothing_changes(world: conftest.World) -> None:
    ks = _scheduler(world)
    world.cluster.create(conftest.node("n1", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]))
    world.cluster.create(conftest.pod("web"))
    world.run_for(1)
    assert ks.runs == 1
    assert conftest.condition(world.cluster.get("Pod", "web", "default"), "PodScheduled") == "False"
    world.run_for(60)
    assert ks.runs == 1
    assert ks.queue.waiting() == {("default", "web"): 1}


def test_a_pod_with_no_node_at_all_is_tried_again_after_each_backoff(world: conftest.World) -> None:
    # No node: no filter rejected the pod, so no hint can wake it; kube-scheduler retries it after
    # its backoff (1, 2, 4, 8, then 10 s) instead of leaving it in the pool.
    ks = _scheduler(world)
    world.cluster.create(conftest.pod("web"))
    world.run_for(0.1)  # first try at 0 s
    tried_at = [0]
    for second in range(1, 40):
        before = ks.runs
        world.run_for(1)
        if ks.runs > before:
            tried_at.append(second)
    assert [b - a for a, b in itertools.pairwise(tried_at)] == [1, 2, 4, 8, 10, 10]


def test_a_pod_waiting_on_an_unregistered_node_is_not_retried_when_more_register(world: conftest.World) -> None:
    ks = _scheduler(world)
    world.cluster.create(conftest.node("n1", taints=[UNREGISTERED], ready=False))
    world.cluster.create(conftest.pod("web"))
    world.run_for(1)
    message = world.cluster.get("Pod", "web", "default")["status"]["conditions"][0]["message"]
    assert message == "0/1 nodes are available: 1 node(s) had untolerated taint {karpenter.sh/unregistered: }."
    for i in range(2, 6):
        world.cluster.create(conftest.node(f"n{i}", taints=[UNREGISTERED], ready=False))
        world.run_for(15)
    assert ks.runs == 1
    assert ks.queue.moved == 0


def test_a_node_turning_ready_without_its_taint_retries_the_waiting_pod(world: conftest.World) -> None:
    ks = _scheduler(world)
    world.cluster.create(conftest.node("n1", taints=[UNREGISTERED], ready=False))
    world.cluster.create(conftest.pod("web"))
    world.run_for(30)
    assert ks.runs == 1
    _ready(world, "n1")
    world.run_for(1)
    assert ks.runs == 2
    assert _bound_to(world, "web") == "n1"


def test_a_node_that_only_turns_ready_but_keeps_the_taint_wakes_no_one(world: conftest.World) -> None:
    ks = _scheduler(world)
    world.cluster.create(conftest.node("n1", taints=[UNREGISTERED], ready=False))
    world.cluster.create(conftest.pod("web"))
    world.run_for(30)
    world.cluster.patch_status("Node", "n1", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    world.run_for(30)
    assert ks.runs == 1
    assert _bound_to(world, "web") is None


def test_a_deleted_pod_frees_room_and_retries_the_waiting_pod(world: conftest.World) -> None:
    ks = _scheduler(world)
    world.cluster.create(conftest.node("n1"))
    world.cluster.create(_pod("hog", cpu="3", node_name="n1"))
    world.cluster.create(_pod("web", cpu="2"))
    world.run_for(30)
    assert ks.runs == 1
    message = world.cluster.get("Pod", "web", "default")["status"]["conditions"][0]["message"]
    assert message == "0/1 nodes are available: 1 Insufficient cpu."
    world.cluster.delete("Pod", "hog", "default")
    world.run_for(1)
    assert ks.runs == 2
    assert _bound_to(world, "web") == "n1"


def test_a_node_that_cannot_hold_the_pod_does_not_retry_it(world: conftest.World) -> None:
    ks = _scheduler(world)
    world.cluster.create(conftest.node("n1"))
    world.cluster.create(_pod("web", cpu="8"))
    world.run_for(30)
    world.cluster.create(conftest.node("n2"))  # 3920m allocatable: too small for 8 cpu
    world.run_for(30)
    assert ks.runs == 1
    big = conftest.node("n3")
    big["status"]["allocatable"]["cpu"] = "15"
    world.cluster.create(big)
    world.run_for(1)
    assert _bound_to(world, "web") == "n3"


def test_backoff_doubles_per_failed_try_up_to_ten_seconds(world: conftest.World) -> None:
    # The pod fits no node's free room; every second a node arrives whose allocatable would hold
    # it (NodeResourcesFit's hint moves the pod) but whose taint it does not tolerate.
    ks = _scheduler(world)
    world.cluster.create(conftest.node("full"))
    world.cluster.create(_pod("hog", cpu="3", node_name="full"))
    world.cluster.create(_pod("web", cpu="2"))
    world.run_for(0.1)  # first try at 0 s
    tried_at = [0]
    for second in range(1, 40):
        world.cluster.create(conftest.node(f"tainted-{second}", taints=[{"key": "k", "effect": "NoSchedule"}]))
        before = ks.runs
        world.run_for(1)
        if ks.runs > before:
            tried_at.append(second)
    assert [b - a for a, b in itertools.pairwise(tried_at)] == [1, 2, 4, 8, 10, 10]


def test_a_pod_left_in_the_pool_five_minutes_is_tried_again(world: conftest.World) -> None:
    ks = _scheduler(world)
    world.cluster.create(conftest.node("n1", taints=[{"key": "k", "effect": "NoSchedule"}]))
    world.cluster.create(conftest.pod("web"))
    world.run_for(1)
    world.run_for(300)
    assert ks.runs == 1
    world.run_for(30)  # the next 30-second flush after 5 minutes in the pool
    assert ks.runs == 2


def test_a_pod_bound_that_a_waiting_pods_affinity_wants_retries_it(world: conftest.World) -> None:
    ks = _scheduler(world)
    world.cluster.create(conftest.node("n1"))
    follower = conftest.pod("follower")
    follower["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}]}}
    world.cluster.create(follower)
    world.run_for(30)
    assert ks.runs == 1
    assert _bound_to(world, "follower") is None
    leader = conftest.pod("leader")
    leader["metadata"]["labels"] = {"app": "db"}
    world.cluster.create(leader)
    world.run_for(5)
    assert _bound_to(world, "leader") == "n1"
    world.run_for(15)
    assert _bound_to(world, "follower") == "n1"


def test_binding_is_one_write_carrying_the_node_and_the_scheduled_condition(world: conftest.World) -> None:
    _scheduler(world)
    world.cluster.create(conftest.node("n1"))
    seen: list[dict[str, Any]] = []
    world.cluster.watch("Pod", lambda event, obj: seen.append(obj) if event == interface.MODIFIED else None)
    world.cluster.create(conftest.pod("web"))
    world.run_for(1)
    bound = [p for p in seen if p["spec"].get("nodeName")]
    first = bound[0]
    assert first["spec"]["nodeName"] == "n1"
    assert conftest.condition(first, "PodScheduled") == "True"
    assert not [p for p in seen if p["spec"].get("nodeName") is None and
                conftest.condition(p, "PodScheduled") == "True"]
