"""Static NodePools' pure rules (karpy.provisioning.static).

Expectations from Karpenter v1.14: ``static/provisioning/suite_test.go`` ("should not create additional
nodeclaims when node limits are reached": replicas 3, 1 running, limits.nodes 1 -> none; "should create
additional nodeclaims to reach desired replicas"; "should handle zero replicas"), ``statenodepool.go``
``ReserveNodeCount`` (the limit counts active, deleting and pending-disruption NodeClaims),
``static/deprovisioning`` ("should prioritize nodeclaims that have unresolved providerID", "should
prioritize empty nodes (with only daemonset pods)", "should terminate non-empty nodes when empty nodes are
insufficient"; do-not-disrupt nodes last) and ``nodeclaimtemplate.go`` (a static NodeClaim leaves the
instance type to the cloud provider's cheapest compatible offering).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from karpy.api import labels as wk
from karpy.api import meta, nodepool
from karpy.api import pod as pod_mod
from karpy.provisioning import static

from . import builders as pb


def _pool(replicas: int, limits: dict[str, str] | None = None, requirements: list[dict[str, Any]] | None = None
          ) -> nodepool.NodePool:
    spec: dict[str, Any] = {"replicas": replicas, "template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": requirements or []}}}
    if limits:
        spec["limits"] = limits
    return nodepool.NodePool.from_manifest({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                            "metadata": {"name": "static"}, "spec": spec})


def _owned(p: pod_mod.Pod, kind: str, annotations: dict[str, str] | None = None) -> pod_mod.Pod:
    ref = meta.OwnerReference(api_version="apps/v1", kind=kind, name="o", uid="u", controller=True)
    md = dataclasses.replace(p.metadata, owner_references=(ref,), annotations=dict(annotations or {}))
    return dataclasses.replace(p, metadata=md)


def test_the_node_limit_stops_a_scale_up() -> None:
    assert static.scale_up_count(_pool(3, {"nodes": "1"}), running=1, pending=0, deleting=0) == 0


def test_a_scale_up_launches_the_difference_within_the_limit() -> None:
    assert static.scale_up_count(_pool(5), running=2, pending=0, deleting=0) == 3
    assert static.scale_up_count(_pool(5, {"nodes": "4"}), running=2, pending=0, deleting=1) == 1
    assert static.scale_up_count(_pool(0), running=0, pending=0, deleting=0) == 0


def test_nodes_being_disrupted_count_toward_the_replicas() -> None:
    assert static.scale_up_count(_pool(3), running=2, pending=1, deleting=0) == 0
    assert static.scale_down_count(_pool(3), running=3) == 0
    assert static.scale_down_count(_pool(1), running=3) == 2


def test_the_scale_down_takes_unlaunched_then_empty_then_cheapest_nodes_and_do_not_disrupt_last() -> None:
    daemon = _owned(pb.make_pod("ds"), "DaemonSet")
    app = _owned(pb.make_pod("app"), "ReplicaSet")
    guarded = _owned(pb.make_pod("vip"), "ReplicaSet", {wk.DO_NOT_DISRUPT: "true"})
    busy = [_owned(pb.make_pod(f"b{i}"), "ReplicaSet") for i in range(3)]
    members = [static.Member("guarded", True, (guarded,)), static.Member("busy", True, tuple(busy)),
               static.Member("one", True, (app,)), static.Member("daemons", True, (daemon,)),
               static.Member("launching", False)]
    assert static.scale_down_order(members, 1, 0.0) == ["launching"]
    assert static.scale_down_order(members, 2, 0.0) == ["launching", "daemons"]
    assert static.scale_down_order(members, 4, 0.0) == ["launching", "daemons", "one", "busy"]
    assert static.scale_down_order(members, 5, 0.0)[-1] == "guarded"


def test_a_static_nodeclaim_is_every_type_the_template_admits_cheapest_first() -> None:
    types = [pb.make_type("big", cpu=8, memory_gi=32, price=0.4), pb.make_type("small", cpu=2, memory_gi=8, price=0.1),
             pb.make_type("mid", cpu=4, memory_gi=16, price=0.2)]
    claim = static.template_claim(_pool(2), types)
    assert claim is not None
    assert claim.instance_type_names() == ["small", "mid", "big"] and claim.price == 0.1
    assert claim.pods == [] and claim.labels[wk.NODEPOOL] == "static"
    narrowed = static.template_claim(_pool(2, requirements=[
        {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["big"]}]), types)
    assert narrowed is not None and narrowed.instance_type_names() == ["big"]
    assert static.template_claim(_pool(2, requirements=[
        {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["none"]}]), types) is None
