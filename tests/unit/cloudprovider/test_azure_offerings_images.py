"""Azure launch errors mark offerings as Karpenter's Azure provider does; images and status per imageFamily."""

from __future__ import annotations

import pytest

from karpy import clock
from karpy.api import aksnodeclass, labels
from karpy.cloudprovider import catalog, instancetype
from karpy.cloudprovider.azure import bootstrap, images, offerings

OD, SPOT = labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_SPOT
ZONES = ("japaneast-1", "japaneast-2", "japaneast-3")


def d2() -> instancetype.InstanceType:
    return next(t for t in catalog.load("azure", region="japaneast") if t.name == "Standard_D2_v4")


def test_a_zonal_allocation_failure_marks_both_capacity_types_in_that_zone_only() -> None:
    f = offerings.classify("ZonalAllocationFailed", "", d2(), "japaneast-2", OD)
    assert f is not None and f.reason == "ZonalAllocationFailure" and f.ttl == 3600
    assert set(f.keys) == {("Standard_D2_v4", "japaneast-2", OD), ("Standard_D2_v4", "japaneast-2", SPOT)}


def test_an_allocation_failure_marks_every_zone_of_the_size() -> None:
    f = offerings.classify("AllocationFailed", "", d2(), "japaneast-1", SPOT)
    assert f is not None and f.reason == "AllocationFailure"
    assert set(f.keys) == {("Standard_D2_v4", z, ct) for z in ZONES for ct in (OD, SPOT)}


def test_sku_not_available_marks_the_capacity_type_longer_for_on_demand() -> None:
    spot = offerings.classify("SkuNotAvailable", "", d2(), "japaneast-1", SPOT)
    od = offerings.classify("SkuNotAvailable", "", d2(), "japaneast-1", OD)
    assert spot is not None and od is not None
    assert set(spot.keys) == {("Standard_D2_v4", z, SPOT) for z in ZONES}
    assert (spot.ttl, od.ttl) == (3600, 23 * 3600)


@pytest.mark.parametrize(("message", "key", "ttl"), [
    ("exceeding approved standardDv4Family Cores quota. Current Limit: 0", ("Standard_D2_v4", "*", OD), 3600),
    ("exceeding approved standardDv4Family Cores quota. Current Limit: 10", ("Standard_D2_v4", "*", OD), 600),
    ("exceeding approved Total Regional Cores quota. Current Limit: 10", ("*", "*", OD), 3600),
    ("exceeding approved Total Regional Low Priority Cores quota (LowPriorityCores)", ("*", "*", SPOT), 3600),
])
def test_quota_errors_mark_what_the_quota_covers(message: str, key: tuple[str, str, str], ttl: float) -> None:
    f = offerings.classify("OperationNotAllowed", f"Operation could not be completed as it results in {message}",
                           d2(), "japaneast-1", OD)
    assert f is not None and f.reason == "SubscriptionQuotaReached"
    assert f.keys == (key,) and f.ttl == ttl


def test_other_errors_are_not_capacity_errors() -> None:
    assert offerings.classify("InvalidParameter", "bad", d2(), "japaneast-1", OD) is None
    assert offerings.classify("OperationNotAllowed", "the VM is being deleted", d2(), "japaneast-1", OD) is None


def test_the_cache_expires_entries_and_honours_wildcards() -> None:
    vclock = clock.VirtualClock()
    cache = offerings.UnavailableOfferings(vclock)
    cache.mark(("*", "*", SPOT), 600, "SubscriptionQuotaReached")
    cache.mark(("Standard_D2_v4", "japaneast-1", OD), 3600, "ZonalAllocationFailure")
    assert cache.is_unavailable("Standard_D8_v4", "japaneast-3", SPOT)
    assert not cache.is_unavailable("Standard_D8_v4", "japaneast-3", OD)
    [view] = cache.apply([d2()])
    assert {(o.zone, o.capacity_type) for o in view.offerings if not o.available} == {
        ("japaneast-1", OD), *((z, SPOT) for z in ZONES)}
    vclock.advance(601)
    assert not cache.is_unavailable("Standard_D8_v4", "japaneast-3", SPOT)
    assert cache.reason("Standard_D2_v4", "japaneast-1", OD) == "ZonalAllocationFailure"
    vclock.advance(3000)
    assert cache.entries() == {}


def test_each_image_family_resolves_gen2_gen1_and_arm64_images() -> None:
    for family in aksnodeclass.AKS_IMAGE_FAMILIES:
        found = images.images(family)
        assert [(i.arch, i.hyperv_generation) for i in found] == [("amd64", "2"), ("amd64", "1"), ("arm64", "2")]
    assert images.image_for("Ubuntu", None, {labels.ARCH: "arm64"}) == images.images("Ubuntu2204")[2].id
    assert "/AKSAzureLinux-" in (images.image_for("AzureLinux", "202502.01.0", {}) or "")
    assert (images.image_for("Ubuntu2404", "1.2.3", {labels.AZURE_SKU_HYPERV_GENERATION: "1"}) or "").endswith(
        "/images/2404containerd/versions/1.2.3")
    assert images.images("Windows2022") == []


def test_the_status_lists_images_and_is_not_ready_for_a_bad_subnet() -> None:
    obj = {"kind": "AKSNodeClass", "metadata": {"name": "default"},
           "spec": {"imageFamily": "Ubuntu2404", "vnetSubnetID": "subnet-1"}}
    status = images.resolve_status(obj, "1.31.2")
    assert status["conditions"][-1]["reason"] == "SubnetsNotReady"
    assert status["kubernetesVersion"] == "1.31.2" and len(status["images"]) == 3
    parsed = aksnodeclass.AKSNodeClass.from_manifest({**obj, "spec": {"imageFamily": "Ubuntu2404"}, "status": status})
    assert [i.id for i in parsed.status.images] == [i["id"] for i in status["images"]]
    assert parsed.status.images[0].requirements[0].key == labels.ARCH
    assert aksnodeclass.AKSNodeClass.from_manifest(parsed.to_manifest()) == parsed
    assert images.resolve_status({"kind": "EC2NodeClass"})["conditions"][-1]["reason"] == "UnsupportedNodeClass"


def _cluster(version: str = "1.31.2", **kw: str) -> bootstrap.ClusterBootstrap:
    base: dict[str, str] = dict(
        cluster_name="aks", api_server=bootstrap.api_server_name("https://aks.hcp.azmk8s.io:443"), ca_bundle="Q0E=",
        bootstrap_token="abcdef.0123456789abcdef", kubernetes_version=version, subscription_id="sub",
        location="japaneast", node_resource_group="MC_rg_aks_japaneast",
        subnet_id="/subscriptions/sub/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/s")
    base.update(kw)
    return bootstrap.ClusterBootstrap(**base)


def test_custom_data_is_a_script_exporting_what_aks_node_images_read_and_reads_back_the_same() -> None:
    node = bootstrap.NodeBootstrap(cluster=_cluster(), node_labels={"b": "2", "a": "x y", "kubernetes.io/foo": "no"},
                                   taints=["dedicated=web:NoSchedule"], max_pods=110)
    data = bootstrap.custom_data(node)
    assert data == bootstrap.custom_data(node)
    env = bootstrap.variables_of(bootstrap.decode(data))
    assert env == bootstrap.variables(node)
    assert env["API_SERVER_NAME"] == "aks.hcp.azmk8s.io" and env["KUBE_CA_CRT"] == "Q0E="
    assert env["KUBELET_NODE_LABELS"] == "a=x y,b=2"
    assert env["VIRTUAL_NETWORK"] == "v" and env["SUBNET"] == "s" and env["VIRTUAL_NETWORK_RESOURCE_GROUP"] == "net"
    flags = dict(f.split("=", 1) for f in env["KUBELET_FLAGS"].split())
    assert flags["--register-with-taints"] == "dedicated=web:NoSchedule,karpenter.sh/unregistered:NoExecute"
    assert flags["--max-pods"] == "110" and "--keep-terminated-pod-volumes" not in flags
    assert bootstrap.PROVISION_START in bootstrap.decode(data)


def test_kubelet_flags_follow_the_kubernetes_version() -> None:
    def flags(version: str) -> dict[str, str]:
        return bootstrap.kubelet_flags(bootstrap.NodeBootstrap(cluster=_cluster(version)))

    assert "--azure-container-registry-config" in flags("1.29.9")
    assert "--image-credential-provider-config" in flags("1.30.1")
    assert "--keep-terminated-pod-volumes" in flags("1.30.1")
    assert "--cloud-config" in flags("1.33.0") and "--cloud-config" not in flags("1.34.0")
    assert "--pod-infra-container-image" not in flags("1.35.0")
    assert bootstrap.kube_binary_url("1.31", "amd64") == ""  # the patch is unknown: the image's cached kubelet
    assert bootstrap.kube_binary_url("1.34.1", "amd64") == ""
    assert bootstrap.register_taints(["karpenter.sh/unregistered:NoExecute"]) == ["karpenter.sh/unregistered:NoExecute"]


def test_the_api_server_name_is_the_endpoint_host() -> None:
    assert bootstrap.api_server_name("https://x.hcp.eastus.azmk8s.io:443") == "x.hcp.eastus.azmk8s.io"
    assert bootstrap.api_server_name("https://10.0.0.1") == "10.0.0.1"
    assert bootstrap.api_server_name("https://[fd00::1]:443/") == "fd00::1"
    assert bootstrap.agent_network_plugin("azure", "overlay") == "none"
    assert bootstrap.agent_network_plugin("azure", "") == "azure"


def test_the_cache_takes_marks_from_many_threads_at_once() -> None:
    import threading

    cache = offerings.UnavailableOfferings(clock.VirtualClock())

    def mark(i: int) -> None:
        for j in range(200):
            cache.mark((f"Standard_D{i}_v{j}", "japaneast-1", OD), 60, "AllocationFailure")
            cache.entries()

    threads = [threading.Thread(target=mark, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache.entries()) == 800


def test_the_simulated_cloud_names_azure_images_as_the_azure_provider_does() -> None:
    from karpy.cloudprovider.fake import images as fake_images

    for family in aksnodeclass.AKS_IMAGE_FAMILIES:
        for size_labels in ({}, {labels.ARCH: "arm64"}, {labels.AZURE_SKU_HYPERV_GENERATION: "1"}):
            assert fake_images.azure_image(family, "202602.10.0", size_labels) == images.image_for(
                family, "202602.10.0", size_labels)
    assert "/2404gen2containerd/" in fake_images.azure_image("Ubuntu2404", "1")
    assert "AKSAzureLinux" in fake_images.azure_image("AzureLinux", "1")
    assert fake_images.AZURE_DEFAULT_IMAGE_VERSION == images.DEFAULT_VERSION
