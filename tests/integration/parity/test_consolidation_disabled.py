"""Issue 12 item 10: ConsolidationDisabled. A WhenEmpty NodePool's non-empty nodes say why they stay.

Karpenter v1.14 (``consolidation.ShouldDisrupt``) records a Normal ``Unconsolidatable`` event on
each candidate Node and NodeClaim: ``NodePool "<name>" has consolidation policy WhenEmpty, but
node is not empty``, and ``NodePool "<name>" has consolidation disabled`` when
``consolidateAfter`` is ``Never``.
"""

from __future__ import annotations

from karpy.simulator import engine

from . import scenarios as sc


def _run(disruption: str) -> engine.Result:
    pool = sc.nodepool(disruption=disruption)
    return sc.run(sc.docs(pool, sc.deployment("web", 3, cpu="1")), until="4m")


def _messages(result: engine.Result) -> dict[tuple[str, str], str]:
    return {(e["involvedObject"]["kind"], e["involvedObject"]["name"]): e["message"]
            for e in sc.events(result, "Unconsolidatable")}


def test_each_non_empty_node_of_a_when_empty_nodepool_gets_an_unconsolidatable_event() -> None:
    result = _run("{consolidationPolicy: WhenEmpty, consolidateAfter: 30s}")
    messages = _messages(result)
    expected = 'NodePool "default" has consolidation policy WhenEmpty, but node is not empty'
    nodes = sc.karpy_nodes(result)
    assert nodes
    for n in nodes:
        assert messages[("Node", n["metadata"]["name"])] == expected
    for c in result.objects["nodeclaims"]:
        assert messages[("NodeClaim", c["metadata"]["name"])] == expected
    assert all(e["type"] == "Normal" for e in sc.events(result, "Unconsolidatable"))


def test_consolidate_after_never_says_consolidation_is_disabled() -> None:
    result = _run("{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: Never}")
    messages = _messages(result)
    for n in sc.karpy_nodes(result):
        assert messages[("Node", n["metadata"]["name"])] == 'NodePool "default" has consolidation disabled'
