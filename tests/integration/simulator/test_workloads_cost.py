"""The simulated workload controllers' cost follows what changed, not how many objects exist.

A cluster of 2,000 Deployments of one replica each: scaling one of them, changing its template or
deleting one of its pods costs the Deployment and ReplicaSet controllers a constant number of object
reads (the in-memory store's ``scanned`` counter: every object a ``list`` looked at), the same as in a
cluster of 20 Deployments.
"""

from __future__ import annotations

from collections.abc import Callable

from karpy.kube import interface

from . import conftest

TOUCHED_PER_CHANGE = 12
"""Objects a reconcile may read per change: the Deployment, its ReplicaSets, the ReplicaSet, its pods."""


def _world_of(deployments: int) -> conftest.World:
    world = conftest.make_world()
    for i in range(deployments):
        world.cluster.create(conftest.deployment(f"app-{i}", 1))
    world.run_for(1)
    assert len(world.cluster.list("Pod", "default")) == deployments
    return world


def _scale(world: conftest.World) -> None:
    world.cluster.patch("Deployment", "app-7", {"spec": {"replicas": 2}}, "default")


def _new_template(world: conftest.World) -> None:
    template = conftest.deployment("app-7", 1, image="registry.example/app:2")["spec"]["template"]
    world.cluster.patch("Deployment", "app-7", {"spec": {"template": template}}, "default")


def _delete_a_pod(world: conftest.World) -> None:
    (pod,) = [p for p in world.cluster.objects("Pod") if p["metadata"]["labels"]["app"] == "app-7"]  # not counted
    world.cluster.delete("Pod", interface.name_of(pod), "default")


def _objects_read(deployments: int, change: Callable[[conftest.World], None]) -> int:
    world = _world_of(deployments)
    before = world.cluster.scanned
    change(world)
    world.run_for(1)
    read = world.cluster.scanned - before
    assert len(world.pods(app="app-7")) >= 1  # the change happened (this list is not counted)
    return read


def test_scaling_one_of_2000_deployments_reads_a_constant_number_of_objects() -> None:
    read = _objects_read(2000, _scale)
    assert read <= TOUCHED_PER_CHANGE
    assert read == _objects_read(20, _scale)


def test_a_template_change_in_one_of_2000_deployments_reads_a_constant_number_of_objects() -> None:
    read = _objects_read(2000, _new_template)
    assert read <= TOUCHED_PER_CHANGE
    assert read == _objects_read(20, _new_template)


def test_a_deleted_pod_among_2000_deployments_costs_a_constant_number_of_reads() -> None:
    read = _objects_read(2000, _delete_a_pod)
    assert read <= TOUCHED_PER_CHANGE
    assert read == _objects_read(20, _delete_a_pod)
