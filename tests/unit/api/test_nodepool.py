from __future__ import annotations

import json
from typing import Any

import pytest

from karpy.api import errors, nodepool, quantity


def _pool(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "template": {
            "metadata": {"labels": {"team": "web"}, "annotations": {"example.com/owner": "web"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
            },
        },
    }
    base.update(spec)
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": base,
    }


def test_a_nodepool_without_disruption_gets_v1_defaults() -> None:
    np = nodepool.NodePool.from_manifest(_pool())
    assert np.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert np.disruption.consolidate_after == 0.0
    assert np.disruption.budgets == (nodepool.Budget(nodes="10%"),)
    assert np.template.spec.expire_after == 720 * 3600.0
    assert np.weight is None


def test_a_disruption_block_without_consolidate_after_is_rejected_as_in_v1() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        nodepool.NodePool.from_manifest(_pool(disruption={"consolidationPolicy": "WhenEmpty"}))
    err = exc.value.errors[0]
    assert err.path == "spec.disruption.consolidateAfter"
    assert "required" in err.expected


def test_budgets_schedules_and_durations_are_read() -> None:
    np = nodepool.NodePool.from_manifest(
        _pool(
            disruption={
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "Never",
                "budgets": [
                    {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h", "reasons": ["Drifted"]},
                    {"nodes": 3},
                ],
            }
        )
    )
    b0, b1 = np.disruption.budgets
    assert np.disruption.consolidate_after is None
    assert (b0.nodes, b0.schedule, b0.duration, b0.reasons) == (
        "0",
        "0 9 * * mon-fri",
        8 * 3600.0,
        ("Drifted",),
    )
    assert b1.nodes == "3" and b1.applies_to("Empty")
    assert not b0.applies_to("Empty")


def test_limits_are_milli_units() -> None:
    np = nodepool.NodePool.from_manifest(_pool(limits={"cpu": 1000, "memory": "1000Gi"}))
    assert np.limits == {"cpu": 1_000_000, "memory": 1000 * 2**30 * quantity.MILLI}


def test_a_nodepool_round_trips_through_its_manifest() -> None:
    np = nodepool.NodePool.from_manifest(
        _pool(
            weight=10,
            limits={"cpu": "100"},
            disruption={
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "30s",
                "budgets": [{"nodes": "20%", "schedule": "@daily", "duration": "10m"}],
            },
        )
    )
    manifest = np.to_manifest()
    assert manifest["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert manifest["spec"]["disruption"]["budgets"][0]["duration"] == "10m"
    assert nodepool.NodePool.from_manifest(manifest) == np


def test_the_hash_ignores_requirements_and_taint_order() -> None:
    base = _pool()
    base["spec"]["template"]["spec"]["taints"] = [
        {"key": "a", "effect": "NoSchedule"},
        {"key": "b", "effect": "NoExecute"},
    ]
    other = json.loads(json.dumps(base))
    other["spec"]["template"]["spec"]["requirements"][0]["values"] = ["on-demand"]
    other["spec"]["template"]["spec"]["taints"].reverse()
    assert nodepool.NodePool.from_manifest(base).hash() == nodepool.NodePool.from_manifest(other).hash()


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("metadata", "labels"), {"team": "api"}),
        (("metadata", "annotations"), {"x": "y"}),
        (("spec", "expireAfter"), "24h"),
        (("spec", "startupTaints"), [{"key": "s", "effect": "NoSchedule"}]),
        (("spec", "nodeClassRef"), {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "other"}),
        (("spec", "terminationGracePeriod"), "1h"),
    ],
)
def test_the_hash_changes_with_each_static_drift_field(path: tuple[str, str], value: Any) -> None:
    changed = _pool()
    changed["spec"]["template"][path[0]][path[1]] = value
    assert nodepool.NodePool.from_manifest(changed).hash() != nodepool.NodePool.from_manifest(_pool()).hash()


def test_the_hash_is_stable_across_processes() -> None:
    # a fixed value: a change here rolls every node of every user on upgrade, so it must be deliberate
    assert nodepool.NodePool.from_manifest(_pool()).hash() == "17964807871204008298"


def test_the_v1beta1_kubelet_compatibility_annotation_is_read() -> None:
    d = _pool()
    d["metadata"]["annotations"] = {nodepool.KUBELET_COMPAT_ANNOTATION: json.dumps({"maxPods": 20})}
    kubelet = nodepool.NodePool.from_manifest(d).compat_kubelet()
    assert kubelet is not None and kubelet.max_pods == 20
    assert nodepool.NodePool.from_manifest(_pool()).compat_kubelet() is None
