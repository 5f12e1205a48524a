"""Issue 21 item 2.5: node repair's safety valve.

Karpenter's node health controller (``pkg/controllers/node/health/controller.go``) repairs a
node only while the unhealthy nodes of its NodePool (every node whose condition matches a repair
policy, tolerated or not) are at most ``20%`` of the pool's nodes, *rounded up*
(``GetScaledValueFromIntOrPercent(20%, len(nodes), true)``), at any pool size; otherwise it
publishes ``NodeRepairBlocked``. karpy always repaired pools of fewer than five nodes and counted
only nodes past their toleration, so a pool whose every node went ``Ready=Unknown`` (an outage)
was replaced node by node.
"""

from __future__ import annotations

from karpy.controllers import repair
from karpy.simulator import engine, scenario

from . import scenarios as sc

SPREAD = """
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector: {matchLabels: {app: web}}
"""


def _run(replicas: int) -> tuple[int, int]:
    """Every 2 minutes a Ready karpy node goes Ready=Unknown; the repair policy tolerates 30m."""
    text = sc.text(sc.docs(sc.nodepool(), sc.deployment("web", replicas, pod_spec=SPREAD)), until="40m",
                   settings="featureGates: {NodeRepair: true}")
    text = text.replace("  seed: 3\n", "  seed: 3\n  faults: {nodes: {notReadyEvery: 2m}}\n")
    result = engine.Simulation(scenario.load_text(text, source="parity.yaml")).run()
    return len(sc.events(result, repair.REASON_REPAIR)), len(sc.events(result, repair.REASON_BLOCKED))


def test_a_pool_whose_two_nodes_are_both_unhealthy_is_not_repaired() -> None:
    repaired, blocked = _run(2)  # 2 of 2 unhealthy > ceil(20% of 2) = 1
    assert repaired == 0
    assert blocked >= 1


def test_a_single_unhealthy_node_is_repaired() -> None:
    repaired, blocked = _run(1)  # 1 of 1 unhealthy <= ceil(20% of 1) = 1
    assert repaired >= 1
    assert blocked == 0


def test_twenty_percent_is_rounded_up_as_karpenter_does() -> None:
    assert [repair.allowed_unhealthy(n) for n in (1, 2, 5, 6, 7, 10, 15, 16)] == [1, 1, 1, 2, 2, 2, 3, 4]
