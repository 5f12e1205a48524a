"""One hostile object of a watched kind next to a good one never stops the good one's readiness:
a NodePool whose spec or template is not a mapping, an EC2NodeClass or AKSNodeClass whose status or
spec is not one. The hostile object itself says what is wrong with it."""

from __future__ import annotations

from typing import Any

import pytest

from ..controllers import builders


def _conditions(world: builders.World, kind: str, name: str) -> dict[str, tuple[str, str]]:
    obj = world.cluster.get(kind, name)
    return {c["type"]: (c["status"], c.get("reason", "")) for c in obj["status"]["conditions"]}


def _touch(world: builders.World, kind: str, name: str, n: int) -> None:
    world.cluster.patch(kind, name, {"metadata": {"labels": {"touch": str(n)}}})


@pytest.mark.parametrize("hostile", [
    {"spec": "x"}, {"spec": {"template": 5}}, {"spec": {"template": {"spec": ["a"]}}},
    {"spec": {"template": {"spec": {"nodeClassRef": "default"}}}}, {"status": "x"}, {"metadata": {"generation": "x"}},
])
def test_a_nodepool_that_is_not_a_mapping_where_one_is_expected_never_stops_the_good_ones_readiness(
        hostile: dict[str, Any]) -> None:
    world = builders.make_world()
    bad = builders.nodepool_manifest("bad")
    for key, value in hostile.items():
        bad[key] = {**bad[key], **value} if key == "metadata" else value
    world.cluster.create(bad)
    world.cluster.create(builders.nodepool_manifest("good"))
    world.at(30)
    assert _conditions(world, "NodePool", "good")["Ready"] == ("True", "Ready")
    # the NodeClass becomes not Ready: its event must reach the good NodePool
    world.cloud.set_node_class_ready("EC2NodeClass", "default", False)
    _touch(world, "EC2NodeClass", "default", 1)
    world.run_for(30)
    assert _conditions(world, "NodePool", "good")["NodeClassReady"] == ("False", "SubnetsNotFound")
    if "spec" in hostile:
        validation = world.cluster.get("NodePool", "bad")["status"]["conditions"]
        failed = next(c for c in validation if c["type"] == "ValidationSucceeded")
        assert failed["status"] == "False" and "not a mapping" in failed["message"]


def _aks_nodeclass(name: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": name},
            "spec": {"imageFamily": "Ubuntu2204"}}


@pytest.mark.parametrize("kind", ["EC2NodeClass", "AKSNodeClass"])
@pytest.mark.parametrize("field", ["status", "spec"])
def test_a_nodeclass_that_is_not_a_mapping_where_one_is_expected_never_stops_the_good_one(
        kind: str, field: str) -> None:
    world = builders.make_world()
    make = builders.nodeclass_manifest if kind == "EC2NodeClass" else _aks_nodeclass
    group = "karpenter.k8s.aws" if kind == "EC2NodeClass" else "karpenter.azure.com"
    if kind == "AKSNodeClass":
        world.cluster.create(make("default"))
    world.cluster.create(make("bad"))
    world.cluster.update_status({**world.cluster.get(kind, "bad"), "status": {}})
    for name, ref in (("good", "default"), ("on-bad", "bad")):
        pool = builders.nodepool_manifest(name)
        pool["spec"]["template"]["spec"]["nodeClassRef"] = {"group": group, "kind": kind, "name": ref}
        world.cluster.create(pool)
    world.at(30)
    hostile = world.cluster.get(kind, "bad")
    hostile[field] = "x"
    if field == "status":
        world.cluster.update_status(hostile)
    else:
        world.cluster.update(hostile)
    world.cloud.set_node_class_ready(kind, "default", False)
    _touch(world, kind, "default", 1)
    _touch(world, kind, "bad", 1)
    world.run_for(60)
    assert _conditions(world, "NodePool", "good")["NodeClassReady"] == ("False", "SubnetsNotFound")
    if field == "status":
        assert _conditions(world, "NodePool", "on-bad")["NodeClassReady"] == ("False", "NodeClassInvalid")
