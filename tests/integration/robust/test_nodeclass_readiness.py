"""A NodePool whose NodeClass is missing or not Ready is not provisioned from (Karpenter v1): the
NodeClass status controller, the NodePool conditions and the provisioner's skip."""

from __future__ import annotations

from typing import Any

from karpy.controllers import nodeclass_status

from ..controllers import builders


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


def test_the_nodeclass_status_is_written_from_the_cloud_with_a_transition_time() -> None:
    world = builders.make_world()
    world.at(1)
    ready = _condition(world.cluster.get("EC2NodeClass", "default"), "Ready")
    assert ready["status"] == "True" and ready["lastTransitionTime"]


def test_a_nodepool_with_a_ready_nodeclass_is_ready_and_provisions() -> None:
    world = builders.make_world()
    world.cluster.create(builders.nodepool_manifest())
    world.cluster.create(builders.pending_pod("a"))
    world.at(60)
    pool = world.cluster.get("NodePool", "default")
    assert {c["type"]: c["status"] for c in pool["status"]["conditions"]} == {
        "NodeClassReady": "True", "ValidationSucceeded": "True", "Ready": "True",
        "NodeRegistrationHealthy": "True"}  # its NodeClaim registered (nodepool.registrationhealth)
    assert world.nodeclaims()


def test_a_nodepool_whose_nodeclass_is_missing_is_not_used_and_says_why() -> None:
    world = builders.make_world()
    world.cluster.delete("EC2NodeClass", "default")
    world.cluster.create(builders.nodepool_manifest())
    world.cluster.create(builders.pending_pod("a"))
    world.at(60)
    assert world.nodeclaims() == []
    pool = world.cluster.get("NodePool", "default")
    assert _condition(pool, "NodeClassReady")["reason"] == "NodeClassNotFound"
    assert _condition(pool, "Ready")["status"] == "False"
    failed = world.events("FailedScheduling", "a")
    assert failed and "NodeClassNotFound" in failed[-1]["message"]
    # the NodeClass appears: the NodePool becomes Ready and the pod gets capacity
    world.cluster.create(builders.nodeclass_manifest())
    world.run_for(120)
    assert _condition(world.cluster.get("NodePool", "default"), "Ready")["status"] == "True"
    assert world.nodeclaims()


def test_a_nodeclass_the_cloud_reports_not_ready_blocks_its_nodepools() -> None:
    world = builders.make_world()
    world.cloud.set_node_class_ready("EC2NodeClass", "default", False)
    world.cluster.patch("EC2NodeClass", "default", {"metadata": {"labels": {"touch": "1"}}})
    world.cluster.create(builders.nodepool_manifest())
    world.cluster.create(builders.pending_pod("a"))
    world.at(60)
    assert world.nodeclaims() == []
    nc_ready = _condition(world.cluster.get("EC2NodeClass", "default"), "Ready")
    assert (nc_ready["status"], nc_ready["reason"]) == ("False", "SubnetsNotFound")
    pool_cond = _condition(world.cluster.get("NodePool", "default"), "NodeClassReady")
    assert (pool_cond["status"], pool_cond["reason"]) == ("False", "SubnetsNotFound")
    assert world.karpy.provisioner.skipped_pools["default"].reason == "SubnetsNotFound"


def test_conditions_keep_their_transition_time_while_unchanged() -> None:
    old = [{"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    same = nodeclass_status.merge_conditions(old, [{"type": "Ready", "status": "True"}], 100.0)
    flipped = nodeclass_status.merge_conditions(old, [{"type": "Ready", "status": "False"}], 100.0)
    assert same[0]["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    assert flipped[0]["lastTransitionTime"] != "2020-01-01T00:00:00Z"


def test_a_balanced_nodepool_is_valid_and_its_condition_carries_no_warning() -> None:
    world = builders.make_world()
    pool = builders.nodepool_manifest()
    pool["spec"]["disruption"] = {"consolidationPolicy": "Balanced", "consolidateAfter": "0s"}
    world.cluster.create(pool)
    world.at(30)
    validation = _condition(world.cluster.get("NodePool", "default"), "ValidationSucceeded")
    assert validation["status"] == "True"
    assert validation["message"] == ""
