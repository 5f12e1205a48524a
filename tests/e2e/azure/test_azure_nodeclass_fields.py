"""Every AKSNodeClass field reaches the ARM request bodies as Karpenter's Azure provider sends them: the VM's
``securityProfile``, its image, the custom data's variables and kubelet flags, the node labels, the sizes an
AKSNodeClass may launch and the status the provider resolves. Checked on the bodies the fake ARM received."""

from __future__ import annotations

import base64
import copy
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from karpy import clock, settings
from karpy.api import labels, nodeclaim
from karpy.cloudprovider import errors
from karpy.cloudprovider.azure import bootstrap, factory, provider
from karpy.kube import memory

from . import fake_arm

pytestmark = pytest.mark.e2e

REGION = "japaneast"
RG = "MC_rg-aks_aks-karp-test_japaneast"
SUBNET = (f"/subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/rg-aks/providers/Microsoft.Network/"
          "virtualNetworks/aks-vnet/subnets/aks-subnet")
SETTINGS = settings.Settings(cluster_name="aks-karp-test", cluster_endpoint="https://aks-karp-test.hcp.azmk8s.io")


def _skus() -> list[dict[str, Any]]:
    return [
        # the cheapest amd64 size can neither encrypt at host nor run LocalDNS (2 vCPUs)
        fake_arm.sku("Standard_D2_v4", REGION, vcpus=2, memory_gb=8, encryption_at_host=False),
        fake_arm.sku("Standard_D4_v4", REGION, vcpus=4, memory_gb=16),
        # cheaper still, but arm64
        fake_arm.sku("Standard_D2ps_v5", REGION, vcpus=2, memory_gb=8, arch="Arm64"),
        fake_arm.sku("Standard_D4ps_v5", REGION, vcpus=4, memory_gb=16, arch="Arm64"),
        fake_arm.sku("Standard_NC4as_T4_v3", REGION, vcpus=4, memory_gb=28, extra={"GPUs": "1"}),
    ]


@dataclass
class World:
    arm: fake_arm.FakeARM
    cluster: memory.InMemoryCluster
    cloud: provider.AzureCloudProvider


def _world(arm: fake_arm.FakeARM, spec: dict[str, Any], *, kubernetes_version: str = "1.33.2",
           network_plugin: str = "azure", region: str = REGION) -> World:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    s = SETTINGS if network_plugin == "azure" else dataclasses.replace(
        SETTINGS, network_plugin=network_plugin, network_plugin_mode="")
    cloud = factory.build(s, vclock, cluster, environ={}, subscription_id=fake_arm.SUBSCRIPTION, resource_group=RG,
                          region=region, subnet_id=SUBNET, endpoint_url=arm.endpoint, polling_interval=0,
                          retail_prices_endpoint="", ssh_public_key="ssh-rsa AAAA karpy",
                          kubernetes_version=kubernetes_version)
    assert isinstance(cloud, provider.AzureCloudProvider)
    obj = {"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": "default"},
           "spec": copy.deepcopy(spec)}
    created = cluster.create(obj)
    created = copy.deepcopy(created)
    created["status"] = cloud.resolve_node_class(created)  # what the nodeclass status controller writes
    cluster.update_status(created)
    return World(arm, cluster, cloud)


@pytest.fixture
def arm() -> Iterator[fake_arm.FakeARM]:
    with fake_arm.FakeARM(skus=_skus()) as server:
        yield server


def _claim(*, arch: tuple[str, ...] = ("amd64",), sizes: tuple[str, ...] = ()) -> nodeclaim.NodeClaim:
    reqs: list[dict[str, Any]] = [{"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                                  {"key": labels.ARCH, "operator": "In", "values": list(arch)}]
    if sizes:
        reqs.append({"key": labels.INSTANCE_TYPE, "operator": "In", "values": list(sizes)})
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-x7k2p", "labels": {labels.NODEPOOL: "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"},
                 "requirements": reqs, "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
    })


def _vm(arm: fake_arm.FakeARM) -> dict[str, Any]:
    [vm] = [c.body for c in arm.put_calls("virtualMachines")]
    assert isinstance(vm, dict)
    return vm


def _env(vm: dict[str, Any]) -> dict[str, str]:
    return bootstrap.variables_of(bootstrap.decode(vm["properties"]["osProfile"]["customData"]))


def _flags(env: dict[str, str]) -> dict[str, str]:
    return dict(f.split("=", 1) for f in env["KUBELET_FLAGS"].split())


def _kubelet_labels(env: dict[str, str]) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in env["KUBELET_NODE_LABELS"].split(","))


def test_encryption_at_host_and_trusted_launch_are_the_vms_security_profile(arm: fake_arm.FakeARM) -> None:
    w = _world(arm, {"imageFamily": "Ubuntu2204",
                     "security": {"encryptionAtHost": True, "trustedLaunch": {"secureBoot": True, "vtpm": False}}})
    launched = w.cloud.create(_claim())
    vm = _vm(arm)
    props = vm["properties"]
    assert props["securityProfile"] == {"encryptionAtHost": True, "securityType": "TrustedLaunch",
                                        "uefiSettings": {"secureBootEnabled": True, "vTpmEnabled": False}}
    # the cheaper D2_v4 cannot encrypt at host: skipped, never sent
    assert props["hardwareProfile"] == {"vmSize": "Standard_D4_v4"}
    image = props["storageProfile"]["imageReference"]["communityGalleryImageId"]
    assert "/images/2204gen2TLcontainerd/versions/" in image
    assert launched.status.image_id == image
    # the rest of the body is what it was without security
    assert props["priority"] == "Regular" and vm["location"] == REGION
    assert props["storageProfile"]["osDisk"]["diskSizeGB"] == 128
    [nic] = [c.body for c in arm.put_calls("networkInterfaces")]
    assert nic["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"] == SUBNET
    assert "securityProfile" not in nic["properties"]


def test_vtpm_alone_turns_trusted_launch_on_and_encryption_at_host_false_is_sent(arm: fake_arm.FakeARM) -> None:
    w = _world(arm, {"imageFamily": "AzureLinux",
                     "security": {"encryptionAtHost": False, "trustedLaunch": {"vtpm": True}}})
    w.cloud.create(_claim())
    props = _vm(arm)["properties"]
    assert props["securityProfile"] == {"encryptionAtHost": False, "securityType": "TrustedLaunch",
                                        "uefiSettings": {"secureBootEnabled": False, "vTpmEnabled": True}}
    assert props["hardwareProfile"]["vmSize"] == "Standard_D2_v4"  # no encryption at host: the cheapest amd64
    # Kubernetes 1.33: imageFamily AzureLinux is Azure Linux 3
    assert "/images/V3gen2TL/versions/" in props["storageProfile"]["imageReference"]["communityGalleryImageId"]


def test_trusted_launch_leaves_out_the_arm64_sizes(arm: fake_arm.FakeARM) -> None:
    w = _world(arm, {"security": {"trustedLaunch": {"secureBoot": True}}})
    pool_types = {t.name for t in w.cloud.get_instance_types(None)}
    assert "Standard_D2ps_v5" in pool_types  # without a NodePool, no AKSNodeClass narrows them
    with pytest.raises(errors.CreateError, match="NodeClaim default-x7k2p"):
        w.cloud.create(_claim(arch=("arm64",)))
    assert arm.put_calls("virtualMachines") == []


def test_a_node_class_without_security_sends_no_security_profile(arm: fake_arm.FakeARM) -> None:
    w = _world(arm, {"imageFamily": "Ubuntu2204"})
    w.cloud.create(_claim())
    props = _vm(arm)["properties"]
    assert "securityProfile" not in props
    assert "/images/2204gen2containerd/versions/" in props["storageProfile"]["imageReference"][
        "communityGalleryImageId"]


def test_fips_mode_makes_the_node_class_not_ready_and_launches_nothing(arm: fake_arm.FakeARM) -> None:
    w = _world(arm, {"imageFamily": "AzureLinux", "fipsMode": "FIPS"})
    [node_class] = w.cluster.list("AKSNodeClass")
    ready = node_class["status"]["conditions"][-1]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "ImagesNotReady")
    assert "shared image gallery" in ready["message"]
    assert "images" not in node_class["status"]
    with pytest.raises(errors.NodeClassNotReadyError, match="FIPS"):
        w.cloud.create(_claim())
    assert arm.put_calls("virtualMachines") == [] and arm.put_calls("networkInterfaces") == []


def test_linux_os_config_and_fail_swap_on_are_in_the_custom_data(arm: fake_arm.FakeARM) -> None:
    w = _world(arm, {"kubelet": {"failSwapOn": False, "cpuManagerPolicy": "static"},
                     "linuxOSConfig": {"swapFileSize": "1500Mi", "transparentHugePageEnabled": "madvise",
                                       "transparentHugePageDefrag": "defer+madvise",
                                       "sysctls": {"netCoreSomaxconn": 32768, "vmMaxMapCount": 262144,
                                                   "netIPv4IPLocalPortRange": "32768 60999",
                                                   "netIPv4TCPTwReuse": True}}})
    w.cloud.create(_claim())
    env = _env(_vm(arm))
    assert (env["SHOULD_CONFIG_SWAP_FILE"], env["SWAP_FILE_SIZE_MB"]) == ("true", "1500")
    assert (env["SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE"], env["THP_ENABLED"], env["THP_DEFRAG"]) == (
        "true", "madvise", "defer+madvise")
    sysctls = dict(line.split("=", 1) for line in base64.b64decode(env["SYSCTL_CONTENT"]).decode().splitlines())
    assert sysctls["net.core.somaxconn"] == "32768"  # the AKSNodeClass's over AKS's 16384
    assert sysctls["vm.max_map_count"] == "262144"
    assert sysctls["net.ipv4.ip_local_port_range"] == "32768 60999"
    assert sysctls["net.ipv4.tcp_tw_reuse"] == "1"
    assert sysctls["net.ipv4.tcp_retries2"] == "8"  # AKS's own stay
    flags = _flags(env)
    assert flags["--fail-swap-on"] == "false" and flags["--cpu-manager-policy"] == "static"


def test_without_linux_os_config_the_node_gets_aks_defaults_and_no_swap(arm: fake_arm.FakeARM) -> None:
    w = _world(arm, {})
    w.cloud.create(_claim())
    env = _env(_vm(arm))
    assert (env["SHOULD_CONFIG_SWAP_FILE"], env["SWAP_FILE_SIZE_MB"]) == ("false", "0")
    assert (env["SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE"], env["THP_ENABLED"], env["THP_DEFRAG"]) == ("false", "", "")
    sysctls = base64.b64decode(env["SYSCTL_CONTENT"]).decode().splitlines()
    assert sysctls == [f"{k}={v}" for k, v in sorted(bootstrap.DEFAULT_SYSCTLS.items())]
    assert "--fail-swap-on" not in _flags(env)


@pytest.mark.parametrize(("mode", "gpu_node"), [(None, "true"), ("Driver", "true"), ("None", "false")])
def test_the_gpu_mode_decides_whether_an_nvidia_node_installs_its_driver(
        arm: fake_arm.FakeARM, mode: str | None, gpu_node: str) -> None:
    w = _world(arm, {"gpu": {"mode": mode}} if mode else {})
    w.cloud.create(_claim(sizes=("Standard_NC4as_T4_v3",)))
    vm = _vm(arm)
    assert vm["properties"]["hardwareProfile"]["vmSize"] == "Standard_NC4as_T4_v3"
    env = _env(vm)
    assert (env["GPU_NODE"], env["CONFIG_GPU_DRIVER_IF_NEEDED"]) == (gpu_node, gpu_node)


def test_local_dns_required_labels_the_node_and_needs_four_vcpus(arm: fake_arm.FakeARM) -> None:
    w = _world(arm, {"localDNS": {"mode": "Required", "kubeDNSOverrides": [], "vnetDNSOverrides": []}})
    [node_class] = w.cluster.list("AKSNodeClass")
    assert node_class["status"]["localDNSState"] == "Enabled"
    launched = w.cloud.create(_claim())
    vm = _vm(arm)
    assert vm["properties"]["hardwareProfile"]["vmSize"] == "Standard_D4_v4"  # D2_v4 has 2 vCPUs
    assert _kubelet_labels(_env(vm))["kubernetes.azure.com/localdns-state"] == "enabled"
    assert launched.metadata.labels["kubernetes.azure.com/localdns-state"] == "enabled"


@pytest.mark.parametrize(("mode", "version", "plugin", "state"), [
    (None, "1.36.0", "azure", "Disabled"), ("Disabled", "1.36.0", "azure", "Disabled"),
    ("Required", "1.30.0", "azure", "Enabled"), ("Preferred", "1.35.4", "azure", "Disabled"),
    ("Preferred", "1.36.0", "azure", "Disabled"),  # Karpenter Azure v1.14 raised the threshold to 1.99
    ("Preferred", "1.98.3", "azure", "Disabled"), ("Preferred", "1.99.0", "azure", "Enabled"),
    ("Preferred", "1.99.0", "none", "Disabled"), ("Required", "1.33.2", "none", "Enabled"),
])
def test_the_local_dns_state_is_resolved_as_the_provider_resolves_it(
        arm: fake_arm.FakeARM, mode: str | None, version: str, plugin: str, state: str) -> None:
    spec = {"localDNS": {"mode": mode, "kubeDNSOverrides": [], "vnetDNSOverrides": []}} if mode else {}
    w = _world(arm, spec, kubernetes_version=version, network_plugin=plugin)
    [node_class] = w.cluster.list("AKSNodeClass")
    assert node_class["status"]["localDNSState"] == state
    w.cloud.create(_claim())
    assert _kubelet_labels(_env(_vm(arm)))["kubernetes.azure.com/localdns-state"] == state.lower()


def test_preferred_local_dns_once_enabled_stays_enabled(arm: fake_arm.FakeARM) -> None:
    w = _world(arm, {"localDNS": {"mode": "Preferred", "kubeDNSOverrides": [], "vnetDNSOverrides": []}},
               kubernetes_version="1.30.0")
    [node_class] = w.cluster.list("AKSNodeClass")
    node_class["status"]["localDNSState"] = "Enabled"
    assert w.cloud.resolve_node_class(node_class)["localDNSState"] == "Enabled"


def test_artifact_streaming_labels_the_node_and_leaves_out_arm64(arm: fake_arm.FakeARM) -> None:
    w = _world(arm, {"artifactStreaming": {"enabled": True}})
    launched = w.cloud.create(_claim(arch=("amd64", "arm64")))
    vm = _vm(arm)
    assert vm["properties"]["hardwareProfile"]["vmSize"] == "Standard_D2_v4"  # D2ps_v5 is cheaper but arm64
    assert _kubelet_labels(_env(vm))["kubernetes.azure.com/artifactstreaming-enabled"] == "true"
    assert launched.metadata.labels["kubernetes.azure.com/artifactstreaming-enabled"] == "true"


def test_without_artifact_streaming_an_arm64_size_may_launch_unlabelled(arm: fake_arm.FakeARM) -> None:
    w = _world(arm, {"artifactStreaming": {"enabled": False}})
    launched = w.cloud.create(_claim(arch=("amd64", "arm64")))
    assert _vm(arm)["properties"]["hardwareProfile"]["vmSize"] == "Standard_D2ps_v5"
    assert "kubernetes.azure.com/artifactstreaming-enabled" not in launched.metadata.labels


@pytest.mark.parametrize(("family", "version", "os_sku", "effective", "definition"), [
    ("Ubuntu", "1.33.2", "Ubuntu", "Ubuntu2204", "2204gen2containerd"),
    ("Ubuntu", "1.34.0", "Ubuntu", "Ubuntu2404", "2404gen2containerd"),
    ("Ubuntu2204", "1.34.0", "Ubuntu", "Ubuntu2204", "2204gen2containerd"),
    ("Ubuntu2404", "1.33.2", "Ubuntu", "Ubuntu2404", "2404gen2containerd"),
    ("AzureLinux", "1.31.5", "AzureLinux", "AzureLinux2", "V2gen2"),
    ("AzureLinux", "1.32.0", "AzureLinux", "AzureLinux3", "V3gen2"),
])
def test_the_image_family_labels_the_node_with_the_os_sku_requested_and_effective(
        arm: fake_arm.FakeARM, family: str, version: str, os_sku: str, effective: str, definition: str) -> None:
    w = _world(arm, {"imageFamily": family}, kubernetes_version=version)
    launched = w.cloud.create(_claim())
    image = _vm(arm)["properties"]["storageProfile"]["imageReference"]["communityGalleryImageId"]
    assert f"/images/{definition}/versions/" in image
    [node_class] = w.cluster.list("AKSNodeClass")
    assert all(f"/images/{definition[:4]}" in i["id"] for i in node_class["status"]["images"][:1])
    kubelet = _kubelet_labels(_env(_vm(arm)))
    for got in (kubelet, launched.metadata.labels):
        assert got["kubernetes.azure.com/os-sku"] == os_sku
        assert got["kubernetes.azure.com/os-sku-requested"] == family
        assert got["kubernetes.azure.com/os-sku-effective"] == effective
        assert "kubernetes.azure.com/fips_enabled" not in got


def test_trusted_launch_leaves_out_the_sizes_whose_resource_sku_says_trusted_launch_disabled() -> None:
    skus = _skus()
    skus[0] = fake_arm.sku("Standard_D2_v4", REGION, vcpus=2, memory_gb=8, extra={"TrustedLaunchDisabled": "True"})
    with fake_arm.FakeARM(skus=skus) as arm:
        w = _world(arm, {"security": {"trustedLaunch": {"secureBoot": True}}})
        w.cloud.create(_claim())
        assert _vm(arm)["properties"]["hardwareProfile"]["vmSize"] == "Standard_D4_v4"
    with fake_arm.FakeARM(skus=skus) as arm:  # without trusted launch the size is launched
        _world(arm, {}).cloud.create(_claim())
        assert _vm(arm)["properties"]["hardwareProfile"]["vmSize"] == "Standard_D2_v4"


def test_a_changed_security_setting_drifts_the_node(arm: fake_arm.FakeARM) -> None:
    w = _world(arm, {})
    launched = w.cloud.create(_claim())
    [node_class] = w.cluster.list("AKSNodeClass")
    node_class = copy.deepcopy(node_class)
    node_class["spec"]["security"] = {"encryptionAtHost": True}
    w.cluster.update(node_class)
    assert w.cloud.is_drifted(launched) == "NodeClassDrift"


AMD = "Standard_NV28adms_V710_v5"


@pytest.mark.parametrize("family", ["Ubuntu2204", "AzureLinux"])
def test_gpu_mode_none_lets_an_ubuntu_node_class_launch_an_amd_gpu_size_without_a_driver(family: str) -> None:
    skus = [fake_arm.sku(AMD, "eastus", vcpus=28, memory_gb=160, extra={"GPUs": "1"}),
            fake_arm.sku("Standard_D4_v4", "eastus", vcpus=4, memory_gb=16)]
    with fake_arm.FakeARM(skus=skus) as arm:
        w = _world(arm, {"imageFamily": family, "gpu": {"mode": "None"}}, region="eastus")
        if family == "AzureLinux":  # AKS supports its AMD GPU sizes on Ubuntu only
            with pytest.raises(errors.CreateError, match="no offering"):
                w.cloud.create(_claim(sizes=(AMD,)))
            assert arm.put_calls("virtualMachines") == []
            return
        launched = w.cloud.create(_claim(sizes=(AMD,)))
        vm = _vm(arm)
        assert vm["properties"]["hardwareProfile"]["vmSize"] == AMD
        env = _env(vm)
        assert (env["GPU_NODE"], env["CONFIG_GPU_DRIVER_IF_NEEDED"]) == ("false", "false")
        assert launched.status.capacity["amd.com/gpu"] == 1000
        assert launched.metadata.labels[labels.AZURE_SKU_GPU_MANUFACTURER] == "amd"


def test_with_the_gpu_driver_mode_an_amd_gpu_size_is_never_launched() -> None:
    skus = [fake_arm.sku(AMD, "eastus", vcpus=28, memory_gb=160, extra={"GPUs": "1"})]
    with fake_arm.FakeARM(skus=skus) as arm:
        w = _world(arm, {"gpu": {"mode": "Driver"}}, region="eastus")
        assert AMD not in {t.name for t in w.cloud.get_instance_types(None)}
        with pytest.raises(errors.CreateError, match="no offering"):
            w.cloud.create(_claim(sizes=(AMD,)))
        assert arm.put_calls("virtualMachines") == []
