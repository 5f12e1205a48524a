"""``consolidationPolicy: Balanced`` on the real control plane through `karpy controller --cloud-provider kwok`.

Two single-node Balanced NodePools whose ``c-48x`` node is left with one 10-CPU pod after a scale-down.
Expectations from Karpenter v1.14's ``disruption/balanced.go`` (score = (savings / pool cost) /
(disruption / pool disruption), approved at >= 1/k, k = 2), ``events/events.go``
(``ConsolidationApproved`` on the Node and the NodeClaim, message ``score %.2f >= threshold %.2f (k: %d,
savings %.1f%%, disruption %.1f%%)``) and ``metrics.go``
(``karpenter_consolidation_moves_total{decision,nodepool,policy}``). A lone node's move carries all its
pool's disruption, so its score is the share of the price it saves:

* ``bal-cheap`` may also use ``c-16x``: replacing the ``c-48x`` ($1.303/h) by a ``c-16x`` ($0.434/h) saves
  two thirds: score 0.67, approved, replaced, the events on the API server;
* ``bal-dear`` may also use only ``c-32x`` ($0.869/h): the replacement saves a third: score 0.33, refused
  (metrics only, as Karpenter; karpy's ``Unconsolidatable`` event says the score), and the node stays.

Both moves publish ``ConsolidationCandidate`` (``Consolidation candidate: replace: [node] -> [1 replacement]
(savings: $x.xx)``), computed before the score.
"""

from __future__ import annotations

import re
from typing import Any

from e2e import controller_process as cp
from realcluster import workloads as w
from realcluster.conftest import Scope, wait_until
from support import realcluster

APPROVED = "score 0.67 >= threshold 0.50 (k: 2, savings 66.7%, disruption 100.0%)"
BIG = "c-48x-amd64-linux"


def _pool(name: str, types: list[str]) -> dict[str, Any]:
    pool = w.nodepool(name, policy="Balanced")
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types})
    return pool


def _events(real: realcluster.RealCluster, reason: str) -> list[dict[str, Any]]:
    return list(real.get_json("events", "-A", "--field-selector", f"reason={reason}")["items"])


def _live_nodes(real: realcluster.RealCluster, pool: str) -> list[dict[str, Any]]:
    return [n for n in w.pool_nodes(real, pool) if not n["metadata"].get("deletionTimestamp")]


def _moves(controller: cp.Controller, decision: str, pool: str) -> float:
    status, body = controller.get("/metrics")
    assert status == 200
    pattern = (r'^karpenter_consolidation_moves_total\{[^}]*decision="' + decision + r'"[^}]*nodepool="' + pool
               + r'"[^}]*policy="Balanced"[^}]*\} (\S+)$')
    return sum(float(m.group(1)) for m in re.finditer(pattern, body, re.MULTILINE))


def _type(node: dict[str, Any]) -> str:
    return str(node["metadata"]["labels"]["node.kubernetes.io/instance-type"])


def test_balanced_replaces_a_node_when_the_saving_is_worth_it_and_keeps_one_when_it_is_not(
        real: realcluster.RealCluster, scope: Scope, controller: cp.Controller) -> None:
    ns = scope.namespace("rc-balanced")
    scope.nodepool(_pool("bal-cheap", ["c-16x-amd64-linux", BIG]))
    scope.nodepool(_pool("bal-dear", ["c-32x-amd64-linux", BIG]))
    real.apply([w.deployment(f"big-{p}", ns, 1, cpu="34", pool=f"bal-{p}") for p in ("cheap", "dear")])
    wait_until(lambda: all(w.running(real, ns, f"app=big-{p}", 1) for p in ("cheap", "dear")), 120,
               lambda: f"the 34-CPU pods running:\n{controller.log()[-3000:]}")
    real.apply([w.deployment(f"small-{p}", ns, 1, cpu="10", pool=f"bal-{p}") for p in ("cheap", "dear")])
    wait_until(lambda: all(w.running(real, ns, f"app=small-{p}", 1) for p in ("cheap", "dear")), 60,
               "the 10-CPU pods running beside them")
    (cheap,) = w.pool_nodes(real, "bal-cheap")
    (dear,) = w.pool_nodes(real, "bal-dear")
    assert _type(cheap) == _type(dear) == BIG
    (cheap_claim,) = [c["metadata"]["name"] for c in w.pool_claims(real, "bal-cheap")]

    real.kubectl("delete", "deployment", "big-cheap", "big-dear", "-n", ns)
    wait_until(lambda: [_type(n) for n in _live_nodes(real, "bal-cheap")] == ["c-16x-amd64-linux"]
               and len(w.pool_claims(real, "bal-cheap")) == 1 and w.running(real, ns, "app=small-cheap", 1), 180,
               lambda: f"bal-cheap replaced by a c-16x:\n{controller.log()[-4000:]}")

    approved = _events(real, "ConsolidationApproved")
    assert {(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["message"]) for e in approved} == {
        ("Node", cheap["metadata"]["name"], APPROVED),
        ("NodeClaim", cheap_claim, APPROVED)}
    assert _moves(controller, "approved", "bal-cheap") >= 1
    candidates = {(e["involvedObject"]["kind"], e["message"]) for e in _events(real, "ConsolidationCandidate")
                  if e["involvedObject"]["name"] in (cheap["metadata"]["name"], cheap_claim)}
    assert candidates == {(kind, f"Consolidation candidate: replace: [{cheap['metadata']['name']}] -> "
                                 "[1 replacement] (savings: $0.87)") for kind in ("Node", "NodeClaim")}

    dear_name = dear["metadata"]["name"]
    wait_until(lambda: _moves(controller, "rejected", "bal-dear") >= 1, 60,
               lambda: f"a rejected move of bal-dear:\n{controller.log()[-4000:]}")
    refusals = [e["message"] for e in _events(real, "Unconsolidatable") if e["involvedObject"]["name"] == dear_name]
    assert any("consolidationPolicy Balanced" in m and "score 0.33 below threshold 0.50 (k=2)" in m
               for m in refusals), refusals
    # Karpenter publishes the candidate event before the score: the refused move has one too
    assert f"Consolidation candidate: replace: [{dear_name}] -> [1 replacement] (savings: $0.43)" in {
        e["message"] for e in _events(real, "ConsolidationCandidate") if e["involvedObject"]["name"] == dear_name}
    assert [n["metadata"]["name"] for n in _live_nodes(real, "bal-dear")] == [dear_name]
    assert w.running(real, ns, "app=small-dear", 1)

