"""Garbage collection: leaked instances go, instance-less NodeClaims go, foreign things stay."""

from __future__ import annotations

from karpy.kube import errors, interface

from . import builders as b

FOREIGN_NODE = {
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "static-1", "labels": {"kubernetes.io/hostname": "static-1"}},
    "spec": {"providerID": "kwok://static-1"},
    "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "20"},
               "conditions": [{"type": "Ready", "status": "True"}]},
}


def test_gc_terminates_a_leaked_instance_and_leaves_foreign_instances_and_pre_existing_nodes_alone() -> None:
    w = b.make_world()
    tag_key, tag_value = w.cloud.ownership_tag()
    leaked = w.cloud.add_instance("fake-it-1", "test-zone-1", "on-demand",
                                  tags=w.cloud.karpy_tags("default", "default-ghost"), nodeclaim_name="default-ghost")
    foreign = w.cloud.add_instance("fake-it-1", "test-zone-1", "on-demand", tags={"owner": "someone-else"})
    node_group = w.cloud.add_instance("fake-it-1", "test-zone-1", "on-demand",
                                      tags={tag_key: tag_value, "eks:nodegroup-name": "ng-1"})
    static = w.cloud.add_instance("fake-it-1", "test-zone-2", "on-demand")
    w.cluster.create(dict(FOREIGN_NODE, spec={"providerID": static.provider_id}))

    w.at(10.0)
    assert leaked.provider_id in w.running_instances()  # the first sweep saw it too young
    w.at(121.0)
    assert leaked.provider_id not in w.running_instances()
    assert w.karpy.gc.collected_instances == [leaked.provider_id]
    assert foreign.provider_id in w.running_instances()
    assert node_group.provider_id in w.running_instances()  # tagged as the cluster's, but not karpy's
    assert static.provider_id in w.running_instances()
    assert w.cluster.get("Node", "static-1")["metadata"]["name"] == "static-1"
    w.at(600.0)
    assert w.karpy.gc.collected_instances == [leaked.provider_id]


def test_gc_never_terminates_the_instance_of_a_live_nodeclaim() -> None:
    w = b.make_world()
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("web"))
    w.at(500.0)
    (claim,) = w.nodeclaims()
    assert claim["status"]["providerID"] in w.running_instances()
    assert w.karpy.gc.collected_instances == [] and w.karpy.gc.collected_nodeclaims == []


def test_gc_deletes_a_nodeclaim_whose_instance_disappeared() -> None:
    w = b.make_world()
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("web"))
    w.at(60.0)
    (claim,) = w.nodeclaims()
    name = interface.name_of(claim)
    # the instance vanishes behind karpy's back (terminated in the console)
    w.cloud.interrupt(claim["status"]["providerID"], "StateChange")
    for msg in w.cloud.pending_interruptions():  # and the notice is lost: only GC can notice
        w.cloud.ack(msg)
    w.at(250.0)
    assert name in w.karpy.gc.collected_nodeclaims
    try:
        w.cluster.get("NodeClaim", name)
        gone = False
    except errors.NotFound:
        gone = True
    assert gone
    assert w.events("InstanceTerminated", name=name)
    assert w.karpy.metrics.value("karpenter_nodeclaims_disrupted_total", reason="garbage_collected") == 1
