"""The simulated cloud keeps the cloud-provider contract: offering choice, capacity, ownership,
identity formats, interruptions and drift, in virtual time."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

import pytest

from karpy import clock
from karpy.api import labels, nodeclaim, nodeclass, nodepool, quantity
from karpy.cloudprovider import errors, instancetype, interface
from karpy.cloudprovider.fake import provider

GIB = 2**30 * quantity.MILLI
ZONE_A, ZONE_B = "zone-a", "zone-b"
SPOT, OD = labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND
OVERHEAD = instancetype.Overhead(kube_reserved={"cpu": 100, "memory": GIB // 4})


def _type(name: str, cpu: int, mem_gib: int, prices: dict[tuple[str, str], float],
          arch: str = "amd64") -> instancetype.InstanceType:
    return instancetype.InstanceType(
        name=name,
        labels={labels.INSTANCE_TYPE: name, labels.ARCH: arch, labels.OS: "linux",
                "example.com/family": name.split("-", maxsplit=1)[0]},
        capacity={"cpu": cpu * 1000, "memory": mem_gib * GIB, "pods": 110_000},
        overhead=OVERHEAD,
        offerings=tuple(instancetype.Offering(z, ct, p) for (z, ct), p in prices.items()),
    )


CATALOG = (
    _type("small", 2, 4,
          {(ZONE_A, OD): 0.10, (ZONE_B, OD): 0.11, (ZONE_A, SPOT): 0.03, (ZONE_B, SPOT): 0.04}),
    _type("medium", 4, 8,
          {(ZONE_A, OD): 0.20, (ZONE_B, OD): 0.19, (ZONE_A, SPOT): 0.06, (ZONE_B, SPOT): 0.07}),
    _type("big-arm", 8, 16, {(ZONE_A, OD): 0.30, (ZONE_A, SPOT): 0.09}, arch="arm64"),
)


def new_cloud(seed: int = 1, *, catalog: str | Sequence[instancetype.InstanceType] = CATALOG,
              **kwargs: Any) -> tuple[provider.SimulatedCloud, clock.VirtualClock]:
    vclock = clock.VirtualClock()
    kwargs.setdefault("provider_format", "aws" if not isinstance(catalog, str) else None)
    return provider.SimulatedCloud(vclock, random.Random(seed), catalog=catalog, **kwargs), vclock


def claim(name: str = "default-abcde", *, requirements: Sequence[tuple[str, str, Sequence[str]]] = (),
          cpu: str = "1", node_class: str | None = None) -> nodeclaim.NodeClaim:
    spec: dict[str, Any] = {
        "requirements": [{"key": k, "operator": op, "values": list(v)} for k, op, v in requirements],
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi", "pods": "1"}},
    }
    if node_class is not None:
        spec["nodeClassRef"] = {"group": labels.AWS_GROUP, "kind": "EC2NodeClass", "name": node_class}
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {labels.NODEPOOL: "default"}},
        "spec": spec,
    })


def on_demand(*more: tuple[str, str, Sequence[str]]) -> tuple[tuple[str, str, Sequence[str]], ...]:
    return ((labels.CAPACITY_TYPE, "In", [OD]), *more)


def expect_launched(c: nodeclaim.NodeClaim, instance_type: str, zone: str, capacity_type: str) -> None:
    assert (c.labels[labels.INSTANCE_TYPE], c.labels[labels.ZONE], c.labels[labels.CAPACITY_TYPE]) == (
        instance_type, zone, capacity_type)


def test_the_simulated_cloud_satisfies_the_cloud_provider_protocol() -> None:
    cloud, _ = new_cloud()
    as_protocol: interface.CloudProvider = cloud
    queue: interface.InterruptionQueue = cloud
    assert as_protocol.name == "fake"
    assert queue.pending_interruptions() == []


def test_create_launches_the_cheapest_compatible_offering() -> None:
    cloud, vclock = new_cloud()
    launched = cloud.create(claim(requirements=on_demand()))
    expect_launched(launched, "small", ZONE_A, OD)
    assert launched.status.provider_id.startswith(f"aws:///{ZONE_A}/i-")
    assert launched.status.image_id.startswith("ami-")
    assert launched.status.capacity["cpu"] == 2000
    assert launched.status.allocatable["cpu"] == 1900
    assert launched.labels[labels.REGION] == "us-east-1"
    assert launched.labels[labels.ARCH] == "amd64"
    assert launched.labels[labels.OS] == "linux"
    assert launched.labels["example.com/family"] == "small"
    assert launched.labels[labels.NODEPOOL] == "default"
    assert cloud.cost_per_hour() == pytest.approx(0.10)
    inst = cloud.instance(launched.status.provider_id)
    assert inst is not None and inst.launch_time == vclock.now()


def test_create_does_not_modify_the_nodeclaim_it_was_given() -> None:
    cloud, _ = new_cloud()
    original = claim(requirements=on_demand())
    cloud.create(original)
    assert original.status.provider_id == ""
    assert labels.INSTANCE_TYPE not in original.labels


def test_create_respects_zone_capacity_type_and_instance_type_requirements() -> None:
    cloud, _ = new_cloud()
    launched = cloud.create(claim(requirements=on_demand(
        (labels.ZONE, "In", [ZONE_B]), (labels.INSTANCE_TYPE, "In", ["small", "big-arm"]))))
    expect_launched(launched, "small", ZONE_B, OD)


def test_create_respects_requirements_on_other_instance_labels() -> None:
    cloud, _ = new_cloud()
    launched = cloud.create(claim(requirements=on_demand((labels.ARCH, "In", ["arm64"]))))
    expect_launched(launched, "big-arm", ZONE_A, OD)
    not_small = ("example.com/family", "NotIn", ["small"])
    launched = cloud.create(claim("other", requirements=on_demand(not_small)))
    expect_launched(launched, "medium", ZONE_B, OD)


def test_create_ignores_requirements_on_labels_no_instance_type_defines() -> None:
    cloud, _ = new_cloud()
    launched = cloud.create(claim(requirements=on_demand(("team", "In", ["payments"]))))
    expect_launched(launched, "small", ZONE_A, OD)


def test_create_skips_instance_types_whose_allocatable_cannot_hold_the_requests() -> None:
    cloud, _ = new_cloud()
    launched = cloud.create(claim(requirements=on_demand(), cpu="1950m"))
    expect_launched(launched, "medium", ZONE_B, OD)


def test_create_prefers_spot_when_the_requirements_allow_both() -> None:
    cloud, _ = new_cloud()
    launched = cloud.create(claim(requirements=[(labels.CAPACITY_TYPE, "In", [SPOT, OD])]))
    expect_launched(launched, "small", ZONE_A, SPOT)
    assert cloud.cost_per_hour() == pytest.approx(0.03)


def test_create_falls_back_to_on_demand_when_no_spot_offering_has_capacity() -> None:
    cloud, vclock = new_cloud()
    for it in CATALOG:
        for o in it.offerings:
            if o.capacity_type == SPOT:
                cloud.mark_insufficient(it.name, o.zone, SPOT, until=vclock.now() + 600)
    launched = cloud.create(claim())
    expect_launched(launched, "small", ZONE_A, OD)


def test_insufficient_capacity_on_the_cheapest_offering_falls_back_to_the_next_cheapest() -> None:
    cloud, vclock = new_cloud()
    cloud.mark_insufficient("small", ZONE_A, SPOT, until=vclock.now() + 600)
    launched = cloud.create(claim(requirements=[(labels.CAPACITY_TYPE, "In", [SPOT])]))
    expect_launched(launched, "small", ZONE_B, SPOT)


def test_create_raises_insufficient_capacity_naming_every_offering_when_all_are_out() -> None:
    cloud, vclock = new_cloud()
    cloud.mark_insufficient("small", ZONE_A, SPOT, until=vclock.now() + 600)
    cloud.mark_insufficient("small", ZONE_B, SPOT, until=vclock.now() + 600)
    with pytest.raises(errors.InsufficientCapacityError) as caught:
        cloud.create(claim(requirements=[(labels.CAPACITY_TYPE, "In", [SPOT]),
                                         (labels.INSTANCE_TYPE, "In", ["small"])]))
    assert caught.value.offerings == (("small", ZONE_A, SPOT), ("small", ZONE_B, SPOT))
    assert errors.is_retryable(caught.value)
    assert cloud.instances() == []


def test_an_offering_marked_insufficient_has_capacity_again_after_the_marked_time() -> None:
    cloud, vclock = new_cloud()
    cloud.mark_insufficient("small", ZONE_A, OD, until=vclock.now() + 600)
    only = claim(requirements=on_demand((labels.INSTANCE_TYPE, "In", ["small"]),
                                        (labels.ZONE, "In", [ZONE_A])))
    with pytest.raises(errors.InsufficientCapacityError):
        cloud.create(only)
    vclock.advance(600)
    expect_launched(cloud.create(only), "small", ZONE_A, OD)


def test_a_capacity_pool_of_one_instance_admits_another_launch_only_after_termination() -> None:
    cloud, _ = new_cloud()
    cloud.set_capacity("small", ZONE_A, OD, 1)
    first = cloud.create(claim("a", requirements=on_demand()))
    second = cloud.create(claim("b", requirements=on_demand()))
    expect_launched(first, "small", ZONE_A, OD)
    expect_launched(second, "small", ZONE_B, OD)
    cloud.delete(first)
    expect_launched(cloud.create(claim("c", requirements=on_demand())), "small", ZONE_A, OD)


def test_get_instance_types_shows_offerings_without_capacity_as_unavailable() -> None:
    cloud, vclock = new_cloud()
    cloud.mark_insufficient("medium", ZONE_B, SPOT, until=vclock.now() + 60)
    pool = nodepool.NodePool.from_manifest({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                            "metadata": {"name": "default"}, "spec": {"template": {"spec": {
                                                "requirements": []}}}})
    types = {t.name: t for t in cloud.get_instance_types(pool)}
    medium = {(o.zone, o.capacity_type): o.available for o in types["medium"].offerings}
    assert medium[(ZONE_B, SPOT)] is False
    assert medium[(ZONE_A, SPOT)] is True
    assert all(o.available for o in types["small"].offerings)
    vclock.advance(60)
    types = {t.name: t for t in cloud.get_instance_types(None)}
    assert all(o.available for o in types["medium"].offerings)


def test_create_without_any_compatible_instance_type_is_a_create_error_that_is_not_retryable() -> None:
    cloud, _ = new_cloud()
    with pytest.raises(errors.CreateError) as caught:
        cloud.create(claim(requirements=on_demand(), cpu="64"))
    assert caught.value.reason == "NoCompatibleInstanceTypes"
    assert not caught.value.retryable


def test_a_launch_failure_rate_of_one_fails_every_launch_with_a_retryable_create_error() -> None:
    cloud, _ = new_cloud(launch_failure_rate=1.0)
    with pytest.raises(errors.CreateError) as caught:
        cloud.create(claim())
    assert caught.value.retryable
    assert cloud.list() == []


def test_deleting_twice_raises_nodeclaim_not_found_the_second_time() -> None:
    cloud, _ = new_cloud()
    launched = cloud.create(claim())
    cloud.delete(launched)
    with pytest.raises(errors.NodeClaimNotFoundError):
        cloud.delete(launched)
    assert cloud.cost_per_hour() == 0
    assert [i.state for i in cloud.instances()] == ["terminated"]


def test_delete_refuses_an_instance_of_another_cluster() -> None:
    cloud, _ = new_cloud()
    foreign = cloud.add_instance("small", ZONE_A, tags={"kubernetes.io/cluster/other": "owned",
                                                        "karpenter.sh/nodeclaim": "theirs"})
    theirs = nodeclaim.NodeClaim.from_manifest({"metadata": {"name": "theirs"},
                                                "status": {"providerID": foreign.provider_id}})
    with pytest.raises(errors.NotOwnedError) as caught:
        cloud.delete(theirs)
    assert not caught.value.retryable
    assert cloud.instance(foreign.provider_id) is not None
    with pytest.raises(errors.NodeClaimNotFoundError):
        cloud.get(foreign.provider_id)


def test_list_returns_the_instances_launched_for_this_cluster_only() -> None:
    cloud, vclock = new_cloud()
    first = cloud.create(claim("default-a"))
    vclock.advance(30)
    second = cloud.create(claim("default-b", requirements=on_demand()))
    cloud.add_instance("medium", ZONE_A, tags={"kubernetes.io/cluster/other": "owned"})
    leaked = cloud.add_instance("medium", ZONE_B, tags=cloud.karpy_tags("default", "default-c"),
                                nodeclaim_name="default-c")
    listed = cloud.list()
    assert [c.name for c in listed] == ["default-a", "default-b", "default-c"]
    assert [c.status.provider_id for c in listed] == [
        first.status.provider_id, second.status.provider_id, leaked.provider_id]
    assert listed[1].metadata.creation_timestamp == vclock.now()
    assert listed[1].labels[labels.INSTANCE_TYPE] == "small"
    assert listed[1].labels[labels.CAPACITY_TYPE] == OD
    cloud.delete(first)
    assert [c.name for c in cloud.list()] == ["default-b", "default-c"]


def test_get_returns_a_launched_instance_until_it_is_deleted() -> None:
    cloud, _ = new_cloud()
    launched = cloud.create(claim())
    got = cloud.get(launched.status.provider_id)
    assert got.name == launched.name
    assert got.labels[labels.ZONE] == launched.labels[labels.ZONE]
    cloud.delete(launched)
    with pytest.raises(errors.NodeClaimNotFoundError):
        cloud.get(launched.status.provider_id)


def _ids(seed: int) -> list[str]:
    cloud, _ = new_cloud(seed)
    return [cloud.create(claim(f"c{i}")).status.provider_id for i in range(3)]


def test_instance_ids_are_the_same_with_the_same_seed_and_differ_with_another() -> None:
    assert _ids(42) == _ids(42)
    assert _ids(42) != _ids(43)
    assert len(set(_ids(42))) == 3


AWS_ID = re.compile(r"^aws:///[a-z0-9-]+/i-[0-9a-f]{17}$")
AZURE_ID = re.compile(
    r"^azure:///subscriptions/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"/resourceGroups/[\w.-]+/providers/Microsoft\.Compute/virtualMachines/[a-z0-9-]+$")
KWOK_ID = re.compile(r"^kwok://[a-z0-9-]+$")


@pytest.mark.parametrize(("fmt", "pattern"), [("aws", AWS_ID), ("azure", AZURE_ID), ("kwok", KWOK_ID)])
def test_provider_ids_match_the_real_format(fmt: str, pattern: re.Pattern[str]) -> None:
    cloud, _ = new_cloud(provider_format=fmt)
    pid = cloud.create(claim("default-x7k2p")).status.provider_id
    assert pattern.match(pid), pid
    if fmt != "aws":
        assert pid.endswith("default-x7k2p")


def test_the_aws_catalog_launches_m5_large_and_r5_large_at_their_on_demand_prices() -> None:
    cloud, _ = new_cloud(catalog="aws")
    assert cloud.provider_format == "aws"
    m5 = cloud.create(claim("a", requirements=on_demand(
        (labels.INSTANCE_TYPE, "In", ["m5.large", "r5.large"]), (labels.ZONE, "In", ["us-east-1a"]))))
    expect_launched(m5, "m5.large", "us-east-1a", OD)
    assert AWS_ID.match(m5.status.provider_id)
    assert m5.status.provider_id.startswith("aws:///us-east-1a/i-")
    assert m5.labels[labels.AWS_INSTANCE_FAMILY] == "m5"
    assert cloud.cost_per_hour() == pytest.approx(0.096)
    r5 = cloud.create(claim("b", requirements=on_demand((labels.INSTANCE_TYPE, "In", ["r5.large"]))))
    assert r5.labels[labels.INSTANCE_TYPE] == "r5.large"
    assert cloud.cost_per_hour() == pytest.approx(0.096 + 0.126)


def test_a_spot_interruption_is_queued_and_the_instance_is_reclaimed_two_minutes_later() -> None:
    cloud, vclock = new_cloud()
    launched = cloud.create(claim())
    pid = launched.status.provider_id
    notice_time = vclock.now()
    notice = cloud.interrupt(pid, "SpotInterruption")
    assert [(m.provider_id, m.kind, m.time) for m in cloud.pending_interruptions()] == [
        (pid, "SpotInterruption", notice_time)]
    vclock.advance(119)
    assert cloud.get(pid).name == launched.name
    vclock.advance(1)
    with pytest.raises(errors.NodeClaimNotFoundError):
        cloud.get(pid)
    pending = cloud.pending_interruptions()
    assert [(m.kind, m.time, m.detail) for m in pending] == [
        ("SpotInterruption", notice_time, ""), ("StateChange", notice_time + 120, "terminated")]
    (terminated,) = cloud.instances()
    assert terminated.terminated_at == notice_time + 120
    cloud.ack(notice)
    assert [m.kind for m in cloud.pending_interruptions()] == ["StateChange"]
    cloud.ack(pending[1])
    assert cloud.pending_interruptions() == []


def test_a_spot_interruption_of_an_instance_karpy_already_deleted_sends_no_state_change() -> None:
    cloud, vclock = new_cloud()
    launched = cloud.create(claim())
    notice = cloud.interrupt(launched.status.provider_id)
    cloud.delete(launched)
    vclock.advance(300)
    assert cloud.pending_interruptions() == [notice]


def test_rebalance_recommendations_do_not_terminate_the_instance() -> None:
    cloud, vclock = new_cloud()
    launched = cloud.create(claim())
    cloud.interrupt(launched.status.provider_id, "Rebalance")
    vclock.advance(3600)
    assert cloud.get(launched.status.provider_id).name == launched.name
    assert [m.kind for m in cloud.pending_interruptions()] == ["Rebalance"]


def test_a_spot_interruption_of_an_on_demand_instance_is_refused() -> None:
    cloud, _ = new_cloud()
    launched = cloud.create(claim(requirements=on_demand()))
    with pytest.raises(ValueError, match="not spot"):
        cloud.interrupt(launched.status.provider_id, "SpotInterruption")


def _ec2_nodeclass(name: str = "default", *, tags: dict[str, str] | None = None,
                   ready: bool = True) -> nodeclass.EC2NodeClass:
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
        "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole",
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "karpy"}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "karpy"}}],
                 "tags": tags or {}},
    }
    if not ready:
        unready = {"type": "Ready", "status": "False", "reason": "SubnetsNotFound"}
        manifest["status"] = {"conditions": [unready]}
    return nodeclass.EC2NodeClass.from_manifest(manifest)


def test_is_drifted_reports_nodeclass_drift_after_the_nodeclass_hash_changes() -> None:
    classes = {"default": _ec2_nodeclass(tags={"team": "a"})}
    cloud, _ = new_cloud(node_classes=classes.get)
    launched = cloud.create(claim(node_class="default"))
    assert launched.metadata.annotations[labels.NODECLASS_HASH_AWS] == classes["default"].hash()
    assert cloud.instances()[0].tags["team"] == "a"
    assert cloud.is_drifted(launched) == ""
    classes["default"] = _ec2_nodeclass(tags={"team": "b"})
    assert cloud.is_drifted(launched) == "NodeClassDrift"


def test_is_drifted_reports_ami_drift_after_a_new_image_is_published() -> None:
    classes = {"default": _ec2_nodeclass()}
    cloud, _ = new_cloud(node_classes=classes.get)
    launched = cloud.create(claim(node_class="default"))
    cloud.publish_image("ami-0123456789abcdef0")
    assert cloud.is_drifted(launched) == "AMIDrift"
    relaunched = cloud.create(claim("default-new", node_class="default"))
    assert relaunched.status.image_id == "ami-0123456789abcdef0"
    assert cloud.is_drifted(relaunched) == ""


def test_create_raises_nodeclass_not_ready_for_a_missing_or_unready_nodeclass() -> None:
    classes = {"broken": _ec2_nodeclass("broken", ready=False)}
    cloud, _ = new_cloud(node_classes=classes.get)
    with pytest.raises(errors.NodeClassNotReadyError) as caught:
        cloud.create(claim(node_class="missing"))
    assert caught.value.retryable
    with pytest.raises(errors.NodeClassNotReadyError, match="not ready"):
        cloud.create(claim(node_class="broken"))
    assert cloud.instances() == []


def test_the_nodeclass_kubelet_max_pods_changes_allocatable_for_the_aws_catalog() -> None:
    manifest = _ec2_nodeclass().to_manifest()
    manifest["spec"]["kubelet"] = {"maxPods": 7}
    classes = {"default": nodeclass.EC2NodeClass.from_manifest(manifest)}
    cloud, _ = new_cloud(catalog="aws", node_classes=classes.get)
    launched = cloud.create(claim(node_class="default", requirements=on_demand(
        (labels.INSTANCE_TYPE, "In", ["m5.large"]))))
    assert launched.status.allocatable["pods"] == 7000
    plain = cloud.create(claim("plain", requirements=on_demand((labels.INSTANCE_TYPE, "In", ["m5.large"]))))
    assert plain.status.allocatable["pods"] == 29000
