"""One moto server per test session; each test gets a reset account seeded for karpy (see moto_world)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from karpy import clock, settings
from karpy.cloudprovider.aws import factory, provider
from karpy.kube import memory

from . import moto_world

PRICES = {"m5.large": 0.096, "m5.xlarge": 0.192, "c5.large": 0.085, "c5.xlarge": 0.17, "r5.large": 0.126,
          "m6g.large": 0.077, "t3.medium": 0.0416}


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", moto_world.REGION)):
        os.environ.setdefault(key, value)
    server, url = moto_world.start_server()
    yield url
    server.stop()


@pytest.fixture(scope="session")
def response_cache() -> moto_world.ResponseCache:
    return moto_world.ResponseCache()


@dataclass
class AWS:
    url: str
    account: moto_world.Account
    clock: clock.VirtualClock
    cluster: memory.InMemoryCluster
    provider: provider.AWSCloudProvider
    capacity: moto_world.CapacityInjector
    pricing: moto_world.PricingStub
    ec2: Any

    def node_class(self, name: str = "default", **spec: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "amiSelectorTerms": [{"alias": "al2023@latest"}], "role": self.account.role,
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": moto_world.CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": moto_world.CLUSTER}}],
            **spec}
        return self.cluster.create({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                                    "metadata": {"name": name}, "spec": body})


def attach(p: provider.AWSCloudProvider, account: moto_world.Account, cache: moto_world.ResponseCache
           ) -> tuple[moto_world.CapacityInjector, moto_world.PricingStub]:
    cache.attach(p.session.ec2)
    injector = moto_world.CapacityInjector(account.subnet_zones)
    injector.attach(p.session.ec2)
    moto_world.FleetSecurityGroups(p.session.endpoint_url or "").attach(p.session.ec2)
    stub = moto_world.PricingStub(PRICES)
    stub.attach(p.session.pricing)
    return injector, stub


@pytest.fixture
def aws(moto_url: str, response_cache: moto_world.ResponseCache) -> AWS:
    moto_world.reset(moto_url)
    account = moto_world.seed_account(moto_url)
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock, rng=random.Random(1))
    s = settings.Settings(cluster_name=moto_world.CLUSTER, cluster_endpoint="https://example.eks.amazonaws.com")
    p = factory.build(s, vclock, cluster, endpoint_url=moto_url, region=moto_world.REGION,
                      kubernetes_version=moto_world.K8S_VERSION, ca_bundle="Q0EK")
    injector, stub = attach(p, account, response_cache)
    return AWS(moto_url, account, vclock, cluster, p, injector, stub, moto_world.client("ec2", moto_url))
