"""Issue 12 item 4: ``limits.nodes`` on a NodePool counts, as Karpenter's ``nodes`` resource.

Karpenter counts one ``nodes`` per NodeClaim against ``spec.limits.nodes``: a limit of 2 launches
2 nodes however many pods wait, and the rest stay pending with the limit as the reason.
"""

from __future__ import annotations

from . import scenarios as sc

# one pod per node: each pod takes most of the largest m5 size allowed
POOL_REQS = """
- {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
- {key: kubernetes.io/arch, operator: In, values: [amd64]}
- {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
"""


def test_a_limit_of_two_nodes_launches_two_nodes() -> None:
    pool = sc.nodepool(requirements=POOL_REQS, extra_spec="limits: {nodes: 2}")
    result = sc.run(sc.docs(pool, sc.deployment("web", 4, cpu="1500m")), until="4m")
    assert sc.launched(result) == 2
    assert len(result.objects["nodeclaims"]) == 2
    assert len(sc.running(result, "web-")) == 2
    waiting = sc.pending(result, "web-")
    assert len(waiting) == 2
    messages = {e["message"] for e in sc.events(result, "FailedScheduling") if e.get("source") == "karpenter"}
    assert any("its limits (nodes 2) would be exceeded" in m for m in messages), messages


def test_a_nodes_limit_with_room_left_does_not_hold_pods_back() -> None:
    pool = sc.nodepool(requirements=POOL_REQS, extra_spec="limits: {nodes: 5, cpu: '100'}")
    result = sc.run(sc.docs(pool, sc.deployment("web", 4, cpu="1500m")), until="4m")
    assert sc.launched(result) == 4
    assert len(sc.running(result, "web-")) == 4
