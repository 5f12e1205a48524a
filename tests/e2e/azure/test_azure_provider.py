"""The Azure provider drives the real Azure SDK pipeline against the fake ARM service on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from karpy import clock, settings
from karpy.api import labels, nodeclaim
from karpy.cloudprovider import errors
from karpy.cloudprovider.azure import bootstrap, factory, instances, instancetypes, provider
from karpy.kube import memory

from . import fake_arm

pytestmark = pytest.mark.e2e

REGION = "japaneast"
RG = "MC_rg-aks_aks-karp-test_japaneast"
SUBNET = (f"/subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/rg-aks/providers/Microsoft.Network/"
          "virtualNetworks/aks-vnet/subnets/aks-subnet")
NODE_CLASS = {"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": "default"},
              "spec": {"imageFamily": "Ubuntu2204", "osDiskSizeGB": 64, "tags": {"team/owner": "web"}}}


def skus() -> list[dict[str, Any]]:
    return [
        fake_arm.sku("Standard_D2_v4", REGION, vcpus=2, memory_gb=8),
        fake_arm.sku("Standard_D4_v4", REGION, vcpus=4, memory_gb=16),
        fake_arm.sku("Standard_D2ds_v5", REGION, vcpus=2, memory_gb=8, cached_disk_bytes=0,
                     resource_disk_mb=76800),
        fake_arm.sku("Standard_E2s_v3", REGION, vcpus=2, memory_gb=16,
                     restrictions=[{"type": "Location", "values": [REGION], "reasonCode": "NotAvailableForSubscription",
                                    "restrictionInfo": {"locations": [REGION]}}]),
        fake_arm.sku("Standard_F2s_v2", REGION, vcpus=2, memory_gb=4,
                     restrictions=[{"type": "Zone", "values": [REGION], "reasonCode": "NotAvailableForSubscription",
                                    "restrictionInfo": {"locations": [REGION], "zones": ["1", "3"]}}]),
        fake_arm.sku("Standard_B1s", REGION, vcpus=1, memory_gb=1),
        fake_arm.sku("Standard_D2_v4", "eastus"),
        fake_arm.sku("Standard_LRS", REGION, resource_type="disks"),
    ]


@dataclass
class World:
    arm: fake_arm.FakeARM
    cluster: memory.InMemoryCluster
    clock: clock.VirtualClock
    cloud: provider.AzureCloudProvider


@pytest.fixture
def world() -> Iterator[World]:
    with fake_arm.FakeARM(skus=skus()) as arm:
        vclock = clock.VirtualClock()
        cluster = memory.InMemoryCluster(vclock)
        cluster.create(dict(NODE_CLASS))
        cloud = factory.build(
            settings.Settings(cluster_name="aks-karp-test", cluster_endpoint="https://aks-karp-test.hcp.azmk8s.io"),
            vclock, cluster, environ={}, subscription_id=fake_arm.SUBSCRIPTION, resource_group=RG, region=REGION,
            subnet_id=SUBNET, endpoint_url=arm.endpoint, polling_interval=0, retail_prices_endpoint="",
            ssh_public_key="ssh-rsa AAAA karpy")
        assert isinstance(cloud, provider.AzureCloudProvider)
        yield World(arm, cluster, vclock, cloud)


def claim(name: str = "default-65f84", *, capacity_types: tuple[str, ...] = ("on-demand",),
          families: tuple[str, ...] = ("D",), cpu: str = "500m",
          sizes: tuple[str, ...] = ()) -> nodeclaim.NodeClaim:
    extra = [{"key": labels.INSTANCE_TYPE, "operator": "In", "values": list(sizes)}] if sizes else []
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {labels.NODEPOOL: "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"},
            "requirements": [
                {"key": labels.CAPACITY_TYPE, "operator": "In", "values": list(capacity_types)},
                {"key": labels.AZURE_SKU_FAMILY, "operator": "In", "values": list(families)},
                *extra,
            ],
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
        },
    })


def vm_puts(arm: fake_arm.FakeARM) -> list[dict[str, Any]]:
    return [c.body for c in arm.put_calls("virtualMachines")]


def test_sku_discovery_keeps_the_regions_unrestricted_sizes_aks_can_run(world: World) -> None:
    types = {t.name: t for t in world.cloud.get_instance_types(None)}
    assert sorted(types) == ["Standard_D2_v4", "Standard_D2ds_v5", "Standard_D4_v4", "Standard_F2s_v2"]
    assert types["Standard_F2s_v2"].zones == frozenset({"japaneast-2"})
    d2 = types["Standard_D2_v4"]
    assert d2.labels[labels.AZURE_SKU_FAMILY] == "D" and d2.labels[labels.AZURE_SKU_VERSION] == "4"
    assert d2.labels[labels.AZURE_SKU_MEMORY] == "8192" and d2.labels[labels.AZURE_SKU_CPU] == "2"
    assert d2.zones == frozenset({"japaneast-1", "japaneast-2", "japaneast-3"})
    packaged = instancetypes.on_demand_prices(REGION)["Standard_D2_v4"]
    assert d2.cheapest_price(capacity_types=frozenset({"on-demand"})) == packaged  # no live prices asked
    sku_calls = [c for c in world.arm.requests if c.path.endswith("/Microsoft.Compute/skus")]
    assert len(sku_calls) == 1


def test_the_node_class_os_disk_sets_ephemeral_storage(world: World) -> None:
    pool = None
    types = {t.name: t for t in world.cloud.get_instance_types(pool)}
    assert types["Standard_D2_v4"].capacity["ephemeral-storage"] == 128 * 10**9 * 1000
    launched = world.cloud.create(claim())
    assert launched.status.capacity["ephemeral-storage"] == 64 * 10**9 * 1000


def test_create_sends_a_nic_and_a_vm_with_karpenters_shape(world: World) -> None:
    launched = world.cloud.create(claim())
    assert launched.status.provider_id == (
        f"azure:///subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/{RG}/providers/Microsoft.Compute/"
        "virtualMachines/aks-default-65f84")
    assert launched.metadata.labels[labels.INSTANCE_TYPE] == "Standard_D2_v4"
    assert launched.metadata.labels[labels.CAPACITY_TYPE] == "on-demand"
    assert launched.metadata.labels["kubernetes.azure.com/cluster"] == RG
    assert launched.metadata.annotations[labels.NODECLASS_HASH_AZURE]
    [nic] = [c.body for c in world.arm.put_calls("networkInterfaces")]
    assert nic["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"] == SUBNET
    assert nic["properties"]["enableAcceleratedNetworking"] is True
    [vm] = vm_puts(world.arm)
    expected_tags = {"karpenter.azure.com_cluster": "aks-karp-test", "karpenter.sh_nodepool": "default",
                     "karpenter.sh_nodeclaim": "default-65f84", "compute.aks.billing": "linux",
                     "karpenter.azure.com_aksnodeclass": "default", "team_owner": "web"}
    assert vm["tags"] == expected_tags and nic["tags"] == expected_tags
    props = vm["properties"]
    assert props["hardwareProfile"] == {"vmSize": "Standard_D2_v4"}
    assert props["priority"] == "Regular" and "evictionPolicy" not in props
    assert vm["zones"] == ["1"] and vm["location"] == REGION
    os_disk = props["storageProfile"]["osDisk"]
    assert os_disk["diskSizeGB"] == 64 and os_disk["deleteOption"] == "Delete"
    assert os_disk["managedDisk"] == {"storageAccountType": "Premium_LRS"}
    assert props["storageProfile"]["imageReference"]["communityGalleryImageId"].endswith(
        "/images/2204gen2containerd/versions/202501.02.0")
    assert props["networkProfile"]["networkInterfaces"][0]["id"].endswith("/networkInterfaces/aks-default-65f84")
    env = bootstrap.variables_of(bootstrap.decode(props["osProfile"]["customData"]))
    assert env["API_SERVER_NAME"] == "aks-karp-test.hcp.azmk8s.io"
    assert "karpenter.azure.com/sku-family=D" in env["KUBELET_NODE_LABELS"].split(",")
    assert "--register-with-taints=dedicated=web:NoSchedule,karpenter.sh/unregistered:NoExecute" in (
        env["KUBELET_FLAGS"].split())
    assert props["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"] == "ssh-rsa AAAA karpy"
    assert all(c.path != "/api/retail/prices" for c in world.arm.requests)


def test_an_ephemeral_os_disk_is_used_where_the_size_holds_it(world: World) -> None:
    world.cloud.create(claim(sizes=("Standard_D2ds_v5",)))
    [vm] = vm_puts(world.arm)
    os_disk = vm["properties"]["storageProfile"]["osDisk"]
    assert os_disk["diffDiskSettings"] == {"option": "Local", "placement": "ResourceDisk"}
    assert "managedDisk" not in os_disk
    assert not world.arm.of_type("disks")


def test_spot_vms_are_deleted_on_eviction_at_any_price(world: World) -> None:
    launched = world.cloud.create(claim(capacity_types=("spot", "on-demand")))
    assert launched.metadata.labels[labels.CAPACITY_TYPE] == "spot"
    [vm] = vm_puts(world.arm)
    assert vm["properties"]["priority"] == "Spot"
    assert vm["properties"]["evictionPolicy"] == "Delete"
    assert vm["properties"]["billingProfile"] == {"maxPrice": -1}


def test_a_zonal_allocation_failure_moves_to_another_zone_and_is_cached(world: World) -> None:
    world.arm.fail_vm("Standard_D2_v4", "ZonalAllocationFailed", zone="1")
    launched = world.cloud.create(claim())
    assert launched.metadata.labels[labels.ZONE] == "japaneast-2"
    assert [(b["properties"]["hardwareProfile"]["vmSize"], b["zones"]) for b in vm_puts(world.arm)] == [
        ("Standard_D2_v4", ["1"]), ("Standard_D2_v4", ["2"])]
    d2 = {t.name: t for t in world.cloud.get_instance_types(None)}["Standard_D2_v4"]
    gone = {(o.zone, o.capacity_type) for o in d2.offerings if not o.available}
    assert gone == {("japaneast-1", "on-demand"), ("japaneast-1", "spot")}
    # the failed VM and its NIC were cleaned up; only the launched node's resources remain
    assert set(world.arm.of_type("virtualmachines")) == {"aks-default-65f84"}
    assert set(world.arm.of_type("networkinterfaces")) == {"aks-default-65f84"}
    world.cloud.create(claim("default-second"))
    zones = [b["zones"] for b in vm_puts(world.arm)][2:]
    assert zones == [["2"]]  # zone 1 is not tried again while the cache holds it


def test_an_allocation_failure_moves_to_another_size_and_expires_after_an_hour(world: World) -> None:
    on_demand = frozenset({"on-demand"})
    by_price = sorted((t.cheapest_price(capacity_types=on_demand) or 0.0, t.name)
                      for t in world.cloud.get_instance_types(None) if t.labels[labels.AZURE_SKU_FAMILY] == "D")
    assert by_price[0][1] == "Standard_D2_v4"
    next_cheapest = by_price[1][1]
    world.arm.fail_vm("Standard_D2_v4", "AllocationFailed", synchronous=True, times=3)
    launched = world.cloud.create(claim())
    assert launched.metadata.labels[labels.INSTANCE_TYPE] == next_cheapest
    assert [b["properties"]["hardwareProfile"]["vmSize"] for b in vm_puts(world.arm)] == [
        "Standard_D2_v4", next_cheapest]
    reasons = set(world.cloud.unavailable.entries().values())
    assert reasons == {"AllocationFailure"}
    world.clock.advance(3601)
    assert not world.cloud.unavailable.entries()


def test_quota_and_sku_errors_exhaust_the_offerings_with_an_insufficient_capacity_error(world: World) -> None:
    for size in ("Standard_D2_v4", "Standard_D4_v4", "Standard_D2ds_v5"):
        world.arm.fail_vm(size, "OperationNotAllowed", "Operation could not be completed as it results in "
                          "exceeding approved standardDv4Family Cores quota. Current Limit: 0", synchronous=True)
    with pytest.raises(errors.InsufficientCapacityError) as info:
        world.cloud.create(claim())
    tried = {o[0] for o in info.value.offerings}
    assert tried == {"Standard_D2_v4", "Standard_D4_v4", "Standard_D2ds_v5"}
    assert len(vm_puts(world.arm)) == 3  # one attempt per size: the family quota marks every zone
    assert not world.arm.of_type("virtualmachines") and not world.arm.of_type("networkinterfaces")


def test_an_error_that_is_not_about_capacity_stops_the_launch(world: World) -> None:
    world.arm.fail_vm("Standard_D2_v4", "InvalidParameter", "bad image", synchronous=True)
    with pytest.raises(errors.CreateError) as info:
        world.cloud.create(claim())
    assert info.value.reason == "InvalidParameter" and not info.value.retryable
    assert not world.cloud.unavailable.entries()


def test_delete_removes_the_vm_its_nic_and_its_os_disk(world: World) -> None:
    launched = world.cloud.create(claim())
    assert set(world.arm.of_type("disks")) == {"aks-default-65f84"}
    world.cloud.delete(launched)
    assert not world.arm.of_type("virtualmachines")
    assert not world.arm.of_type("networkinterfaces")
    assert not world.arm.of_type("disks")
    with pytest.raises(errors.NodeClaimNotFoundError):
        world.cloud.delete(launched)


def test_list_and_gc_touch_only_this_clusters_vms_and_orphaned_nics(world: World) -> None:
    launched = world.cloud.create(claim())
    world.arm.add("virtualMachines", RG, "aks-nodepool1-vmss000000",
                  {"location": REGION, "tags": {"aks-managed-poolName": "nodepool1"}, "properties": {}})
    world.arm.add("virtualMachines", RG, "aks-other-cluster",
                  {"location": REGION, "tags": {instances.CLUSTER_TAG: "someone-else"}, "properties": {}})
    world.arm.add("networkInterfaces", RG, "aks-orphan",
                  {"location": REGION, "tags": {instances.CLUSTER_TAG: "aks-karp-test"}, "properties": {}})
    world.arm.add("networkInterfaces", RG, "aks-foreign-nic",
                  {"location": REGION, "tags": {instances.CLUSTER_TAG: "someone-else"}, "properties": {}})
    assert world.cloud.garbage_collect_nics() == ["aks-orphan"]
    assert set(world.arm.of_type("networkinterfaces")) == {"aks-default-65f84", "aks-foreign-nic"}
    world.arm.add("networkInterfaces", RG, "aks-orphan-2",
                  {"location": REGION, "tags": {instances.CLUSTER_TAG: "aks-karp-test"}, "properties": {}})
    listed = world.cloud.list()  # the garbage-collection controller's call also sweeps NICs when due
    assert [c.status.provider_id for c in listed] == [launched.status.provider_id]
    assert listed[0].name == "default-65f84" and listed[0].metadata.labels[labels.NODEPOOL] == "default"
    assert "aks-orphan-2" not in world.arm.of_type("networkinterfaces")
    world.arm.add("networkInterfaces", RG, "aks-orphan-3",
                  {"location": REGION, "tags": {instances.CLUSTER_TAG: "aks-karp-test"}, "properties": {}})
    world.cloud.list()
    assert "aks-orphan-3" in world.arm.of_type("networkinterfaces")  # not due again yet
    world.clock.advance(300)
    world.cloud.list()
    assert "aks-orphan-3" not in world.arm.of_type("networkinterfaces")
    foreign = nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "x"},
        "status": {"providerID": world.cloud.provider_id("aks-other-cluster")}})
    with pytest.raises(errors.NotOwnedError):
        world.cloud.delete(foreign)
    assert "aks-other-cluster" in world.arm.of_type("virtualmachines")


def test_a_missing_or_broken_node_class_is_not_ready(world: World) -> None:
    broken = {**NODE_CLASS, "spec": {"imageFamily": "Windows2022"}}
    status = world.cloud.resolve_node_class(broken)
    assert status["conditions"][-1]["status"] == "False"
    assert status["conditions"][-1]["reason"] == "ImagesNotReady"
    ok = world.cloud.resolve_node_class(NODE_CLASS)
    assert ok["conditions"][-1]["status"] == "True"
    assert [i["id"].split("/")[-3] for i in ok["images"]] == [
        "2204gen2containerd", "2204containerd", "2204gen2arm64containerd"]
    world.cluster.delete("AKSNodeClass", "default")
    with pytest.raises(errors.NodeClassNotReadyError):
        world.cloud.create(claim())


def test_the_factory_names_missing_configuration() -> None:
    vclock = clock.VirtualClock()
    with pytest.raises(errors.CloudProviderError, match=r"--node-resource-group / AZURE_NODE_RESOURCE_GROUP"):
        factory.build(settings.Settings(), vclock, memory.InMemoryCluster(vclock),
                      environ={"ARM_SUBSCRIPTION_ID": "s", "LOCATION": "eastus", "AZURE_SUBNET_ID": SUBNET})


def test_an_on_demand_node_says_regular_priority_when_launched_and_when_listed(world: World) -> None:
    launched = world.cloud.create(claim("default-r1", capacity_types=("on-demand",)))
    [listed] = [c for c in world.cloud.list() if c.status.provider_id == launched.status.provider_id]
    for got in (launched.metadata.labels, listed.metadata.labels):
        assert got["kubernetes.azure.com/scalesetpriority"] == "regular"
        assert got["kubernetes.azure.com/priority"] == "regular"


def test_a_spot_node_of_a_system_pool_carries_aks_labels(world: World) -> None:
    surge = claim("system-surge-x1", capacity_types=("spot",))
    surge = surge.__class__.from_manifest({**surge.to_manifest(), "metadata": {
        "name": "system-surge-x1", "labels": {labels.NODEPOOL: "system-surge", "kubernetes.azure.com/mode": "system"}}})
    launched = world.cloud.create(surge)
    lb = launched.metadata.labels
    assert lb["kubernetes.azure.com/mode"] == "system" and lb["kubernetes.azure.com/scalesetpriority"] == "spot"
    assert lb["kubernetes.azure.com/priority"] == "spot"
    assert lb["kubernetes.azure.com/network-subnet"] == "aks-subnet"
    assert lb["kubernetes.azure.com/network-name"] == "aks-vnet"
    assert lb["kubernetes.azure.com/sku-cpu"] == lb[labels.AZURE_SKU_CPU]


def test_a_changed_node_class_or_image_is_drift(world: World) -> None:
    launched = world.cloud.create(claim())
    assert world.cloud.is_drifted(launched) == ""
    nc = world.cluster.get("AKSNodeClass", "default")
    world.cluster.update({**nc, "spec": {**nc["spec"], "imageVersion": "202602.01.0"}})
    assert world.cloud.is_drifted(launched) == "NodeClassDrift"
    unannotated = launched.__class__.from_manifest({
        **launched.to_manifest(), "metadata": {**launched.to_manifest()["metadata"], "annotations": {}}})
    assert world.cloud.is_drifted(unannotated) == "ImageDrift"


def test_a_repeated_launch_of_the_same_node_claim_returns_the_vm_it_made(world: World) -> None:
    first = world.cloud.create(claim())
    again = world.cloud.create(claim())
    assert again.status.provider_id == first.status.provider_id
    assert again.metadata.labels[labels.INSTANCE_TYPE] == first.metadata.labels[labels.INSTANCE_TYPE]
    assert again.status.allocatable == first.status.allocatable
    assert len(vm_puts(world.arm)) == 1
    world.arm.add("virtualMachines", RG, "aks-default-foreign",
                  {"location": REGION, "tags": {instances.CLUSTER_TAG: "someone-else"}, "properties": {}})
    with pytest.raises(errors.CreateError, match="not this cluster's"):
        world.cloud.create(claim("default-foreign"))


def test_the_factory_in_nap_mode_creates_aks_own_pools_from_the_environment() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    with fake_arm.FakeARM(skus=skus()) as arm:
        factory.build(settings.Settings(cluster_name="aks"), vclock, cluster, retail_prices_endpoint="",
                      environ={"ARM_SUBSCRIPTION_ID": fake_arm.SUBSCRIPTION, "LOCATION": REGION,
                               "AZURE_NODE_RESOURCE_GROUP": RG, "AZURE_SUBNET_ID": SUBNET, "ARM_ENDPOINT": arm.endpoint,
                               "NAP_MODE": "true"})
    assert sorted(p["metadata"]["name"] for p in cluster.list("NodePool")) == ["default", "system-surge"]


def test_karpy_controller_builds_the_azure_provider_through_its_factory(world: World) -> None:
    from karpy import controller_run

    cloud = controller_run.build_cloud("azure", settings.Settings(cluster_name="aks"), world.clock, world.cluster, {
        "environ": {}, "subscription_id": fake_arm.SUBSCRIPTION, "resource_group": RG, "region": REGION,
        "subnet_id": SUBNET, "endpoint_url": world.arm.endpoint, "retail_prices_endpoint": ""})
    assert cloud.name == "azure" and cloud.list() == []
    with pytest.raises(controller_run.Unavailable, match="AZURE_SUBNET_ID"):
        controller_run.build_cloud("azure", settings.Settings(), world.clock, world.cluster, {"environ": {}})


def test_a_loopback_endpoint_needs_no_other_configuration() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    cluster.create(dict(NODE_CLASS))
    defaults = factory.emulator_defaults("aks", REGION)
    with fake_arm.FakeARM(skus=skus(), subscription=defaults["subscription_id"]) as arm:
        cloud = factory.build(settings.Settings(cluster_name="aks"), vclock, cluster, environ={}, region=REGION,
                              endpoint_url=arm.endpoint, polling_interval=0, retail_prices_endpoint="")
        launched = cloud.create(claim())
    assert launched.status.provider_id.startswith(
        f"azure:///subscriptions/{defaults['subscription_id']}/resourceGroups/MC_aks_aks_{REGION}/")


def test_against_a_loopback_emulator_prices_come_from_the_emulator_not_the_internet() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    prices = [{"armSkuName": "Standard_D2_v4", "retailPrice": 0.5, "skuName": "D2 v4", "armRegionName": REGION,
               "productName": "Virtual Machines Dv4 Series", "type": "Consumption"}]
    with fake_arm.FakeARM(skus=skus(), prices=prices) as arm:
        cloud = factory.build(settings.Settings(cluster_name="aks"), vclock, cluster, environ={}, region=REGION,
                              subscription_id=fake_arm.SUBSCRIPTION, endpoint_url=arm.endpoint)
        types = {t.name: t for t in cloud.get_instance_types(None)}
    assert types["Standard_D2_v4"].cheapest_price(capacity_types=frozenset({"on-demand"})) == 0.5
    packaged = instancetypes.on_demand_prices(REGION)["Standard_D4_v4"]
    assert types["Standard_D4_v4"].cheapest_price(capacity_types=frozenset({"on-demand"})) == packaged


def test_a_spot_vm_azure_evicted_is_gone_from_list_and_its_nic_is_swept(world: World) -> None:
    launched = world.cloud.create(claim(capacity_types=("spot",)))
    world.cloud.list()  # the first sweep happens now; the eviction comes later
    world.arm.evict(RG, "aks-default-65f84")
    assert world.cloud.list() == []
    with pytest.raises(errors.NodeClaimNotFoundError):
        world.cloud.get(launched.status.provider_id)
    with pytest.raises(errors.NodeClaimNotFoundError):
        world.cloud.delete(launched)
    assert set(world.arm.of_type("networkinterfaces")) == {"aks-default-65f84"}  # not swept before it is due
    world.clock.advance(300)
    world.cloud.list()
    assert not world.arm.of_type("networkinterfaces")


@pytest.mark.parametrize("synchronous", [True, False])
def test_a_capacity_error_wrapped_in_a_generic_one_is_still_recognised(world: World, synchronous: bool) -> None:
    world.arm.fail_vm("Standard_D2_v4", "ZonalAllocationFailed", "Allocation failed in zone 1", zone="1",
                      synchronous=synchronous, wrapped_in="Conflict")
    launched = world.cloud.create(claim())
    assert launched.metadata.labels[labels.ZONE] == "japaneast-2"
    assert set(world.cloud.unavailable.entries().values()) == {"ZonalAllocationFailure"}


def _vm_with(world: World, name: str, nic_ids: list[str], disk: str | None = None) -> None:
    props: dict[str, Any] = {"networkProfile": {"networkInterfaces": [{"id": i} for i in nic_ids]}}
    if disk is not None:
        props["storageProfile"] = {"osDisk": {"name": disk, "managedDisk": {"storageAccountType": "Premium_LRS"}}}
    world.arm.add("virtualMachines", RG, name,
                  {"location": REGION, "tags": {instances.CLUSTER_TAG: "aks-karp-test"}, "properties": props})


def _nic_id(rg: str, name: str, subscription: str = fake_arm.SUBSCRIPTION) -> str:
    return f"/subscriptions/{subscription}/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces/{name}"


def _claim_for(provider_id: str) -> nodeclaim.NodeClaim:
    return nodeclaim.NodeClaim.from_manifest({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                                              "metadata": {"name": "x"}, "status": {"providerID": provider_id}})


def test_deleting_an_owned_vm_leaves_its_nics_and_disk_that_are_not_tagged_for_this_cluster(world: World) -> None:
    ours = {"tags": {instances.CLUSTER_TAG: "aks-karp-test"}, "location": REGION, "properties": {}}
    theirs = {"tags": {"team": "payments"}, "location": REGION, "properties": {}}
    world.arm.add("networkInterfaces", RG, "aks-mine", ours)
    world.arm.add("networkInterfaces", RG, "payments-nic", theirs)
    world.arm.add("networkInterfaces", "other-rg", "aks-elsewhere", ours)
    world.arm.add("disks", RG, "payments-disk", theirs)
    _vm_with(world, "aks-shared", [_nic_id(RG, "aks-mine"), _nic_id(RG, "payments-nic"),
                                   _nic_id("other-rg", "aks-elsewhere")], disk="payments-disk")
    world.cloud.delete(_claim_for(world.cloud.provider_id("aks-shared")))
    assert "aks-shared" not in world.arm.of_type("virtualmachines")
    assert set(world.arm.of_type("networkinterfaces")) == {"payments-nic", "aks-elsewhere"}
    assert set(world.arm.of_type("disks")) == {"payments-disk"}


def test_a_vm_without_nics_deletes_no_nic_of_its_own_name(world: World) -> None:
    world.arm.add("networkInterfaces", RG, "aks-lonely",
                  {"tags": {instances.CLUSTER_TAG: "aks-karp-test"}, "location": REGION, "properties": {}})
    _vm_with(world, "aks-lonely", [])
    world.cloud.delete(_claim_for(world.cloud.provider_id("aks-lonely")))
    assert "aks-lonely" not in world.arm.of_type("virtualmachines")
    assert "aks-lonely" in world.arm.of_type("networkinterfaces")


@pytest.mark.parametrize("where", ["resource group", "subscription"])
def test_a_provider_id_naming_a_vm_elsewhere_never_deletes_karpys_vm_of_the_same_name(world: World,
                                                                                      where: str) -> None:
    launched = world.cloud.create(claim())
    pid = launched.status.provider_id
    if where == "resource group":
        elsewhere = pid.replace(f"/resourceGroups/{RG}/", "/resourceGroups/someone-elses-rg/")
    else:
        elsewhere = pid.replace(fake_arm.SUBSCRIPTION, "99999999-1111-2222-3333-444444444444")
    with pytest.raises(errors.NotOwnedError):
        world.cloud.delete(_claim_for(elsewhere))
    with pytest.raises(errors.NodeClaimNotFoundError):
        world.cloud.get(elsewhere)
    assert "aks-default-65f84" in world.arm.of_type("virtualmachines")
