"""The simulated Deployment and ReplicaSet controllers."""

from __future__ import annotations

import copy
import re
from typing import Any

from karpy.kube import interface
from karpy.simulator import owned as owned_mod
from karpy.simulator import workloads

from . import conftest


def scale(world: conftest.World, name: str, replicas: int) -> None:
    world.cluster.patch("Deployment", name, {"spec": {"replicas": replicas}}, "default")


def replicasets(world: conftest.World, deployment: str) -> list[dict[str, Any]]:
    return sorted(conftest.owned_by(world.cluster.list("ReplicaSet", "default"), "Deployment", deployment),
                  key=interface.name_of)


def test_a_deployment_scaled_to_five_creates_five_pods_owned_by_its_replicaset(world: conftest.World) -> None:
    world.cluster.create(conftest.deployment("web", 1))
    world.run_for(1)
    scale(world, "web", 5)
    world.run_for(1)

    (rs,) = replicasets(world, "web")
    assert rs["spec"]["replicas"] == 5
    hash_ = rs["metadata"]["labels"][workloads.POD_TEMPLATE_HASH]
    assert interface.name_of(rs) == f"web-{hash_}"
    pods = world.pods(app="web")
    assert len(pods) == 5
    for p in pods:
        assert re.fullmatch(rf"web-{hash_}-[{owned_mod.NAME_ALPHABET}]{{5}}", interface.name_of(p))
        assert conftest.owned_by([p], "ReplicaSet", interface.name_of(rs)) == [p]
        assert p["metadata"]["labels"][workloads.POD_TEMPLATE_HASH] == hash_
        assert conftest.phase(p) == "Pending"
    assert world.cluster.get("ReplicaSet", interface.name_of(rs), "default")["status"]["replicas"] == 5


def test_scaling_a_deployment_down_to_one_deletes_pending_pods_first(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("n1"))
    world.cluster.create(conftest.deployment("web", 5))
    world.run_for(1)
    pods = world.pods(app="web")
    bound = [interface.name_of(p) for p in pods[1:3]]
    for p in pods[1:3]:
        conftest.bind(world, p, "n1")
    world.run_for(5)
    running = [interface.name_of(p) for p in world.pods(app="web") if conftest.phase(p) == "Running"]
    assert sorted(running) == bound

    scale(world, "web", 2)
    world.run_for(1)
    assert sorted(interface.name_of(p) for p in world.pods(app="web")) == bound

    scale(world, "web", 1)
    world.run_for(1)
    remaining = world.pods(app="web")
    assert len(remaining) == 1
    assert interface.name_of(remaining[0]) in bound


def test_scale_down_removes_not_ready_before_ready_and_newer_before_older() -> None:
    def pod(name: str, *, node: str = "", ready: bool = False,
            created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
        return {"metadata": {"name": name, "creationTimestamp": created},
                "spec": {"nodeName": node} if node else {},
                "status": {"phase": "Running" if node else "Pending",
                           "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}

    pods = [
        pod("old-ready", node="n", ready=True, created="2026-01-01T00:00:00Z"),
        pod("new-ready", node="n", ready=True, created="2026-01-01T00:05:00Z"),
        pod("not-ready", node="n", ready=False),
        pod("pending"),
    ]
    order = [p["metadata"]["name"] for p in sorted(pods, key=owned_mod.deletion_rank)]
    assert order == ["pending", "not-ready", "new-ready", "old-ready"]


def test_a_deleted_pod_of_a_replicaset_is_recreated(world: conftest.World) -> None:
    world.cluster.create(conftest.deployment("web", 3))
    world.run_for(1)
    before = [interface.name_of(p) for p in world.pods(app="web")]
    world.cluster.delete("Pod", before[0], "default")
    world.run_for(1)
    after = [interface.name_of(p) for p in world.pods(app="web")]
    assert len(after) == 3
    assert before[0] not in after
    assert set(before[1:]) <= set(after)


def test_an_evicted_pod_is_replaced(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("n1"))
    world.cluster.create(conftest.deployment("web", 2))
    world.run_for(1)
    victim = world.pods(app="web")[0]
    conftest.bind(world, victim, "n1")
    world.run_for(5)
    world.cluster.evict(interface.name_of(victim), "default")
    world.run_for(1)
    names = [interface.name_of(p) for p in world.pods(app="web")]
    assert len(names) == 2
    assert interface.name_of(victim) not in names


def test_a_failed_pod_is_replaced_and_not_counted(world: conftest.World) -> None:
    world.cluster.create(conftest.deployment("web", 2))
    world.run_for(1)
    failed = copy.deepcopy(world.pods(app="web")[0])
    failed["status"] = {"phase": "Failed", "reason": "Evicted"}
    world.cluster.update_status(failed)
    world.run_for(1)
    pods = world.pods(app="web")
    assert len(pods) == 3
    assert sum(1 for p in pods if conftest.phase(p) != "Failed") == 2
    (rs,) = replicasets(world, "web")
    assert rs["status"]["replicas"] == 2


def test_ready_pods_show_in_the_replicaset_and_deployment_status(world: conftest.World) -> None:
    world.kubelet.add_node(conftest.node("n1"))
    world.cluster.create(conftest.deployment("web", 3))
    world.run_for(1)
    for p in world.pods(app="web")[:2]:
        conftest.bind(world, p, "n1")
    world.run_for(5)
    status = world.cluster.get("Deployment", "web", "default")["status"]
    assert status["replicas"] == 3
    assert status["readyReplicas"] == 2
    assert status["updatedReplicas"] == 3
    assert status["unavailableReplicas"] == 1


def test_a_template_change_creates_a_new_replicaset_and_scales_the_old_one_to_zero(
        world: conftest.World) -> None:
    world.cluster.create(conftest.deployment("web", 3))
    world.run_for(1)
    (old,) = replicasets(world, "web")
    old_pods = {interface.name_of(p) for p in world.pods(app="web")}

    world.cluster.patch("Deployment", "web", {"spec": {"template": conftest.deployment(
        "web", 3, image="registry.example/app:2")["spec"]["template"]}}, "default")
    world.run_for(1)

    rss = {interface.name_of(rs): rs for rs in replicasets(world, "web")}
    assert len(rss) == 2
    assert rss[interface.name_of(old)]["spec"]["replicas"] == 0
    (new,) = [rs for name, rs in rss.items() if name != interface.name_of(old)]
    assert new["spec"]["replicas"] == 3
    assert new["metadata"]["annotations"][workloads.REVISION_ANNOTATION] == "2"
    pods = world.pods(app="web")
    assert len(pods) == 3
    assert not old_pods & {interface.name_of(p) for p in pods}
    assert all(p["spec"]["containers"][0]["image"] == "registry.example/app:2" for p in pods)


def test_the_same_seed_gives_the_same_pod_names() -> None:
    def names(seed: int) -> list[str]:
        w = conftest.make_world(seed=seed)
        w.cluster.create(conftest.deployment("web", 4))
        w.cluster.create(conftest.deployment("api", 2))
        w.run_for(1)
        return [interface.name_of(p) for p in w.pods()]

    assert names(5) == names(5)
    assert names(5) != names(6)


def test_deleting_a_deployment_removes_its_replicasets_and_pods(world: conftest.World) -> None:
    world.cluster.create(conftest.deployment("web", 2))
    world.run_for(1)
    world.cluster.delete("Deployment", "web", "default")
    world.run_for(1)
    assert world.cluster.list("ReplicaSet") == []
    assert world.pods() == []
