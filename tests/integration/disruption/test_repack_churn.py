"""Consolidation does not chase its own re-packs: a mixed workload scaled every half hour (the shape of
``bench/design.py``'s day, small) on the aws catalog.

Before :func:`karpy.disruption.simulation.carried_out`, the many-to-many re-pack replaced whole groups
of nodes by a tighter packing (the MILP's) that the kube-scheduler did not reproduce once the pods were
evicted (it places them first fit): pods went pending or planned nodes stayed short, and five minutes
later the next re-pack moved them all again: 86 voluntary disruptions in these two hours, for two to
six nodes (9 since).
"""

from __future__ import annotations

import math
from typing import Any

from karpy.api import labels

from .test_consolidation import NODECLASS, Run, build, expect_settled, scale

SHAPES = {"general": ("1", "2Gi", 0.35), "compute": ("2", "2Gi", 0.25), "memory": ("1", "8Gi", 0.25),
          "small": ("500m", "1Gi", 0.15)}
"""Pod shape: (cpu, memory, share of the peak CPU), as the design bench's."""
PEAK_CPU = 12 * 4 * 0.85  # about twelve xlarge nodes at the day's peak (these two hours are its night)


def _cpu(text: str) -> float:
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _workload() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                    {"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                     "values": ["m5", "c5", "r5", "m6i", "c6i", "r6i"]},
                    {"key": "karpenter.k8s.aws/instance-size", "operator": "In",
                     "values": ["large", "xlarge", "2xlarge", "4xlarge"]}]}},
                "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m",
                               "budgets": [{"nodes": "100%"}]}}}
    objects: list[dict[str, Any]] = [NODECLASS, pool]
    steps: list[dict[str, Any]] = []
    last: dict[str, int] = {}
    k = 0
    for shape, (cpu, memory, share) in SHAPES.items():
        for i in range(2):
            name = f"{shape}-{i}"
            peak = max(1, round(PEAK_CPU * share / 2 / _cpu(cpu)))
            objects.append({"apiVersion": "apps/v1", "kind": "Deployment",
                            "metadata": {"name": name, "namespace": "default"},
                            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                                         {"name": "app", "image": f"{shape}:1",
                                          "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}})
            for half in range(4):  # every 30 minutes for two hours, each Deployment's day a little later
                phase = (half / 2 - 4 - k * 0.5) / 24 * 2 * math.pi
                last[name] = max(1, round(peak * (0.35 + 0.65 * (0.5 - 0.5 * math.cos(phase)))))
                steps.append(scale(f"{half * 30}m", name, last[name]))
            k += 1
    return objects, steps, last


def test_a_half_hourly_scaled_mixed_workload_does_not_make_consolidation_chase_its_re_packs() -> None:
    objects, steps, last = _workload()
    run = Run(build(objects, steps, until="2h", provider="aws"))
    run.run_until(7200)
    disrupted = run.messages("DisruptionTerminating")
    assert disrupted, "the scale-downs leave nodes to consolidate"
    assert len(disrupted) <= 10, disrupted
    expect_settled(run, last)
