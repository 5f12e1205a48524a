"""Issue 23 item 3: NodeOverlay in ``karpy simulate`` (feature gate NodeOverlay).

Expectations from Karpenter v1.14's NodeOverlays docs page ("price adjustments ... influence Karpenter's
instance type selection"; "Integration with Consolidation": price adjustments change the cost calculations
of replacements and take effect at the next consolidation evaluation, "potentially triggering node
replacements"; "Status and Observability": ``ValidationSucceeded=False`` reason ``Conflict``), its
``nodeoverlay`` controller tests (``suite_test.go``) and the AWS provider's prioritized launch with
``karpenter.sh/price-overlay-applied``. The NodePool may launch c5.large ($0.085/h), m5.large and m6i.large
($0.096/h) on demand in us-east-1.
"""

from __future__ import annotations

from typing import Any

from karpy.simulator import engine

from . import scenarios as sc

GATE = "featureGates: NodeOverlay=true"
POOL = sc.nodepool(requirements="""
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, m5.large, m6i.large]}
""", disruption="{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}")
PREFER_M6I = """
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: prefer-m6i}
spec:
  weight: 10
  requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [m6i]}]
  priceAdjustment: "-20%"
"""
API = sc.deployment("api", 3, cpu="1200m", memory="1Gi")


def _types(result: engine.Result) -> set[str]:
    return {n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in sc.karpy_nodes(result)}


def _overlay_conditions(sim: engine.Simulation, name: str) -> dict[str, dict[str, Any]]:
    obj = sim.cluster.get("NodeOverlay", name)
    return {c["type"]: c for c in obj["status"]["conditions"]}


def test_without_an_overlay_the_cheapest_list_price_is_launched() -> None:
    result = sc.run(sc.docs(POOL, API), until="3m", settings=GATE)
    assert _types(result) == {"c5.large"} and len(sc.running(result, "api")) == 3


def test_a_price_adjustment_makes_karpy_launch_the_type_it_makes_cheapest() -> None:
    sim, result = sc.simulate(sc.docs(POOL, PREFER_M6I, API), until="3m", settings=GATE)
    assert _types(result) == {"m6i.large"} and len(sc.running(result, "api")) == 3
    claims = result.objects["nodeclaims"]
    assert claims and all(c["metadata"]["annotations"].get("karpenter.sh/price-overlay-applied") == "true"
                          for c in claims)
    ready = _overlay_conditions(sim, "prefer-m6i")
    assert ready["ValidationSucceeded"]["status"] == "True" and ready["Ready"]["status"] == "True"


def test_with_the_gate_off_an_overlay_has_no_effect_and_the_scenario_says_so() -> None:
    from karpy.simulator import scenario

    loaded = scenario.load_text(sc.text(sc.docs(POOL, PREFER_M6I, API)), source="overlay.yaml")
    assert any(w.startswith("NodeOverlay prefer-m6i: the NodeOverlay feature gate is off") for w in loaded.warnings)
    result = sc.run(sc.docs(POOL, PREFER_M6I, API), until="3m")
    assert _types(result) == {"c5.large"}


def test_an_overlay_applied_later_makes_consolidation_replace_nodes_it_made_dearer() -> None:
    """The c5.large nodes launched first become dearer than m6i.large under the overlay (+100 %): consolidation
    replaces them (the saving is computed at the overlaid prices), with no drift involved."""
    dearer = """
      - at: 2m
        apply:
        - apiVersion: karpenter.sh/v1alpha1
          kind: NodeOverlay
          metadata: {name: c5-is-dear}
          spec:
            requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [c5]}]
            priceAdjustment: "+100%"
    """
    before = sc.run(sc.docs(POOL, API), until="8m", settings=GATE)
    after = sc.run(sc.docs(POOL, API), until="8m", settings=GATE, steps=dearer)
    assert _types(before) == {"c5.large"} and sc.terminated(before) == 0
    assert _types(after) <= {"m5.large", "m6i.large"} and sc.terminated(after) >= 1
    assert len(sc.running(after, "api")) == 3
    terminating = {e["message"] for e in sc.events(after, "DisruptionTerminating")}
    assert terminating == {"Disrupting Node: Consolidation/Replace"}
    decisions = after.metrics["karpenter"]["karpenter_voluntary_disruption_decisions_total"]
    assert {(d["labels"]["decision"], d["labels"]["reason"]) for d in decisions} == {("replace", "underutilized")}


def test_a_capacity_overlay_lets_pods_requesting_an_extended_resource_run_on_the_selected_types_only() -> None:
    fuse = """
    apiVersion: karpenter.sh/v1alpha1
    kind: NodeOverlay
    metadata: {name: fuse}
    spec:
      requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}]
      capacity: {smarter-devices/fuse: 4}
    """
    builder = sc.deployment("builder", 2, cpu="500m", pod_spec="").replace(
        "requests: {cpu: 500m, memory: 512Mi}", "requests: {cpu: 500m, memory: 512Mi, smarter-devices/fuse: 1}")
    result = sc.run(sc.docs(POOL, fuse, builder), until="3m", settings=GATE)
    assert _types(result) == {"m5.large"} and len(sc.running(result, "builder")) == 2
    (node, *_) = sc.karpy_nodes(result)
    assert node["status"]["allocatable"]["smarter-devices/fuse"] == "4"
    without = sc.run(sc.docs(POOL, builder), until="3m", settings=GATE)
    assert sc.karpy_nodes(without) == [] and len(sc.pending(without, "builder")) == 2


def test_equal_weights_on_the_same_price_conflict_and_the_status_says_so() -> None:
    rival = PREFER_M6I.replace("prefer-m6i", "prefer-m5").replace(
        "{key: karpenter.k8s.aws/instance-family, operator: In, values: [m6i]}",
        "{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m6i.large]}").replace(
        '"-20%"', '"-0.05"')
    sim, result = sc.simulate(sc.docs(POOL, PREFER_M6I, rival, API), until="2m", settings=GATE)
    conflict = _overlay_conditions(sim, "prefer-m5")
    assert (conflict["ValidationSucceeded"]["status"], conflict["ValidationSucceeded"]["reason"],
            conflict["ValidationSucceeded"]["message"]) == ("False", "Conflict", "conflict with another overlay")
    assert (conflict["Ready"]["status"], conflict["Ready"]["reason"]) == ("False", "UnhealthyDependents")
    assert _overlay_conditions(sim, "prefer-m6i")["ValidationSucceeded"]["status"] == "True"
    assert _types(result) == {"m6i.large"}  # prefer-m6i applies; prefer-m5 (-0.05 on m5) does not
