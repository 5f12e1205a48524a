"""Nodes and taints, parsed from the shared EKS scenario and from kubectl-style manifests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy.api import errors, fields, node

SCENARIO = Path(__file__).resolve().parents[3].parent / "shared" / "scenarios/eks-scale-out-v1alpha5.yaml"
KI = 1024 * 1000


def scenario_nodes() -> list[dict[str, Any]]:
    if not SCENARIO.exists():
        pytest.skip(f"{SCENARIO} is not available")
    with SCENARIO.open() as fh:
        return [d for d in yaml.safe_load_all(fh) if d and d.get("kind") == "Node"]


def test_the_eks_scenario_nodes_parse_with_capacity_allocatable_and_readiness() -> None:
    nodes = [node.Node.from_manifest(d) for d in scenario_nodes()]
    assert [n.name for n in nodes] == [
        "ip-10-99-13-40.ec2.internal",
        "ip-10-99-17-198.ec2.internal",
        "ip-10-99-22-103.ec2.internal",
    ]
    first = nodes[0]
    assert first.provider_id == "aws:///us-east-1a/i-0a1b2c3d4e5f60001"
    assert first.labels["topology.kubernetes.io/zone"] == "us-east-1a"
    assert first.capacity == {"cpu": 2000, "memory": 7934284 * KI, "pods": 29_000}
    assert first.allocatable == {"cpu": 1930, "memory": 7244108 * KI, "pods": 29_000}
    assert all(n.ready for n in nodes)
    assert first.metadata.namespace == ""
    assert first.taints == ()
    assert not first.unschedulable


def test_a_node_survives_a_round_trip_through_its_manifest() -> None:
    for d in scenario_nodes():
        n = node.Node.from_manifest(d)
        out = n.to_manifest()
        assert out["status"]["allocatable"] == {"cpu": "1930m", "memory": "7244108Ki", "pods": "29"}
        assert node.Node.from_manifest(out) == n


def test_a_cordoned_tainted_not_ready_node_parses() -> None:
    d = yaml.safe_load(
        """
        apiVersion: v1
        kind: Node
        metadata:
          name: n1
          creationTimestamp: "2026-01-01T00:00:00Z"
          managedFields: [{manager: kubelet}]
        spec:
          unschedulable: true
          taints:
          - {key: karpenter.sh/disrupted, effect: NoSchedule}
          - {key: node.kubernetes.io/unreachable, effect: NoExecute, timeAdded: "2026-01-01T00:01:00Z"}
          - {key: dedicated, value: gpu, effect: PreferNoSchedule}
        status:
          capacity: {cpu: "4", memory: 16Gi, nvidia.com/gpu: "1"}
          conditions:
          - {type: MemoryPressure, status: "False"}
          - {type: Ready, status: Unknown, reason: NodeStatusUnknown}
        """
    )
    n = node.Node.from_manifest(d)
    assert n.unschedulable
    assert not n.ready
    assert n.conditions == {"MemoryPressure": "False", "Ready": "Unknown"}
    assert n.capacity["nvidia.com/gpu"] == 1000
    assert n.taints[0] == node.Taint("karpenter.sh/disrupted")
    assert n.taints[1].time_added == 1_767_225_660.0
    assert str(n.taints[2]) == "dedicated=gpu:PreferNoSchedule"
    assert n.metadata.creation_timestamp == 1_767_225_600.0
    assert node.Node.from_manifest(n.to_manifest()) == n


def test_a_taint_with_an_unknown_effect_names_the_field() -> None:
    d = {"kind": "Node", "metadata": {"name": "n1"}, "spec": {"taints": [{"key": "a", "effect": "NoWay"}]}}
    with pytest.raises(errors.ValidationError) as info:
        node.Node.from_manifest(d)
    err = info.value.errors[0]
    assert (err.obj, err.path, err.found) == ("Node n1", "spec.taints[0].effect", "NoWay")


def test_a_bad_allocatable_amount_names_the_node_and_resource() -> None:
    d = {"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"memory": "7GB"}}}
    with pytest.raises(errors.ValidationError, match=r"Node n1: status\.allocatable\.memory"):
        node.Node.from_manifest(d)


def test_taints_match_on_key_and_effect_only() -> None:
    a = node.Taint("k", "v1", "NoSchedule")
    assert a.matches(node.Taint("k", "v2", "NoSchedule"))
    assert not a.matches(node.Taint("k", "v1", "NoExecute"))


def test_a_taint_round_trips_through_its_dict() -> None:
    d = {"key": "k", "value": "v", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}
    assert node.Taint.parse(fields.Fields(d, "test")).to_dict() == d


def test_a_node_without_a_name_is_rejected() -> None:
    with pytest.raises(errors.ValidationError, match=r"metadata\.name"):
        node.Node.from_manifest({"kind": "Node", "metadata": {}})
