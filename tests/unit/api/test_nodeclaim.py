from __future__ import annotations

from typing import Any

import pytest

from karpy.api import errors, nodeclaim, quantity

GiB = 2**30 * quantity.MILLI


def _claim(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
        ],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    }
    base.update(spec)
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": base,
        "status": {
            "providerID": "aws:///us-east-1a/i-0123",
            "nodeName": "ip-10-0-0-1.ec2.internal",
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            "conditions": [
                {"type": "Launched", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"},
                {"type": "Registered", "status": "False", "reason": "NodeNotFound"},
            ],
        },
    }


def test_a_nodeclaim_reads_spec_and_status_in_milli_units() -> None:
    nc = nodeclaim.NodeClaim.from_manifest(_claim(resources={"requests": {"cpu": "1", "memory": "2Gi"}}))
    assert nc.name == "default-abcde"
    assert nc.nodepool_name == "default"
    assert nc.spec.requirements[0].values == ("m5.large",)
    assert nc.spec.resources_requests == {"cpu": 1000, "memory": 2 * GiB}
    assert nc.spec.node_class_ref == nodeclaim.NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default")
    assert nc.status.allocatable["cpu"] == 1930
    assert nc.status.provider_id == "aws:///us-east-1a/i-0123"


def test_expire_after_defaults_to_720h_and_never_is_none() -> None:
    assert nodeclaim.NodeClaim.from_manifest(_claim()).spec.expire_after == 720 * 3600.0
    assert nodeclaim.NodeClaim.from_manifest(_claim(expireAfter="Never")).spec.expire_after is None


def test_conditions_are_looked_up_by_type() -> None:
    nc = nodeclaim.NodeClaim.from_manifest(_claim())
    assert nc.is_true(nodeclaim.LAUNCHED)
    assert not nc.is_true(nodeclaim.REGISTERED)
    registered = nc.condition(nodeclaim.REGISTERED)
    assert registered is not None and registered.reason == "NodeNotFound"
    assert nc.condition(nodeclaim.INITIALIZED) is None


def test_a_nodeclaim_round_trips_through_its_manifest() -> None:
    nc = nodeclaim.NodeClaim.from_manifest(
        _claim(
            taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
            startupTaints=[{"key": "cilium", "effect": "NoExecute"}],
            terminationGracePeriod="1h",
            expireAfter="24h",
        )
    )
    manifest = nc.to_manifest()
    assert manifest["apiVersion"] == "karpenter.sh/v1"
    assert manifest["spec"]["expireAfter"] == "24h"
    assert manifest["spec"]["terminationGracePeriod"] == "1h"
    assert nodeclaim.NodeClaim.from_manifest(manifest) == nc


def test_a_bad_condition_status_names_its_path() -> None:
    d = _claim()
    d["status"]["conditions"][0]["status"] = "Yes"
    with pytest.raises(errors.ValidationError) as exc:
        nodeclaim.NodeClaim.from_manifest(d)
    assert exc.value.errors[0].path == "status.conditions[0].status"
    assert exc.value.errors[0].obj == "NodeClaim default-abcde"
