"""Issue 21 "Also": the label value a node gets for a NodePool requirement on a key nothing defines.

Karpenter gives a NodeClaim a label for every custom requirement key of its NodePool
(``pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go``,
``resolveCustomLabelsFromRequirements``, with ``Requirement.Any()`` of ``pkg/scheduling/requirement.go``):
for ``NotIn``, ``Exists``, ``Gt`` and ``Lt`` a *random* integer within the bounds the requirement
admits. karpy picks, deterministically (a simulation must replay), the integer closest to zero
within the bounds that the requirement does not exclude: ``0`` (``NotIn [batch]``, ``Exists``,
``Lt 10``), ``Gt 4`` -> ``5``, ``NotIn ["0", "1"]`` -> ``2`` (docs/parity.md). Both satisfy the
requirement, so the node never drifts on it.
"""

from __future__ import annotations

from karpy.scheduling import requirement

from . import scenarios as sc

REQUIREMENTS = """
- {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
- {key: kubernetes.io/arch, operator: In, values: [amd64]}
- {key: karpenter.k8s.aws/instance-category, operator: In, values: [m]}
- {key: example.com/tier, operator: NotIn, values: [batch]}
- {key: example.com/team, operator: Exists}
- {key: example.com/generation, operator: Gt, values: ["4"]}
- {key: example.com/slots, operator: Lt, values: ["10"]}
- {key: example.com/shard, operator: NotIn, values: ["0", "1"]}
"""


def test_a_node_gets_the_integer_closest_to_zero_that_each_requirement_admits() -> None:
    result = sc.run(sc.docs(sc.nodepool(requirements=REQUIREMENTS), sc.deployment("web", 1)), until="3m")
    (node,) = sc.karpy_nodes(result)
    labels = node["metadata"]["labels"]
    assert {k: labels[k] for k in labels if k.startswith("example.com/")} == {
        "example.com/tier": "0", "example.com/team": "0", "example.com/generation": "5",
        "example.com/slots": "0", "example.com/shard": "2"}


def test_the_value_is_within_karpenters_bounds() -> None:
    # Karpenter: rand in [gte, lte] with Gt n -> gte n+1 and Lt n -> lte n-1
    r = requirement.Requirement.new("example.com/x", "Gt", ["7"])
    assert r.any() == "8"
    assert requirement.Requirement.new("example.com/x", "Lt", ["-3"]).any() == "-4"
