"""The simulated kube-scheduler's queue: a pod that fits nowhere waits for its backoff and a cluster change."""

from __future__ import annotations

import itertools

from karpy.simulator import kube_scheduler

from . import conftest


def _scheduler(world: conftest.World) -> kube_scheduler.KubeScheduler:
    ks = kube_scheduler.KubeScheduler(world.cluster, world.clock, record_events=False)
    ks.register(world.manager)
    return ks


def test_a_pod_that_fits_nowhere_is_not_tried_again_while_nothing_changes(world: conftest.World) -> None:
    ks = _scheduler(world)
    world.cluster.create(conftest.pod("web"))
    world.run_for(1)
    assert ks.runs == 1
    assert conftest.condition(world.cluster.get("Pod", "web", "default"), "PodScheduled") == "False"
    world.run_for(60)
    assert ks.runs == 1


def test_a_pod_that_failed_is_tried_again_after_its_backoff_once_a_node_arrives(world: conftest.World) -> None:
    ks = _scheduler(world)
    world.cluster.create(conftest.pod("web"))
    world.run_for(1)  # tried at 0 s: no node; backs off 1 s
    world.cluster.create(conftest.node("n1"))
    world.run_for(0.5)  # 1.5 s: due again (backoff over, a node came)
    world.run_for(1)
    assert world.cluster.get("Pod", "web", "default")["spec"].get("nodeName") == "n1"
    assert ks.bound == 1


def test_backoff_doubles_per_failed_try_up_to_ten_seconds(world: conftest.World) -> None:
    ks = _scheduler(world)
    world.cluster.create(conftest.pod("web"))
    world.run_for(0.1)  # first try at 0 s
    tried_at = [0]
    for second in range(1, 40):  # a change every second: the pod is tried whenever its backoff allows
        world.cluster.create(conftest.node(f"full-{second}", taints=[{"key": "k", "effect": "NoSchedule"}]))
        before = ks.runs
        world.run_for(1)
        if ks.runs > before:
            tried_at.append(second)
    waits = [b - a for a, b in itertools.pairwise(tried_at)]
    assert waits == [1, 2, 4, 8, 10, 10]
