"""Issue 12 item 8: a node that still carries only its startup taints counts as room.

Karpenter (``StateNode.Taints``) uses the NodeClaim's taints for a node it launched that is not
initialized yet, leaving out its startup taints: pods that arrive before the taint is removed are
expected to fit there once it goes, so no second NodeClaim is launched for them.
"""

from __future__ import annotations

from karpy.simulator import engine

from . import scenarios as sc


def _run(scale_at: str, *, startup: bool = True) -> engine.Result:
    pool = sc.nodepool()
    if startup:
        pool = pool.replace("      requirements:\n",
                            "      startupTaints:\n"
                            "      - {key: example.com/agent-not-ready, effect: NoSchedule}\n"
                            "      requirements:\n")
        assert "startupTaints" in pool
    return sc.run(sc.docs(pool, sc.deployment("web", 1, cpu="100m", memory="128Mi")), until="4m",
                  steps=f"- at: {scale_at}\n  scale: {{kind: Deployment, namespace: default, name: web, replicas: 2}}")


def test_pods_arriving_while_the_claim_launches_wait_for_it_instead_of_a_second_claim() -> None:
    result = _run("20s")
    assert sc.launched(result) == 1
    assert len(sc.running(result, "web-")) == 2
    assert len({p["spec"]["nodeName"] for p in sc.running(result, "web-")}) == 1


def test_the_nodepools_startup_taints_reach_the_node_and_are_removed_before_pods_run() -> None:
    result = _run("20s")
    (node,) = sc.karpy_nodes(result)
    assert "example.com/agent-not-ready" not in {t["key"] for t in node["spec"].get("taints") or ()}
    (claim,) = result.objects["nodeclaims"]
    assert [t["key"] for t in claim["spec"]["startupTaints"]] == ["example.com/agent-not-ready"]


def test_a_single_pod_waiting_for_its_nodes_startup_taint_gets_no_second_claim() -> None:
    """The pod's own node registers with the startup taint; until the taint goes the pod stays
    unschedulable, and that node must count as its room."""
    pool = sc.nodepool().replace("      requirements:\n",
                                 "      startupTaints:\n"
                                 "      - {key: example.com/agent-not-ready, effect: NoSchedule}\n"
                                 "      requirements:\n")
    result = sc.run(sc.docs(pool, sc.deployment("web", 1, cpu="100m", memory="128Mi")), until="3m")
    assert sc.launched(result) == 1
    assert len(sc.running(result, "web-")) == 1
