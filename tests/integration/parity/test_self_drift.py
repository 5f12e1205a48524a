"""Issue 12 item 3: nodes karpy launched are never drifted by karpy itself.

Karpenter gives a NodeClaim a concrete label for every custom requirement key of its NodePool
(``In``: a listed value; ``NotIn``, ``Exists``, ``Gt``, ``Lt``: a number within the bounds that
the requirement admits), so the node satisfies the requirements it was launched under and
"RequirementsDrifted" never fires for a NodePool nobody touched.
"""

from __future__ import annotations

from karpy.api import nodepool as nodepool_mod
from karpy.disruption import drift
from karpy.scheduling import requirements as reqs_mod
from karpy.simulator import engine

from . import scenarios as sc

REQUIREMENTS = """
- {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
- {key: kubernetes.io/arch, operator: In, values: [amd64]}
- {key: karpenter.k8s.aws/instance-category, operator: In, values: [m]}
- {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
- {key: karpenter.k8s.aws/instance-size, operator: NotIn, values: [metal, 24xlarge]}
- {key: example.com/tier, operator: NotIn, values: [batch]}
- {key: example.com/generation, operator: Gt, values: ["4"]}
- {key: example.com/slots, operator: Lt, values: ["10"]}
- {key: example.com/team, operator: Exists}
- {key: example.com/legacy, operator: DoesNotExist}
"""


def _run() -> engine.Result:
    pool = sc.nodepool(requirements=REQUIREMENTS,
                       disruption="{consolidationPolicy: WhenEmpty, consolidateAfter: 1h}")
    return sc.run(sc.docs(pool, sc.deployment("web", 3, cpu="1500m")), until="8m")


def test_nodes_of_a_nodepool_with_notin_gt_lt_and_exists_are_never_replaced() -> None:
    result = _run()
    assert sc.launched(result) >= 1
    assert sc.terminated(result) == 0
    assert not sc.events(result, "DisruptionLaunching")
    assert not sc.events(result, "DisruptionTerminating")
    assert all(p["status"]["phase"] == "Running" for p in sc.pods(result, "web-"))


def test_their_nodes_carry_a_label_for_every_custom_requirement_key_as_karpenter_does() -> None:
    result = _run()
    pool_obj = next(p for p in result.objects["nodepools"] if p["metadata"]["name"] == "default")
    pool = nodepool_mod.NodePool.from_manifest(pool_obj)
    wanted = reqs_mod.Requirements.from_node_selector_requirements(pool.template.spec.requirements)
    for n in sc.karpy_nodes(result):
        labels = n["metadata"]["labels"]
        assert labels["example.com/team"].isdigit()
        assert int(labels["example.com/generation"]) > 4
        assert 0 <= int(labels["example.com/slots"]) < 10
        assert labels["example.com/tier"] != "batch"
        assert "example.com/legacy" not in labels
        assert int(labels["karpenter.k8s.aws/instance-generation"]) > 4
        have = reqs_mod.Requirements.from_labels(labels)
        assert have.compatible(wanted, frozenset()) is None
        assert drift.requirements_drift(pool, labels) is None
    for claim in result.objects["nodeclaims"]:
        assert "example.com/team" in claim["metadata"]["labels"]
