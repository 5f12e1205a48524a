"""Commitments in the simulator: capacity already paid for is used first and never consolidated away
for paid capacity (examples/commitments-ri.yaml and a sharper case)."""

from __future__ import annotations

import collections
import functools
import pathlib

from karpy.simulator import engine, scenario

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "commitments-ri.yaml"


@functools.cache
def run(with_commitments: bool, text: str | None = None) -> engine.Result:
    body = text if text is not None else EXAMPLE.read_text()
    if not with_commitments:
        body = body.replace(
            "    commitments:\n      reservedInstances:\n      - {instanceType: m5.xlarge, count: 10}\n", "")
    return engine.Simulation(scenario.load_text(body)).run()


def types_at(result: engine.Result, t: float) -> collections.Counter[str]:
    sample = next(s for s in result.timeline if s.t >= t)
    return collections.Counter(dict(sample.nodes_by_instance_type))


def test_pods_fill_the_reserved_m5_xlarge_before_anything_is_bought_on_demand() -> None:
    covered = run(True)
    assert types_at(covered, 300)["m5.xlarge"] == 10
    bill = covered.metrics["simulator"]["commitments"]["overTime"]
    assert max(b["reservedInstanceUtilization"] for b in bill) == 1.0
    plain = run(False)
    assert types_at(plain, 300)["m5.xlarge"] < 10  # without RIs other types are cheaper per pod


def test_consolidation_keeps_covered_nodes_and_removes_paid_ones_first() -> None:
    covered = run(True)
    before, after = types_at(covered, 1190), types_at(covered, 2400)
    paid_before = sum(n for t, n in before.items() if t != "m5.xlarge")
    assert paid_before > 0
    assert sum(n for t, n in after.items() if t != "m5.xlarge") == 0
    assert sum(1 for p in covered.objects["pods"] if p["status"].get("phase") == "Running") == 18


def test_what_is_paid_counts_every_ri_fee_and_is_below_the_on_demand_equivalent_under_load() -> None:
    covered = run(True).metrics["simulator"]["commitments"]["overTime"]
    loaded = [b for b in covered if b["reservedInstanceUtilization"] == 1.0]
    assert loaded and all(b["paid"] < b["onDemandEquivalent"] for b in loaded)


SHARP = """
apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {name: ri-big}
spec:
  cloud:
    provider: aws
    region: us-east-1
    zones: [us-east-1a]
    COMMITMENTS
  until: 15m
  steps:
  - at: 3m
    scale: {kind: Deployment, namespace: default, name: app, replicas: 1}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.2xlarge, m5.large]}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: R
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {k: v}}]
  securityGroupSelectorTerms: [{tags: {k: v}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: default}
spec:
  replicas: 7
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}}
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""


def test_an_underused_node_under_an_ri_is_not_replaced_by_a_cheaper_paid_one() -> None:
    ri = "commitments: {reservedInstances: [{instanceType: m5.2xlarge, count: 1}]}"
    with_ri = engine.Simulation(scenario.load_text(SHARP.replace("COMMITMENTS", ri))).run()
    without = engine.Simulation(scenario.load_text(SHARP.replace("COMMITMENTS", ""))).run()
    final = [n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in with_ri.objects["nodes"]]
    assert final == ["m5.2xlarge"]
    assert [n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in without.objects["nodes"]] \
        == ["m5.large"]
