"""Garbage collection and the SQS interruption queue with karpy's AWS provider on moto."""

from __future__ import annotations

import json
import time

import pytest

from karpy import settings
from karpy.cloudprovider import interface
from karpy.cloudprovider.aws import factory, interruption, provider
from karpy.controllers import runtime
from karpy.operator import register_all

from . import moto_world
from .conftest import AWS

pytestmark = pytest.mark.e2e


def _run(aws: AWS, tag_list: list[dict[str, str]]) -> str:
    run = aws.ec2.run_instances(ImageId=aws.account.amis["amd64"], MinCount=1, MaxCount=1, InstanceType="m5.large",
                                SubnetId=aws.account.subnets["us-east-1a"],
                                TagSpecifications=[{"ResourceType": "instance", "Tags": tag_list}])
    return str(run["Instances"][0]["InstanceId"])


def _state(aws: AWS, iid: str) -> str:
    return str(aws.ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]["State"]["Name"])


def test_garbage_collection_terminates_a_leaked_tagged_instance_and_never_a_node_group_or_foreign_one(
        aws: AWS) -> None:
    aws.node_class()
    ours = {"karpenter.sh/nodepool": "default", "karpenter.k8s.aws/ec2nodeclass": "default",
            "eks:eks-cluster-name": moto_world.CLUSTER, "karpenter.sh/nodeclaim": "default-ghost"}
    leaked = _run(aws, [{"Key": k, "Value": v} for k, v in ours.items()])
    node_group = _run(aws, [{"Key": f"kubernetes.io/cluster/{moto_world.CLUSTER}", "Value": "owned"},
                            {"Key": "eks:nodegroup-name", "Value": "ng-1"}])
    other_cluster = _run(aws, [{"Key": k, "Value": "another" if k == "eks:eks-cluster-name" else v}
                               for k, v in ours.items()])
    aws.cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ng-node"},
                        "spec": {"providerID": f"aws:///us-east-1a/{node_group}"},
                        "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    manager = runtime.Manager(aws.cluster, aws.clock)
    controllers = register_all(manager, aws.cluster, aws.provider, aws.clock,
                               settings.Settings(cluster_name=moto_world.CLUSTER))
    end = aws.clock.now() + 300
    while True:
        due = manager.next_due()
        if due is None or due > end:
            break
        if due > aws.clock.now():
            aws.clock.set(due)
        manager.run_due()

    assert controllers.gc.collected_instances == [f"aws:///us-east-1a/{leaked}"]
    assert _state(aws, leaked) in ("shutting-down", "terminated")
    assert _state(aws, node_group) == "running"
    assert _state(aws, other_cluster) == "running"
    assert aws.cluster.get("Node", "ng-node")["metadata"]["name"] == "ng-node"


def test_the_queue_turns_eventbridge_messages_into_notices_and_deletes_malformed_ones(aws: AWS) -> None:
    sqs = moto_world.client("sqs", aws.url)
    url = sqs.create_queue(QueueName="karpy-q")["QueueUrl"]
    aws.node_class()
    from .test_provider import claim

    launched = aws.provider.create(claim("default-q", ["m5.large"], capacity_type="spot"))
    pid = launched.status.provider_id
    iid = provider.instance_id_of(pid)
    queue = interruption.SQSQueue(aws.provider.session, "karpy-q", aws.clock, aws.provider.ice, wait_seconds=0)
    stamp = "2024-11-21T10:00:00Z"
    for kind, detail in (("SpotInterruption", ""), ("Rebalance", ""), ("ScheduledChange", ""),
                         ("StateChange", "stopping"), ("StateChange", "running")):
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(interruption.event(iid, kind, stamp, detail)))
    sqs.send_message(QueueUrl=url, MessageBody="not json")
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"source": "aws.s3", "detail-type": "Object", "detail": {}}))

    seen = []
    for _ in range(5):  # unacknowledged notices stay pending: each call returns all of them
        seen = queue.pending_interruptions()
    assert sorted((m.kind, m.detail) for m in seen) == [
        ("Rebalance", ""), ("ScheduledChange", ""), ("SpotInterruption", ""), ("StateChange", "stopping")]
    assert all(m.provider_id == pid for m in seen)
    assert queue.malformed == 2
    zone = launched.metadata.labels["topology.kubernetes.io/zone"]
    assert aws.provider.ice.is_unavailable("m5.large", zone, "spot")
    for m in seen:
        queue.ack(m)
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"]) == 0


def test_with_a_long_poll_the_queue_receives_on_a_background_thread_and_never_blocks_the_caller(aws: AWS) -> None:
    sqs = moto_world.client("sqs", aws.url)
    url = sqs.create_queue(QueueName="karpy-bg")["QueueUrl"]
    queue = interruption.SQSQueue(aws.provider.session, url, aws.clock, wait_seconds=1)
    try:
        start = time.perf_counter()
        assert queue.pending_interruptions() == []
        assert time.perf_counter() - start < 0.5
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(
            interruption.event("i-0123456789abcdef0", "Rebalance", "2024-11-21T10:00:00Z")))
        deadline = time.perf_counter() + 10
        pending: list[interface.InterruptionMessage] = []
        while not pending and time.perf_counter() < deadline:
            time.sleep(0.05)
            pending = queue.pending_interruptions()
        assert [m.kind for m in pending] == ["Rebalance"]
        assert pending[0].provider_id.endswith("/i-0123456789abcdef0")
    finally:
        queue.close()


def test_without_an_endpoint_the_factory_reads_endpoint_ca_and_version_from_eks_describe_cluster(aws: AWS) -> None:
    eks = moto_world.client("eks", aws.url)
    created = eks.create_cluster(name=moto_world.CLUSTER, version="1.30",
                                 roleArn="arn:aws:iam::123456789012:role/eks",
                                 resourcesVpcConfig={"subnetIds": list(aws.account.subnets.values())})["cluster"]
    p = factory.build(settings.Settings(cluster_name=moto_world.CLUSTER), aws.clock, aws.cluster,
                      endpoint_url=aws.url, region=moto_world.REGION)
    assert p.cluster_endpoint == created["endpoint"] and p.cluster_endpoint
    assert p.ca_bundle == created["certificateAuthority"]["data"]
    assert p.kubernetes_version == "1.30"
    missing = factory.build(settings.Settings(cluster_name="no-such-cluster"), aws.clock, aws.cluster,
                            endpoint_url=aws.url, region=moto_world.REGION)
    assert missing.cluster_endpoint == "" and missing.kubernetes_version == factory.DEFAULT_KUBERNETES_VERSION
