"""``PROVISION_MODE=aksmachineapi`` with ``USE_SIG=true`` against the fake ARM service: the AKS machine each
NodeClaim becomes (its ``PUT`` body field by field), the shared image gallery image from the node image
versions API, get / list / delete through the machine API, and drift."""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from typing import Any

import pytest

from karpy import clock, settings
from karpy.api import labels, nodeclaim
from karpy.cloudprovider import errors
from karpy.cloudprovider.azure import factory, machines, provider, sig
from karpy.kube import memory

from . import fake_arm

pytestmark = pytest.mark.e2e

REGION = "japaneast"
RG = "MC_rg-taniai_aks-karp-test_japaneast"
CLUSTER_RG = "rg-taniai"
SIG_SUB = "10945678-1234-1234-1234-123456789012"
POOL = "aksmanagedap"
SUBNET = (f"/subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/rg-net/providers/Microsoft.Network/"
          "virtualNetworks/aks-vnet-25367643/subnets/aks-subnet")
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIC-test-ca\n-----END CERTIFICATE-----\n").decode()
NODE_CLASS: dict[str, Any] = {
    "apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": "default"},
    "spec": {"imageFamily": "Ubuntu2204", "osDiskSizeGB": 128, "maxPods": 60, "vnetSubnetID": SUBNET,
             "tags": {"team/owner": "web"}}}
SETTINGS = settings.Settings(
    cluster_name="aks-karp-test", cluster_endpoint="https://aks-karp-test-dns-12345678.hcp.japaneast.azmk8s.io:443",
    kubelet_bootstrap_token="abcdef.0123456789abcdef", ssh_public_key="ssh-ed25519 AAAA ops@example",
    vnet_subnet_id=SUBNET, node_resource_group=RG, provision_mode="aksmachineapi", use_sig=True,
    sig_subscription_id=SIG_SUB, aks_machines_pool_name=POOL)
POOL_PATH = (f"/subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/{CLUSTER_RG}/providers/"
             f"Microsoft.ContainerService/managedClusters/aks-karp-test/agentPools/{POOL}")


@pytest.fixture
def arm() -> Iterator[fake_arm.FakeARM]:
    skus = [fake_arm.sku("Standard_D4s_v5", REGION, vcpus=4, memory_gb=16, resource_disk_mb=0),
            fake_arm.sku("Standard_D8s_v5", REGION, vcpus=8, memory_gb=32, resource_disk_mb=0)]
    with fake_arm.FakeARM(skus=skus, node_resource_group=RG) as server:
        server.aks.publish("AKSUbuntu", "2204gen2containerd", "202505.20.0")
        server.aks.publish("AKSUbuntu", "2204gen2containerd", "202505.27.0")
        server.aks.publish("AKSUbuntu", "2204gen2containerd", "202505.3.0")
        server.aks.publish("AKSWindows", "2204gen2containerd", "202612.1.0")  # not a Linux gallery: ignored
        yield server


def _build(arm: fake_arm.FakeARM, node_class: dict[str, Any] | None = None) -> provider.AzureCloudProvider:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    cluster.create(copy.deepcopy(node_class or NODE_CLASS))
    cloud = factory.build(SETTINGS, vclock, cluster, environ={"ARM_RESOURCE_GROUP": CLUSTER_RG},
                          subscription_id=fake_arm.SUBSCRIPTION, region=REGION, endpoint_url=arm.endpoint,
                          polling_interval=0, retail_prices_endpoint="", ca_bundle=CA,
                          kubernetes_version="1.33.2", tenant_id="tenant-1")
    assert isinstance(cloud, provider.AzureCloudProvider)
    return cloud


def _claim(name: str = "default-65f84", *, spot: bool = False, mode: str | None = None) -> nodeclaim.NodeClaim:
    claim_labels = {labels.NODEPOOL: "default", "team": "web", "node-role.kubernetes.io/agent": ""}
    if mode:
        claim_labels["kubernetes.azure.com/mode"] = mode
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": claim_labels},
        "spec": {
            "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"},
            "requirements": [{"key": labels.CAPACITY_TYPE, "operator": "In",
                              "values": ["spot" if spot else "on-demand"]},
                             {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["Standard_D4s_v5"]},
                             {"key": labels.ZONE, "operator": "In", "values": [f"{REGION}-2"]}],
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}],
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
        },
    })


def _puts(arm: fake_arm.FakeARM) -> list[fake_arm.Call]:
    return [c for c in arm.requests if c.method == "PUT" and "/agentPools/" in c.path]


def test_a_nodeclaim_becomes_one_aks_machine_whose_body_is_checked_field_by_field(arm: fake_arm.FakeARM) -> None:
    _build(arm).create(_claim())
    [put] = _puts(arm)
    assert put.path == f"{POOL_PATH}/machines/default-65f84"
    body = put.body
    props = body["properties"]
    node_labels = props["kubernetes"].pop("nodeLabels")
    assert node_labels["team"] == "web" and node_labels[labels.NODEPOOL] == "default"
    assert node_labels[labels.CAPACITY_TYPE] == "on-demand"
    assert node_labels[labels.AZURE_SKU_STORAGE_ULTRA_SSD] == "false"
    assert not [k for k in node_labels if k.startswith("kubernetes.azure.com/")]  # AKS sets its own
    assert labels.ZONE not in node_labels and labels.INSTANCE_TYPE not in node_labels  # the kubelet's
    assert "node-role.kubernetes.io/agent" not in node_labels  # the kubelet may not set it
    tags = props.pop("tags")
    assert tags == {"team_owner": "web", "karpenter.azure.com_cluster": "aks-karp-test",
                    "compute.aks.billing": "linux", "karpenter.sh_nodeclaim": "default-65f84",
                    "karpenter.sh_nodepool": "default", "karpenter.azure.com_aksnodeclass": "default",
                    "karpenter.azure.com_aksmachine_nodeclaim": "default-65f84"}
    assert body["zones"] == ["2"]
    assert props == {
        "nodeImageVersion": "AKSUbuntu-2204gen2containerd-202505.27.0",
        "network": {"vnetSubnetID": SUBNET},
        "hardware": {"vmSize": "Standard_D4s_v5", "ultraSsdEnabled": False},
        "operatingSystem": {"osType": "Linux", "osSKU": "Ubuntu2204", "osDiskType": "Managed", "enableFips": False,
                            "osDiskSizeGB": 128},
        "kubernetes": {"orchestratorVersion": "1.33.2", "maxPods": 60, "nodeTaints": [],
                       "nodeInitializationTaints": ["dedicated=web:NoSchedule",
                                                    "node.cilium.io/agent-not-ready=true:NoExecute"]},
        "mode": "User", "priority": "Regular",
        "security": {"sshAccess": "LocalUser", "enableEncryptionAtHost": False, "enableVTPM": False,
                     "enableSecureBoot": False}}
    assert [c for c in arm.requests if c.method == "PUT" and "/virtualMachines/" in c.path] == []  # AKS makes it


def test_the_launched_nodeclaim_has_the_vm_aks_made_as_provider_id_and_the_machine_annotated(
        arm: fake_arm.FakeARM) -> None:
    launched = _build(arm).create(_claim())
    assert launched.status.provider_id == (f"azure:///subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/{RG}/"
                                           f"providers/Microsoft.Compute/virtualMachines/"
                                           f"aks-{POOL}-default-65f84-12345678-vm")
    assert launched.metadata.annotations[machines.ANNOTATION_MACHINE_ID] == f"{POOL_PATH}/machines/default-65f84"
    assert launched.status.image_id == "AKSUbuntu-2204gen2containerd-202505.27.0"
    assert launched.metadata.labels[labels.ZONE] == f"{REGION}-2"


def test_a_spot_system_claim_is_a_spot_priority_system_mode_machine(arm: fake_arm.FakeARM) -> None:
    _build(arm).create(_claim(spot=True, mode="system"))
    [put] = _puts(arm)
    assert put.body["properties"]["priority"] == "Spot"
    assert put.body["properties"]["mode"] == "System"


def test_the_aksnodeclass_security_gpu_and_linux_settings_reach_the_machine(arm: fake_arm.FakeARM) -> None:
    nc = copy.deepcopy(NODE_CLASS)
    nc["spec"].update({"security": {"encryptionAtHost": True},
                       "linuxOSConfig": {"transparentHugePageEnabled": "never", "swapFileSize": "1Gi"},
                       "kubelet": {"cpuManagerPolicy": "static"}})
    arm.skus[0]["capabilities"].append({"name": "EncryptionAtHostSupported", "value": "True"})
    _build(arm, nc).create(_claim())
    props = _puts(arm)[0].body["properties"]
    assert props["security"]["enableEncryptionAtHost"] is True
    assert props["operatingSystem"]["linuxProfile"] == {
        "linuxOSConfig": {"transparentHugePageEnabled": "never", "swapFileSizeMB": 1024}}
    assert props["kubernetes"]["kubeletConfig"] == {"cpuManagerPolicy": "static"}


def test_get_and_list_read_the_pools_machines_and_delete_posts_delete_machines(arm: fake_arm.FakeARM) -> None:
    cloud = _build(arm)
    launched = cloud.create(_claim())
    got = cloud.get(launched.status.provider_id)
    assert got.name == "default-65f84" and got.metadata.labels[labels.NODEPOOL] == "default"
    assert got.metadata.labels[labels.INSTANCE_TYPE] == "Standard_D4s_v5"
    assert got.metadata.creation_timestamp == clock.parse_rfc3339(arm.now)
    assert [c.name for c in cloud.list()] == ["default-65f84"]
    cloud.delete(launched)
    [post] = [c for c in arm.requests if c.method == "POST"]
    assert post.path == f"{POOL_PATH}/deleteMachines" and post.body == {"machineNames": ["default-65f84"]}
    assert cloud.list() == []
    with pytest.raises(errors.NodeClaimNotFoundError):
        cloud.get(launched.status.provider_id)


def test_a_machine_that_fails_to_provision_marks_the_offering_and_is_deleted(arm: fake_arm.FakeARM) -> None:
    arm.aks.fail("Standard_D4s_v5", "AllocationFailed", "no capacity in zone 2")
    cloud = _build(arm)
    with pytest.raises(errors.InsufficientCapacityError):
        cloud.create(_claim())
    assert arm.aks.machines == {}  # the failed machine was deleted
    assert cloud.unavailable.is_unavailable("Standard_D4s_v5", f"{REGION}-2", "on-demand")


def test_a_new_node_image_version_drifts_the_machine(arm: fake_arm.FakeARM) -> None:
    cloud = _build(arm)
    launched = cloud.create(_claim())
    assert cloud.is_drifted(launched) == ""
    arm.aks.publish("AKSUbuntu", "2204gen2containerd", "202506.01.0")
    assert isinstance(cloud.clock, clock.VirtualClock)
    cloud.clock.advance(4 * 24 * 3600.0)  # past the three-day cache
    assert cloud.is_drifted(launched) == "ImageDrift"


def test_a_long_nodeclaim_name_becomes_a_34_character_machine_name_keeping_its_suffix() -> None:
    name = machines.machine_name("thisisalongnodepoolnamethatgoeson-a1b2c")
    assert len(name) == 34 and name.endswith("-a1b2c") and name.startswith("thisisalongnodepoolnam")
    assert name == machines.machine_name("thisisalongnodepoolnamethatgoeson-a1b2c")  # deterministic
    assert machines.machine_name("default-65f84") == "default-65f84"


def test_sig_image_ids_and_node_image_versions_are_formed_as_the_provider_forms_them() -> None:
    image = sig.image_id(SIG_SUB, "AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2", "2204gen2containerd",
                         "2022.10.03")
    assert image == (f"/subscriptions/{SIG_SUB}/resourceGroups/AKS-Ubuntu/providers/Microsoft.Compute/galleries/"
                     "AKSUbuntu/images/2204gen2containerd/versions/2022.10.03")
    assert sig.node_image_version(image) == "AKSUbuntu-2204gen2containerd-2022.10.03"
    with pytest.raises(ValueError, match="not a shared image gallery image"):
        sig.node_image_version("/CommunityGalleries/AKSUbuntu-x/images/2204gen2containerd/versions/1")
    assert sig.newer("202505.27.0", "202505.3.0") and not sig.newer("25.01.02", "202501.02.0")
    assert sig.newer("2022.10.03.1", "2022.10.03")


def test_the_aksnodeclass_status_lists_the_shared_gallery_images(arm: fake_arm.FakeARM) -> None:
    status = _build(arm).resolve_node_class(NODE_CLASS)
    assert status["conditions"][-1]["status"] == "True"
    assert status["images"][0]["id"] == (
        f"/subscriptions/{SIG_SUB}/resourceGroups/AKS-Ubuntu/providers/Microsoft.Compute/galleries/AKSUbuntu/"
        "images/2204gen2containerd/versions/202505.27.0")


def test_fips_launches_the_ubuntu_2004_fips_image_from_the_shared_gallery(arm: fake_arm.FakeARM) -> None:
    arm.aks.publish("AKSUbuntu", "2004gen2fipscontainerd", "202505.27.0")
    nc = copy.deepcopy(NODE_CLASS)
    nc["spec"].update({"imageFamily": "Ubuntu", "fipsMode": "FIPS"})
    cloud = _build(arm, nc)
    status = cloud.resolve_node_class(nc)
    assert status["conditions"][-1]["status"] == "True"
    assert [i["id"].rsplit("/images/", 1)[1] for i in status["images"]] == [
        "2004gen2fipscontainerd/versions/202505.27.0", "2004fipscontainerd/versions/202501.02.0"]
    nc["status"] = status
    cloud.node_classes = lambda name: nc
    cloud.create(_claim())
    props = _puts(arm)[0].body["properties"]
    assert props["nodeImageVersion"] == "AKSUbuntu-2004gen2fipscontainerd-202505.27.0"
    assert props["operatingSystem"]["osSKU"] == "Ubuntu" and props["operatingSystem"]["enableFips"] is True


def test_fips_on_ubuntu_2204_without_trusted_launch_has_no_shared_gallery_image(arm: fake_arm.FakeARM) -> None:
    nc = copy.deepcopy(NODE_CLASS)
    nc["spec"]["fipsMode"] = "FIPS"
    ready = _build(arm, nc).resolve_node_class(nc)["conditions"][-1]
    assert ready["status"] == "False" and "no Ubuntu2204 FIPS image without trusted launch" in ready["message"]
