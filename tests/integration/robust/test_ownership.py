"""Ownership: the simulated cloud's list, garbage collection and delete see only instances with all of
karpy's tags, and a NodeClaim whose provider ID names a foreign instance never drains that Node."""

from __future__ import annotations

from typing import Any

from karpy.api import labels as wk
from karpy.cloudprovider import errors as cloud_errors
from karpy.controllers import ownership

from ..controllers import builders


def _node_group_node(name: str, provider_id: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "eks.amazonaws.com/nodegroup": "ng"}},
            "spec": {"providerID": provider_id},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "20"},
                       "capacity": {"cpu": "2", "memory": "4Gi", "pods": "20"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def test_an_instance_tagged_only_as_the_clusters_is_not_listed_collected_or_deleted() -> None:
    world = builders.make_world()
    key, value = world.cloud.ownership_tag()
    group = world.cloud.add_instance("fake-it-1", "test-zone-1", "on-demand", tags={key: value})
    assert group.provider_id not in [c.status.provider_id for c in world.cloud.list()]
    world.at(3600)
    assert group.provider_id in world.running_instances()
    assert world.karpy.gc.collected_instances == []


def test_a_nodeclaim_pointing_at_a_node_group_instance_never_drains_its_node() -> None:
    world = builders.make_world()
    key, value = world.cloud.ownership_tag()
    group = world.cloud.add_instance("fake-it-1", "test-zone-1", "on-demand", tags={key: value})
    world.cluster.create(_node_group_node("ng-1", group.provider_id))
    world.cluster.create(builders.running_pod("app", "ng-1"))
    world.cluster.create(builders.nodepool_manifest())
    created = world.cluster.create({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "stale", "labels": {wk.NODEPOOL: "default"}},
        "spec": {"nodeClassRef": dict(builders.NODECLASS_REF), "requirements": []}})
    world.cluster.update_status({**created, "metadata": dict(created["metadata"]),
                                 "status": {"providerID": group.provider_id}})
    world.at(3600)
    node = world.cluster.get("Node", "ng-1")
    assert not node["metadata"].get("deletionTimestamp")
    assert wk.FINALIZER_TERMINATION not in (node["metadata"].get("finalizers") or [])
    assert not any(t.get("key") == "karpenter.sh/disrupted" for t in node["spec"].get("taints") or [])
    assert world.cluster.get("Pod", "app", "default")["spec"]["nodeName"] == "ng-1"
    assert group.provider_id in world.running_instances()
    assert world.events(ownership.REASON_FOREIGN_NODE, "stale")
    assert [c for c in world.nodeclaims() if c["metadata"]["name"] == "stale"] == []  # it went; the node stayed


def test_delete_refuses_an_instance_without_karpys_nodepool_and_nodeclass_tags() -> None:
    world = builders.make_world()
    key, value = world.cloud.ownership_tag()
    group = world.cloud.add_instance("fake-it-1", "test-zone-1", "on-demand",
                                     tags={key: value, "karpenter.sh/nodeclaim": "x"})
    from karpy.api import nodeclaim

    claim = nodeclaim.NodeClaim.from_manifest({"metadata": {"name": "x"}, "status": {"providerID": group.provider_id}})
    try:
        world.cloud.delete(claim)
        raise AssertionError("deleted an instance karpy did not launch")
    except cloud_errors.NotOwnedError:
        pass
    assert group.provider_id in world.running_instances()


def test_only_nodes_that_registered_like_karpenters_may_be_adopted() -> None:
    foreign = _node_group_node("ng-1", "aws:///z/i-1")
    karpys = {**foreign, "spec": {"taints": [{"key": wk.TAINT_UNREGISTERED, "effect": "NoExecute"}]}}
    assert not ownership.may_adopt(foreign, "default")
    assert ownership.may_adopt(karpys, "default")
    other_pool = {**karpys, "metadata": {"name": "n", "labels": {wk.NODEPOOL: "other"}}}
    assert not ownership.may_adopt(other_pool, "default")
