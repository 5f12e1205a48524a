"""``karpenter.azure.com/sku-storage-ultra-ssd``: a NodeClaim that requires it gets a VM with Ultra SSD enabled in
a zone whose Resource SKU offers it; every node says whether its VM has it."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from karpy import clock, settings
from karpy.api import labels, nodeclaim
from karpy.cloudprovider import errors
from karpy.cloudprovider.azure import factory, provider, skus
from karpy.kube import memory

from . import fake_arm

pytestmark = pytest.mark.e2e

REGION = "japaneast"
RG = "MC_rg_aks_japaneast"
SUBNET = (f"/subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/{RG}/providers/Microsoft.Network/"
          "virtualNetworks/aks-vnet/subnets/aks-subnet")
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n").decode()
SETTINGS = settings.Settings(
    cluster_name="aks", cluster_endpoint="https://aks.hcp.japaneast.azmk8s.io:443",
    kubelet_bootstrap_token="abcdef.0123456789abcdef", ssh_public_key="ssh-ed25519 AAAA ops", vnet_subnet_id=SUBNET,
    node_resource_group=RG)
ULTRA_KEY = labels.AZURE_SKU_STORAGE_ULTRA_SSD


def _ultra_in(sku: dict[str, Any], zones: list[str]) -> dict[str, Any]:
    """The Resource SKU with ``zoneDetails`` saying ``UltraSSDAvailable`` in ``zones`` (ARM's wire form)."""
    sku["locationInfo"][0]["zoneDetails"] = [
        {"name": zones, "capabilities": [{"name": "UltraSSDAvailable", "value": "True"}]}]
    return sku


@pytest.fixture
def arm() -> Iterator[fake_arm.FakeARM]:
    cheap = fake_arm.sku("Standard_D2s_v5", REGION, vcpus=2, memory_gb=8)  # no Ultra SSD anywhere
    ultra = _ultra_in(fake_arm.sku("Standard_D4s_v5", REGION, vcpus=4, memory_gb=16), ["2"])
    with fake_arm.FakeARM(skus=[cheap, ultra]) as server:
        yield server


def _build(arm: fake_arm.FakeARM) -> provider.AzureCloudProvider:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    cluster.create({"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass",
                    "metadata": {"name": "default"}, "spec": {"imageFamily": "Ubuntu2204"}})
    cloud = factory.build(SETTINGS, vclock, cluster, environ={}, subscription_id=fake_arm.SUBSCRIPTION, region=REGION,
                          endpoint_url=arm.endpoint, polling_interval=0, retail_prices_endpoint="", ca_bundle=CA,
                          kubernetes_version="1.33.2")
    assert isinstance(cloud, provider.AzureCloudProvider)
    return cloud


def _claim(ultra: list[str] | None) -> nodeclaim.NodeClaim:
    reqs = [{"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
    if ultra is not None:
        reqs.append({"key": ULTRA_KEY, "operator": "In", "values": ultra})
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "default-u1"},
        "spec": {"nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"},
                 "requirements": reqs, "resources": {"requests": {"cpu": "500m"}}}})


def _vm(arm: fake_arm.FakeARM) -> dict[str, Any]:
    [call] = arm.put_calls("virtualMachines")
    body: dict[str, Any] = call.body
    return body


def test_a_nodeclaim_requiring_ultra_ssd_gets_it_enabled_in_a_zone_that_offers_it(arm: fake_arm.FakeARM) -> None:
    cloud = _build(arm)
    launched = cloud.create(_claim(["true"]))
    vm = _vm(arm)
    assert vm["properties"]["hardwareProfile"]["vmSize"] == "Standard_D4s_v5"  # D2s_v5 is cheaper, no Ultra SSD
    assert vm["zones"] == ["2"]
    assert vm["properties"]["additionalCapabilities"] == {"ultraSSDEnabled": True}
    assert launched.metadata.labels[ULTRA_KEY] == "true"
    [listed] = cloud.list()
    assert listed.metadata.labels[ULTRA_KEY] == "true"


@pytest.mark.parametrize("ultra", [None, ["false"], ["true", "false"]])
def test_without_an_explicit_ultra_ssd_requirement_the_vm_has_none_and_says_false(
        arm: fake_arm.FakeARM, ultra: list[str] | None) -> None:
    launched = _build(arm).create(_claim(ultra))
    vm = _vm(arm)
    assert vm["properties"]["hardwareProfile"]["vmSize"] == "Standard_D2s_v5"
    assert "additionalCapabilities" not in vm["properties"]
    assert launched.metadata.labels[ULTRA_KEY] == "false"


def test_ultra_ssd_where_no_size_offers_it_launches_nothing(arm: fake_arm.FakeARM) -> None:
    claim = _claim(["true"])
    claim = nodeclaim.NodeClaim.from_manifest({**claim.to_manifest(), "spec": {
        **claim.to_manifest()["spec"],
        "requirements": [*claim.to_manifest()["spec"]["requirements"],
                         {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["Standard_D2s_v5"]}]}})
    with pytest.raises(errors.CreateError) as err:
        _build(arm).create(claim)
    assert err.value.reason == "NoCompatibleInstanceTypes"
    assert arm.put_calls("virtualMachines") == []


def test_the_resource_sku_record_keeps_the_zones_with_ultra_ssd_and_the_regional_capability() -> None:
    zonal = _ultra_in(fake_arm.sku("Standard_E4s_v5", REGION), ["1", "3"])
    regional = fake_arm.sku("Standard_E8s_v5", "westcentralus", zones=(), extra={"UltraSSDAvailable": "True"})
    assert skus.to_record(zonal, REGION)["ultra_ssd_zones"] == ["1", "3"]  # type: ignore[index]
    assert skus.to_record(zonal, REGION)["ultra_ssd_regional"] is False  # type: ignore[index]
    assert skus.to_record(regional, "westcentralus")["ultra_ssd_regional"] is True  # type: ignore[index]
