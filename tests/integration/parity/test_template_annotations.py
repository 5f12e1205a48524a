"""Issue 12 item 1: a NodePool template's annotations reach the NodeClaim and the Node.

Karpenter's registration assigns the NodeClaim's annotations to the Node, so a template
``karpenter.sh/do-not-disrupt: "true"`` protects every node of the pool from consolidation,
emptiness and drift.
"""

from __future__ import annotations

from karpy.simulator import engine

from . import scenarios as sc

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


def _scale_down_run(template_metadata: str) -> engine.Result:
    pool = sc.nodepool(template_metadata=template_metadata,
                       disruption="{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}")
    return sc.run(sc.docs(pool, sc.deployment("web", 4, cpu="1500m")), until="6m",
                  steps="- at: 3m\n  scale: {kind: Deployment, namespace: default, name: web, replicas: 0}")


def test_a_template_do_not_disrupt_annotation_keeps_emptied_nodes() -> None:
    result = _scale_down_run(f'annotations: {{{DO_NOT_DISRUPT}: "true", example.com/team: payments}}')
    nodes = sc.karpy_nodes(result)
    assert nodes, "the deployment should have launched nodes"
    for n in nodes:
        assert n["metadata"]["annotations"][DO_NOT_DISRUPT] == "true"
        assert n["metadata"]["annotations"]["example.com/team"] == "payments"
    for claim in result.objects["nodeclaims"]:
        assert claim["metadata"]["annotations"][DO_NOT_DISRUPT] == "true"
    assert sc.terminated(result) == 0
    assert not sc.events(result, "DisruptionTerminating")


def test_without_the_annotation_the_same_emptied_nodes_are_removed() -> None:
    result = _scale_down_run("")
    assert sc.launched(result) > 0
    assert sc.terminated(result) == sc.launched(result)


def test_a_template_do_not_disrupt_annotation_keeps_drifted_nodes() -> None:
    annotations = f'annotations: {{{DO_NOT_DISRUPT}: "true"}}'
    pool = sc.nodepool(template_metadata=annotations)
    changed = sc.nodepool(template_metadata=annotations + ", labels: {team: b}")
    apply = "- at: 3m\n  apply:\n" + "".join(
        "  " + ("- " if i == 0 else "  ") + line + "\n" for i, line in enumerate(
            sc.docs(changed).strip("\n").splitlines()))
    sim, result = sc.simulate(sc.docs(pool, sc.deployment("web", 2, cpu="1500m")), until="8m", steps=apply)
    drifted = [c for c in sim.cluster.list("NodeClaim")
               if any(x["type"] == "Drifted" and x["status"] == "True" for x in c["status"].get("conditions", []))]
    assert drifted, "the template change drifts the nodes"
    assert sc.terminated(result) == 0
    assert all("team" not in n["metadata"]["labels"] for n in sc.karpy_nodes(result))
