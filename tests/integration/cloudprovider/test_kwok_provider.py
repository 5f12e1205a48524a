"""The KWOK cloud provider on the in-memory cluster: NodeClaims become KWOK-managed Node objects."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from karpy import clock, operator, settings
from karpy.api import labels, nodeclaim
from karpy.cloudprovider import errors
from karpy.cloudprovider.kwok import factory, instancetypes, provider
from karpy.controllers import runtime
from karpy.kube import interface, memory

KWOK_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}


def claim(name: str, *, cpu: str = "1", requirements: list[dict[str, Any]] | None = None,
          provider_id: str = "") -> nodeclaim.NodeClaim:
    reqs = requirements if requirements is not None else [
        {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["c-2x-amd64-linux", "s-2x-amd64-linux"]},
        {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": labels.NODEPOOL, "operator": "In", "values": ["default"]}]
    manifest: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {labels.NODEPOOL: "default"}},
        "spec": {"requirements": reqs, "nodeClassRef": dict(KWOK_CLASS),
                 "resources": {"requests": {"cpu": cpu}}},
    }
    if provider_id:
        manifest["status"] = {"providerID": provider_id}
    return nodeclaim.NodeClaim.from_manifest(manifest)


def kwok(cluster_name: str = "test") -> tuple[memory.InMemoryCluster, provider.KwokCloudProvider]:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock, rng=random.Random(1))
    return cluster, factory.build(settings.Settings(cluster_name=cluster_name), vclock, cluster)


def test_a_nodeclaim_becomes_a_node_marked_for_kwok_with_the_cheapest_compatible_offering() -> None:
    cluster, cloud = kwok()
    launched = cloud.create(claim("default-abcde"))
    node = cluster.get("Node", "default-abcde")
    assert launched.status.provider_id == node["spec"]["providerID"] == "kwok://default-abcde"
    node_labels = node["metadata"]["labels"]
    assert node_labels[labels.INSTANCE_TYPE] == "c-2x-amd64-linux"  # cheaper than s-2x (less memory)
    assert node_labels[labels.CAPACITY_TYPE] == "on-demand"
    assert node_labels[labels.ZONE] in instancetypes.ZONES
    assert node_labels["kwok.x-k8s.io/node"] == "fake"
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node_labels[provider.OWNER_LABEL] == "test"
    assert node_labels[labels.HOSTNAME] == "default-abcde"
    assert node["spec"]["taints"] == [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]
    assert node["status"]["capacity"]["cpu"] == "2"
    assert launched.status.allocatable["cpu"] == 1900  # 2 vCPU - 100m kube-reserved
    assert launched.labels[labels.INSTANCE_TYPE] == "c-2x-amd64-linux"


def test_creating_again_after_a_restart_returns_the_node_already_made() -> None:
    cluster, cloud = kwok()
    first = cloud.create(claim("default-abcde"))
    again = cloud.create(claim("default-abcde"))
    assert again.status.provider_id == first.status.provider_id
    assert len(cluster.list("Node")) == 1


def test_a_node_of_someone_else_is_never_deleted_listed_or_reused() -> None:
    cluster, cloud = kwok()
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "theirs", "labels": {
        provider.OWNER_LABEL: "other-cluster"}}, "spec": {"providerID": "kwok://theirs"}})
    cloud.create(claim("mine"))
    assert [c.name for c in cloud.list()] == ["mine"]
    with pytest.raises(errors.NotOwnedError):
        cloud.delete(claim("x", provider_id="kwok://theirs"))
    with pytest.raises(errors.NodeClaimNotFoundError):
        cloud.get("kwok://theirs")
    with pytest.raises(errors.CreateError, match="not launched by karpy"):
        cloud.create(claim("theirs"))
    assert cluster.get("Node", "theirs")["metadata"]["labels"][provider.OWNER_LABEL] == "other-cluster"


def test_delete_removes_the_node_and_then_reports_it_gone() -> None:
    cluster, cloud = kwok()
    launched = cloud.create(claim("mine"))
    cloud.delete(launched)
    assert cluster.list("Node") == []
    with pytest.raises(errors.NodeClaimNotFoundError):
        cloud.delete(launched)
    with pytest.raises(errors.NodeClaimNotFoundError):
        cloud.get(launched.status.provider_id)


def test_no_compatible_offering_is_a_create_error_that_is_not_retried() -> None:
    _, cloud = kwok()
    with pytest.raises(errors.CreateError) as info:
        cloud.create(claim("huge", cpu="1000"))
    assert not info.value.retryable


def test_the_catalog_node_class_and_repair_policies_are_karpenters_kwok_ones() -> None:
    _, cloud = kwok()
    assert len(cloud.get_instance_types(None)) == 144
    ready = cloud.resolve_node_class({"kind": "KWOKNodeClass", "metadata": {"name": "default"}})
    assert ready["conditions"][0]["status"] == "True"
    other = cloud.resolve_node_class({"kind": "EC2NodeClass", "metadata": {"name": "default"}})
    assert other["conditions"][0]["reason"] == "UnsupportedNodeClass"
    assert {(p.condition_type, p.condition_status) for p in cloud.repair_policies()} == {
        ("Ready", "False"), ("Ready", "Unknown")}
    with pytest.raises(errors.CloudProviderError, match="takes no options"):
        factory.build(settings.Settings(), clock.VirtualClock(), cloud.cluster, region="x")


def test_karpys_controllers_provision_register_initialize_and_terminate_kwok_nodes() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock, rng=random.Random(1))
    manager = runtime.Manager(cluster, vclock)
    cloud = factory.build(settings.Settings(cluster_name="test"), vclock, cluster)
    operator.register_all(manager, cluster, cloud, vclock, settings.Settings(cluster_name="test"))

    def run(seconds: float) -> None:
        end = vclock.now() + seconds
        while True:
            due = manager.next_due()
            if due is None or due > end:
                break
            vclock.set(max(due, vclock.now()))
            manager.run_due()
        vclock.set(end)

    cluster.create({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                    "spec": {"template": {"spec": {"nodeClassRef": dict(KWOK_CLASS), "requirements": []}}}})
    cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                    "status": {"phase": "Pending", "conditions": [
                        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
    run(15)
    (nc,) = cluster.list("NodeClaim")
    node = cluster.get("Node", interface.name_of(nc))
    assert node["spec"]["providerID"] == nc["status"]["providerID"]
    assert node["metadata"]["labels"][labels.REGISTERED] == "true"
    assert not any(t["key"] == "karpenter.sh/unregistered" for t in node["spec"].get("taints") or [])
    # KWOK's controller marks the node Ready; karpy then initializes it
    cluster.patch_status("Node", interface.name_of(node), {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}})
    run(5)
    assert cluster.get("Node", interface.name_of(node))["metadata"]["labels"][labels.INITIALIZED] == "true"
    cluster.delete("Pod", "web", "default")
    cluster.delete("NodeClaim", interface.name_of(nc))
    run(30)
    assert cluster.list("NodeClaim") == [] and cluster.list("Node") == []


LABEL_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"
"""What kube-apiserver accepts as a label value (validation.IsValidLabelValue)."""


@pytest.mark.parametrize("name", ["c" * 64, "prod-" + "x" * 95, "eks_cluster-" + "y" * 60 + "_", "-odd." + "z" * 70])
def test_a_cluster_name_over_63_characters_gives_a_valid_distinct_owner_label_and_the_provider_still_owns_its_nodes(
        name: str) -> None:
    cluster, cloud = kwok(name)
    cloud.create(claim("mine"))
    value = cluster.get("Node", "mine")["metadata"]["labels"][provider.OWNER_LABEL]
    assert re.fullmatch(LABEL_VALUE, value) and len(value) <= 63, value
    assert value != provider.owner_value(name[:-1] + "q"), "two long names sharing a prefix stay distinct"
    assert [c.name for c in cloud.list()] == ["mine"]
    cloud.delete(claim("mine", provider_id="kwok://mine"))


def test_a_cluster_name_that_is_a_valid_label_value_is_the_owner_label_as_it_is() -> None:
    assert provider.owner_value("c" * 63) == "c" * 63
    assert provider.owner_value("prod.eu-west_1") == "prod.eu-west_1"


def test_nodeclaims_free_to_go_to_any_zone_are_spread_over_the_zones_and_a_deleted_node_frees_its_zone() -> None:
    _, cloud = kwok()
    launched = [cloud.create(claim(f"default-{i}")) for i in range(8)]
    zones = [c.labels[labels.ZONE] for c in launched]
    assert sorted(zones) == sorted(instancetypes.ZONES * 2)  # before: every one in test-zone-a
    assert {c.labels[labels.INSTANCE_TYPE] for c in launched} == {"c-2x-amd64-linux"}
    gone = launched[5]
    cloud.delete(gone)
    again = cloud.create(claim("default-again"))
    assert again.labels[labels.ZONE] == gone.labels[labels.ZONE]


def test_a_restarted_provider_counts_the_nodes_already_in_each_zone() -> None:
    cluster, cloud = kwok()
    first = [cloud.create(claim(f"default-{i}")) for i in range(3)]
    restarted = factory.build(settings.Settings(cluster_name="test"), clock.VirtualClock(), cluster)
    fourth = restarted.create(claim("default-3"))
    assert fourth.labels[labels.ZONE] not in {c.labels[labels.ZONE] for c in first}


def test_a_nodeclaim_narrowed_to_one_zone_launches_there_whatever_the_counts() -> None:
    _, cloud = kwok()
    reqs = [{"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["c-2x-amd64-linux"]},
            {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
            {"key": labels.ZONE, "operator": "In", "values": ["test-zone-a"]}]
    zones = {cloud.create(claim(f"default-{i}", requirements=reqs)).labels[labels.ZONE] for i in range(3)}
    assert zones == {"test-zone-a"}
