"""``consolidationPolicy: Balanced`` in ``karpy simulate`` scenarios, virtual time.

Expectations from Karpenter v1.14's ``disruption/balanced.go`` and ``designs/balanced-consolidation.md``:
a move is made when (savings / NodePool cost) / (disruption / NodePool disruption) >= 1/k, k = 2; a
single-node pool's replacement must therefore save at least half its price; emptiness deletes empty
nodes whatever the policy (``controller.go``).
"""

from __future__ import annotations

from karpy.simulator import engine

from . import scenarios as sc

STEPS = """
- at: 10m
  scale: {kind: Deployment, namespace: default, name: app, replicas: 5}
"""
REQUIREMENTS = """
- {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
- {key: karpenter.k8s.aws/instance-family, operator: In, values: [c6i, m6i, r6i]}
- {key: karpenter.k8s.aws/instance-size, operator: In, values: [2xlarge]}
"""


def _run(policy: str) -> engine.Result:
    pool = sc.nodepool(requirements=REQUIREMENTS, disruption=f"{{consolidationPolicy: {policy}, "
                                                              "consolidateAfter: 30s}")
    return sc.run(sc.docs(pool, sc.deployment("app", 8, memory="5Gi")), until="30m", steps=STEPS)


def _types(result: engine.Result) -> list[str]:
    return sorted(n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in sc.karpy_nodes(result))


def test_balanced_refuses_a_replacement_saving_less_than_half_of_a_lone_nodes_price() -> None:
    """r6i.2xlarge ($0.504) -> m6i.2xlarge ($0.384) saves 24% of the pool's cost for all its disruption:
    score 0.24 < 0.5. WhenEmptyOrUnderutilized makes the move."""
    eager = _run("WhenEmptyOrUnderutilized")
    assert _types(eager) == ["m6i.2xlarge"]
    balanced = _run("Balanced")
    assert _types(balanced) == ["r6i.2xlarge"]
    refusals = [e["message"] for e in sc.events(balanced, "Unconsolidatable") if "Balanced" in e["message"]]
    assert refusals and "score 0.24 below threshold 0.50 (k=2)" in refusals[-1]
    moves = balanced.metrics["karpenter"]["karpenter_consolidation_moves_total"]
    assert {r["labels"]["decision"] for r in moves} == {"rejected"}
    assert sc.events(balanced, "ConsolidationApproved") == []  # refusals: metrics only, as Karpenter


def test_balanced_deletes_a_node_whose_pods_fit_elsewhere_when_the_saving_is_worth_it() -> None:
    """Two nodes of one type, one pod left on each after a scale-down: deleting one saves half the
    pool's cost for half its disruption ((1 + 1) of (2 + 2): score 1 >= 0.5), and the move is made."""
    pool = sc.nodepool(requirements=REQUIREMENTS, disruption="{consolidationPolicy: Balanced, consolidateAfter: 30s}")
    steps = """
    - at: 3m
      apply:
      - apiVersion: apps/v1
        kind: Deployment
        metadata: {name: b, namespace: default}
        spec:
          replicas: 4
          selector: {matchLabels: {app: b}}
          template:
            metadata: {labels: {app: b}}
            spec:
              containers:
              - {name: app, image: registry.example/app:1, resources: {requests: {cpu: 1500m, memory: 1Gi}}}
    - at: 10m
      scale: {kind: Deployment, namespace: default, name: a, replicas: 1}
    - at: 10m
      scale: {kind: Deployment, namespace: default, name: b, replicas: 1}
    """
    result = sc.run(sc.docs(pool, sc.deployment("a", 4, cpu="1500m", memory="1Gi")), until="25m", steps=steps)
    moves = result.metrics["karpenter"].get("karpenter_consolidation_moves_total") or []
    assert any(r["labels"]["decision"] == "approved" and r["value"] >= 1 for r in moves), moves
    assert len(sc.karpy_nodes(result)) == 1
    assert len(sc.running(result, "a")) == 1 and len(sc.running(result, "b")) == 1
    approved = sc.events(result, "ConsolidationApproved")
    assert {e["involvedObject"]["kind"] for e in approved} == {"Node", "NodeClaim"}
    assert {e["message"] for e in approved} == {
        "score 1.00 >= threshold 0.50 (k: 2, savings 50.0%, disruption 50.0%)"}
