"""Node images come from the newest version in AKS's community galleries (served by the fake ARM), cached."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from karpy import clock, settings
from karpy.api import labels, nodeclaim
from karpy.cloudprovider.azure import factory, gallery, images, provider
from karpy.kube import memory

from . import fake_arm

pytestmark = pytest.mark.e2e

REGION = "japaneast"
RG = "MC_rg_aks_japaneast"
SUBNET = (f"/subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/rg/providers/Microsoft.Network/"
          "virtualNetworks/aks-vnet/subnets/aks-subnet")
UBUNTU = images.UBUNTU_GALLERY
NODE_CLASS = {"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": "default"},
              "spec": {"imageFamily": "Ubuntu2204"}}


@dataclass
class World:
    arm: fake_arm.FakeARM
    cluster: memory.InMemoryCluster
    clock: clock.VirtualClock
    cloud: provider.AzureCloudProvider


@pytest.fixture
def world() -> Iterator[World]:
    with fake_arm.FakeARM(skus=[fake_arm.sku("Standard_D2_v4", REGION)]) as arm:
        arm.publish_image(UBUNTU, "2204gen2containerd", "202601.05.0", "2026-01-06T00:00:00Z")
        arm.publish_image(UBUNTU, "2204gen2containerd", "202602.10.0", "2026-02-11T00:00:00Z")
        arm.publish_image(UBUNTU, "2204gen2containerd", "202603.01.0", "2026-03-02T00:00:00Z", exclude_from_latest=True)
        arm.publish_image(UBUNTU, "2204gen2containerd", "202512.01.0", "2025-12-02T00:00:00Z")
        vclock = clock.VirtualClock()
        cluster = memory.InMemoryCluster(vclock)
        cluster.create(dict(NODE_CLASS))
        cloud = factory.build(settings.Settings(cluster_name="aks"), vclock, cluster, environ={}, region=REGION,
                              subscription_id=fake_arm.SUBSCRIPTION, resource_group=RG, subnet_id=SUBNET,
                              endpoint_url=arm.endpoint, polling_interval=0, retail_prices_endpoint="")
        assert isinstance(cloud, provider.AzureCloudProvider)
        yield World(arm, cluster, vclock, cloud)


def _claim(name: str = "default-a1b2c") -> nodeclaim.NodeClaim:
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name, "labels": {}},
        "spec": {"nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"},
                 "requirements": [{"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
                 "resources": {"requests": {"cpu": "100m"}}}})


def _gallery_calls(arm: fake_arm.FakeARM) -> list[str]:
    return [c.path for c in arm.requests if "/communityGalleries/" in c.path]


def _image(arm: fake_arm.FakeARM, name: str) -> str:
    vm = arm.of_type("virtualmachines")[name]
    return str(vm["properties"]["storageProfile"]["imageReference"]["communityGalleryImageId"])


def test_a_launch_boots_the_newest_published_version_and_the_status_lists_it(world: World) -> None:
    world.cloud.create(_claim())
    assert _image(world.arm, "aks-default-a1b2c") == (
        f"/CommunityGalleries/{UBUNTU}/images/2204gen2containerd/versions/202602.10.0")
    status = world.cloud.resolve_node_class(world.cluster.get("AKSNodeClass", "default"))
    ids = [i["id"] for i in status["images"]]
    assert ids[0].endswith("/2204gen2containerd/versions/202602.10.0")
    # definitions the gallery does not have (404) fall back to the default version
    assert ids[1].endswith(f"/2204containerd/versions/{images.DEFAULT_VERSION}")
    assert [p.rsplit("/", 3)[-2] for p in _gallery_calls(world.arm)].count("2204gen2containerd") == 1


def test_the_answer_is_cached_for_three_days_then_a_new_version_drifts_the_node(world: World) -> None:
    launched = world.cloud.create(_claim())
    assert world.cloud.is_drifted(launched) == ""
    world.arm.publish_image(UBUNTU, "2204gen2containerd", "202604.20.0", "2026-04-21T00:00:00Z")
    world.clock.advance(gallery.IMAGE_TTL - 60)
    assert world.cloud.is_drifted(launched) == ""  # still the cached answer
    calls = len(_gallery_calls(world.arm))
    world.clock.advance(120)
    assert world.cloud.is_drifted(launched) == "ImageDrift"
    assert len(_gallery_calls(world.arm)) > calls
    world.cloud.create(_claim("default-z9y8x"))
    assert _image(world.arm, "aks-default-z9y8x").endswith("/versions/202604.20.0")


def test_a_pinned_image_version_wins_over_the_gallery(world: World) -> None:
    nc = world.cluster.get("AKSNodeClass", "default")
    world.cluster.update({**nc, "spec": {**nc["spec"], "imageVersion": "202512.01.0"}})
    world.cloud.create(_claim())
    assert _image(world.arm, "aks-default-a1b2c").endswith("/2204gen2containerd/versions/202512.01.0")
    assert _gallery_calls(world.arm) == []


def test_a_gallery_that_cannot_be_read_keeps_the_last_answer() -> None:
    vclock = clock.VirtualClock()
    with fake_arm.FakeARM() as arm:
        arm.publish_image(UBUNTU, "2204gen2containerd", "202602.10.0", "2026-02-11T00:00:00Z")
        cloud = factory.build(settings.Settings(cluster_name="aks"), vclock, memory.InMemoryCluster(vclock),
                              environ={}, region=REGION, subscription_id=fake_arm.SUBSCRIPTION, resource_group=RG,
                              subnet_id=SUBNET, endpoint_url=arm.endpoint, polling_interval=0,
                              retail_prices_endpoint="")
        assert isinstance(cloud, provider.AzureCloudProvider)
        versions = cloud.image_versions
        assert versions.latest(UBUNTU, "2204gen2containerd") == "202602.10.0"
        arm.image_versions.clear()
        vclock.advance(gallery.IMAGE_TTL + 1)
        assert versions.latest(UBUNTU, "2204gen2containerd") == "202602.10.0"  # 404 now: stale beats none
        assert versions.latest(UBUNTU, "2404gen2containerd") is None


def test_newest_skips_excluded_and_end_of_life_versions() -> None:
    now = clock.parse_rfc3339("2026-06-01T00:00:00Z")
    items = [
        {"name": "a", "properties": {"publishedDate": "2026-01-01T00:00:00Z"}},
        {"name": "b", "properties": {"publishedDate": "2026-03-01T00:00:00Z", "endOfLifeDate": "2026-05-01T00:00:00Z"}},
        {"name": "c", "properties": {"publishedDate": "2026-04-01T00:00:00Z", "excludeFromLatest": True}},
        {"name": "d", "properties": {"publishedDate": "2026-02-01T00:00:00Z", "endOfLifeDate": "2027-01-01T00:00:00Z"}},
    ]
    assert gallery.newest(items, now) == "d"
    assert gallery.newest([], now) is None


def test_the_image_ttl_is_an_option_of_the_factory() -> None:
    vclock = clock.VirtualClock()
    with fake_arm.FakeARM() as arm:
        arm.publish_image(UBUNTU, "2204gen2containerd", "202602.10.0", "2026-02-11T00:00:00Z")
        cloud = factory.build(settings.Settings(cluster_name="aks"), vclock, memory.InMemoryCluster(vclock),
                              environ={}, region=REGION, subscription_id=fake_arm.SUBSCRIPTION, resource_group=RG,
                              subnet_id=SUBNET, endpoint_url=arm.endpoint, polling_interval=0,
                              retail_prices_endpoint="", image_ttl=600)
        assert isinstance(cloud, provider.AzureCloudProvider)
        assert cloud.image_versions.latest(UBUNTU, "2204gen2containerd") == "202602.10.0"
        arm.publish_image(UBUNTU, "2204gen2containerd", "202603.10.0", "2026-03-11T00:00:00Z")
        vclock.advance(601)
        assert cloud.image_versions.latest(UBUNTU, "2204gen2containerd") == "202603.10.0"
