"""RESERVED_ENIS, ISOLATED_VPC and partition placement groups against moto: the Pricing API never called in an
isolated VPC, max pods lowered by the reserved ENIs, and a partition carried into the launch template and
the node's labels."""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

from karpy import settings
from karpy.api import nodeclaim, nodepool, pod
from karpy.cloudprovider.aws import factory, instancetypes, pricing, provider, session
from karpy.kube import memory
from karpy.provisioning import results, scheduler

from . import moto_world
from .conftest import AWS, attach
from .test_launch_features import template_data, user_data

pytestmark = pytest.mark.e2e

PG_ID = "pg-0a1b2c3d4e5f60718"
PARTITION_KEY = "karpenter.k8s.aws/placement-group-partition"


def rebuilt(aws: AWS, **values: Any) -> provider.AWSCloudProvider:
    """A provider built by the factory from Settings with ``values``, attached to the test's moto hooks."""
    cluster = memory.InMemoryCluster(aws.clock, rng=random.Random(3))
    s = settings.Settings(cluster_name=moto_world.CLUSTER, cluster_endpoint="https://example.eks.amazonaws.com",
                          **values)
    p = factory.build(s, aws.clock, cluster, endpoint_url=aws.url, region=moto_world.REGION,
                      kubernetes_version=moto_world.K8S_VERSION, ca_bundle="Q0EK")
    aws.capacity, aws.pricing = attach(p, aws.account, moto_world.ResponseCache())
    aws.cluster, aws.provider = cluster, p
    return p


def claim(name: str, types: list[str], *extra: dict[str, Any]) -> nodeclaim.NodeClaim:
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [
                     {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
                     {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}, *extra],
                 "resources": {"requests": {"cpu": "1"}}}})


def nodeadm_max_pods(aws: AWS) -> int:
    text = user_data(aws)
    part = text.split('Content-Type: application/node.eks.aws; charset="us-ascii"\n\n', 1)[1]
    return int(yaml.safe_load(part.split("\n--//", 1)[0])["spec"]["kubelet"]["config"]["maxPods"])


class FailingPricing:
    """A Pricing endpoint that must never be reached: it records each call and fails it."""

    def __init__(self) -> None:
        self.calls = 0

    def attach(self, pricing: Any) -> None:
        pricing.meta.events.register_first("before-call.pricing.GetProducts", self._fail)

    def _fail(self, **_: Any) -> Any:
        self.calls += 1
        raise AssertionError("the Pricing API was called")


# ----------------------------------------------------------------------------------------- ISOLATED_VPC


def test_an_isolated_vpc_never_calls_the_pricing_api_and_prices_from_the_packaged_table(aws: AWS) -> None:
    p = rebuilt(aws, isolated_vpc=True)
    aws.pricing.prices["m5.large"] = 0.5  # what the (stubbed) Pricing API would say: never used
    endpoint = FailingPricing()
    endpoint.attach(p.session.pricing)
    aws.node_class()
    types = {t.name: t for t in p.get_instance_types(None)}
    launched = p.create(claim("iso-a", ["m5.large"]))
    aws.clock.advance(13 * 3600.0)  # past the 12 h on-demand refresh: still no call
    p.get_instance_types(None)
    assert endpoint.calls == 0 and aws.pricing.calls == 0
    assert p.prices.on_demand_source == "packaged"
    packaged = float(instancetypes.data()["types"]["m5.large"]["price"])
    on_demand = {o.zone: o.price for o in types["m5.large"].offerings if o.capacity_type == "on-demand"}
    assert set(on_demand.values()) == {packaged}
    assert launched.status.provider_id.startswith("aws:///")
    spot = [o.price for o in types["m5.large"].offerings if o.capacity_type == "spot"]
    assert spot and set(spot) == {0.00001}  # spot prices still come from EC2 (it has a VPC endpoint)


def test_without_isolated_vpc_the_same_failing_pricing_endpoint_is_called(aws: AWS) -> None:
    p = rebuilt(aws)
    endpoint = FailingPricing()
    endpoint.attach(p.session.pricing)
    with pytest.raises(AssertionError, match="the Pricing API was called"):
        p.get_instance_types(None)
    assert endpoint.calls == 1


def test_a_govcloud_region_never_calls_the_pricing_api_either(aws: AWS) -> None:
    sess = session.Session("us-gov-west-1", endpoint_url=aws.url)
    endpoint = FailingPricing()
    endpoint.attach(sess.pricing)
    prices = pricing.Prices(sess, aws.clock)
    assert prices.on_demand("m5.large") == float(instancetypes.data()["types"]["m5.large"]["price"])
    assert endpoint.calls == 0 and prices.on_demand_source == "packaged"


def test_an_isolated_vpc_uses_a_named_instance_profile_without_asking_iam(aws: AWS) -> None:
    p = rebuilt(aws, isolated_vpc=True)
    asked: list[str] = []

    def fail(**_: Any) -> Any:
        asked.append("GetInstanceProfile")
        raise AssertionError("IAM was called")

    p.session.iam.meta.events.register_first("before-call.iam.GetInstanceProfile", fail)
    body = aws.node_class(instanceProfile="KarpenterNodeInstanceProfile")
    del body["spec"]["role"]
    status = p.resolve_node_class(body)
    assert asked == []
    assert status["instanceProfile"] == "KarpenterNodeInstanceProfile"
    assert next(c for c in status["conditions"] if c["type"] == "Ready")["status"] == "True"


def test_outside_an_isolated_vpc_a_named_instance_profile_iam_does_not_know_is_not_ready(aws: AWS) -> None:
    body = aws.node_class(instanceProfile="KarpenterNodeInstanceProfile")
    del body["spec"]["role"]
    status = aws.provider.resolve_node_class(body)
    ready = next(c for c in status["conditions"] if c["type"] == "InstanceProfileReady")
    assert (ready["status"], ready["reason"]) == ("False", "InstanceProfileNotFound")


# ---------------------------------------------------------------------------------------- RESERVED_ENIS


def test_reserved_enis_lower_the_eni_limited_max_pods_kube_reserved_memory_and_the_kubelets_max_pods(
        aws: AWS) -> None:
    info = aws.ec2.describe_instance_types(InstanceTypes=["m5.large"])["InstanceTypes"][0]["NetworkInfo"]
    assert (info["MaximumNetworkInterfaces"], info["Ipv4AddressesPerInterface"]) == (3, 10)
    before = {t.name: t for t in aws.provider.get_instance_types(None)}["m5.large"]
    assert before.capacity["pods"] == 29_000  # 3 * (10 - 1) + 2
    p = rebuilt(aws, reserved_enis=1)
    aws.node_class()
    after = {t.name: t for t in p.get_instance_types(None)}["m5.large"]
    assert after.capacity["pods"] == 20_000  # (3 - 1) * (10 - 1) + 2
    mib = 2**20 * 1000
    assert before.overhead.kube_reserved["memory"] == (11 * 29 + 255) * mib
    assert after.overhead.kube_reserved["memory"] == (11 * 20 + 255) * mib
    assert after.allocatable["memory"] - before.allocatable["memory"] == 9 * 11 * mib
    launched = p.create(claim("eni-a", ["m5.large"]))
    assert launched.status.capacity["pods"] == 20_000
    assert nodeadm_max_pods(aws) == 20


def test_reserving_every_eni_leaves_a_type_no_pods() -> None:
    assert instancetypes.eni_limited_pods(3, 10, 3) == 0
    assert instancetypes.eni_limited_pods(3, 10, 2) == 11  # 1 * 9 + 2


# ------------------------------------------------------------------------------ placement-group partitions


def partition_group(aws: AWS, strategy: str = "partition") -> moto_world.PlacementGroupStub:
    stub = moto_world.PlacementGroupStub({"hdfs": (PG_ID, strategy)})
    stub.attach(aws.provider.session.ec2)
    aws.node_class(placementGroupSelector={"name": "hdfs"})
    return stub


def with_partition(aws: AWS, number: int) -> None:
    """EC2 reports ``Placement.PartitionNumber`` for instances (moto keeps none)."""
    def add(parsed: dict[str, Any], **_: Any) -> None:
        for r in parsed.get("Reservations") or ():
            for inst in r.get("Instances") or ():
                inst.setdefault("Placement", {})["PartitionNumber"] = number

    aws.provider.session.ec2.meta.events.register("after-call.ec2.DescribeInstances", add)


def test_a_partition_requirement_puts_its_lowest_partition_in_the_launch_template_and_the_labels(aws: AWS) -> None:
    partition_group(aws)
    launched = aws.provider.create(claim("pg-a", ["m5.large"], {"key": PARTITION_KEY, "operator": "In",
                                                                "values": ["3", "2", "5"]}))
    assert template_data(aws)["Placement"] == {"GroupId": PG_ID, "PartitionNumber": 2}
    assert launched.metadata.labels["karpenter.k8s.aws/placement-group-id"] == PG_ID
    assert launched.metadata.labels[PARTITION_KEY] == "2"


def test_without_a_partition_requirement_ec2_chooses_and_the_label_comes_from_the_instance(aws: AWS) -> None:
    partition_group(aws)
    with_partition(aws, 4)
    launched = aws.provider.create(claim("pg-b", ["m5.large"]))
    assert template_data(aws)["Placement"] == {"GroupId": PG_ID}
    assert launched.metadata.labels[PARTITION_KEY] == "4"
    listed = {c.metadata.name: c for c in aws.provider.list()}
    assert listed["pg-b"].metadata.labels[PARTITION_KEY] == "4"


def test_a_cluster_placement_group_ignores_a_partition_requirement(aws: AWS) -> None:
    partition_group(aws, strategy="cluster")
    launched = aws.provider.create(claim("pg-c", ["m5.large"], {"key": PARTITION_KEY, "operator": "In",
                                                                "values": ["1"]}))
    assert template_data(aws)["Placement"] == {"GroupId": PG_ID}
    assert PARTITION_KEY not in launched.metadata.labels
    assert launched.metadata.labels["karpenter.k8s.aws/placement-group-id"] == PG_ID


def test_a_node_whose_placement_group_the_nodeclass_no_longer_resolves_to_is_placement_group_drifted(
        aws: AWS) -> None:
    stub = partition_group(aws)
    launched = aws.provider.create(claim("pg-d", ["m5.large"], {"key": PARTITION_KEY, "operator": "In",
                                                                "values": ["1"]}))
    assert aws.provider.is_drifted(launched) == ""
    stub.groups["hdfs"] = ("pg-0ffffffffffffffff", "partition")  # the group was deleted and made again
    aws.clock.advance(120.0)  # past the resolution cache
    assert aws.provider.is_drifted(launched) == "PlacementGroupDrift"


def _pool() -> nodepool.NodePool:
    return nodepool.NodePool.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                              "values": ["m5.large", "m5.xlarge"]},
                             {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}})


def test_a_partition_groups_offerings_decide_its_partitions_and_the_types_carry_the_group(aws: AWS) -> None:
    partition_group(aws)
    types = aws.provider.get_instance_types(_pool())
    assert types
    for t in types:
        assert t.labels["karpenter.k8s.aws/placement-group-id"] == PG_ID
        assert t.offering_labels == {PARTITION_KEY: frozenset(str(i) for i in range(1, 8))}
        assert all(o.label_values(PARTITION_KEY) == tuple(str(i) for i in range(1, 8)) for o in t.offerings)


def test_a_cluster_placement_groups_offerings_decide_no_partition(aws: AWS) -> None:
    partition_group(aws, strategy="cluster")
    for t in aws.provider.get_instance_types(_pool()):
        assert t.labels["karpenter.k8s.aws/placement-group-id"] == PG_ID and t.offering_labels == {}


def _schedule(aws: AWS, value: str) -> results.Results:
    pool = _pool()
    pod_ = pod.build("hdfs-0", namespace="default", requests={"cpu": "1", "memory": "1Gi"},
                     nodeSelector={PARTITION_KEY: value})
    return scheduler.Scheduler([pool], {"default": aws.provider.get_instance_types(pool)}).solve([pod_])


def test_a_pod_that_requires_a_partition_gets_a_nodeclaim_launched_into_that_partition(aws: AWS) -> None:
    partition_group(aws)
    [new] = _schedule(aws, "3").new_claims
    assert new.requirements[PARTITION_KEY].values == frozenset({"3"})
    reqs = [{"key": k, "operator": op, "values": list(vs)}
            for k, op, vs in new.requirements.to_node_selector_requirements() if k == PARTITION_KEY]
    launched = aws.provider.create(claim("pg-e", [new.instance_types[0].name], *reqs))
    assert template_data(aws)["Placement"] == {"GroupId": PG_ID, "PartitionNumber": 3}
    assert launched.metadata.labels[PARTITION_KEY] == "3"


def test_a_pod_that_requires_a_partition_the_group_does_not_have_is_not_scheduled(aws: AWS) -> None:
    partition_group(aws)  # seven partitions
    res = _schedule(aws, "9")
    assert res.new_claims == [] and list(res.errors) == ["default/hdfs-0"]
