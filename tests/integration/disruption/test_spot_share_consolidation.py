"""Consolidation honours a workload's spot share (``karpy.io/max-spot-percent``, issue 23 section 7): an
oversized on-demand node of such a workload is replaced by a smaller on-demand node, never by the cheaper
spot one, and the replicas stay off spot; a workload without the annotation moves to spot."""

from __future__ import annotations

from typing import Any

from karpy.api import labels

from .test_consolidation import NODECLASS, Run, build, deployment, expect_settled, scale

TYPES = ("m5.large", "m5.2xlarge")


def _pool() -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": labels.INSTANCE_TYPE, "operator": "In", "values": list(TYPES)},
                                 {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]},
                                 {"key": labels.ZONE, "operator": "In", "values": ["us-east-1a"]}]}},
                     "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}}}


def _run(annotations: dict[str, str] | None) -> Run:
    web = deployment("web", 0, "1000m")
    if annotations:
        web["metadata"]["annotations"] = annotations
    run = Run(build([NODECLASS, _pool(), web], [scale("10s", "web", 6), scale("5m", "web", 1)], provider="aws"))
    run.run_until(290)
    return run


def _capacity_types(run: Run) -> list[str]:
    return sorted(n["metadata"]["labels"].get(labels.CAPACITY_TYPE, "") for n in run.nodes())


def test_an_on_demand_node_of_a_zero_spot_workload_is_replaced_on_demand_not_by_spot() -> None:
    run = _run({"karpy.io/max-spot-percent": "0"})
    assert _capacity_types(run) == ["on-demand"]
    run.run_until(1200)
    assert run.messages("DisruptionTerminating") == ["Disrupting Node: Consolidation/Replace"]
    assert run.node_types() == ["m5.large"] and _capacity_types(run) == ["on-demand"]
    expect_settled(run, {"web": 1})


def test_the_same_workload_without_a_share_is_replaced_by_spot() -> None:
    run = _run(None)
    run.run_until(1200)
    assert "spot" in _capacity_types(run)
