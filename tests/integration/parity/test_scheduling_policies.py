"""Issue 21 section 3: the PREFERENCE_POLICY and MIN_VALUES_POLICY settings change what karpy launches.

Expectations from Karpenter v1.14.3's ``pkg/controllers/provisioning/suite_test.go``: "Ignore
Preferences / should ignore node affinity preferences" (with ``PreferencePolicyIgnore`` a preferred
node affinity does not steer the NodeClaim) and "with MinValuesPolicy set to BestEffort / should
schedule even when minValues requirement is not met" (Strict leaves the pod pending; BestEffort
launches, and the NodeClaim carries ``karpenter.sh/nodeclaim-min-values-relaxed: "true"``).
"""

from __future__ import annotations

from karpy.simulator import engine

from . import scenarios as sc

PREFER_BIG = """
affinity:
  nodeAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      preference:
        matchExpressions: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.4xlarge]}]
"""


def _types(result: engine.Result) -> list[str]:
    return sorted(n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in sc.karpy_nodes(result))


def test_a_preferred_node_affinity_is_honoured_by_default_and_ignored_with_preference_policy_ignore() -> None:
    documents = sc.docs(sc.nodepool(), sc.deployment("web", 1, pod_spec=PREFER_BIG))
    respect = sc.run(documents, until="3m")
    ignore = sc.run(documents, until="3m", settings="preferencePolicy: Ignore")
    assert _types(respect) == ["m5.4xlarge"]
    assert len(_types(ignore)) == 1 and _types(ignore) != ["m5.4xlarge"]  # the cheapest type that fits
    assert len(sc.running(ignore, "web")) == 1


MIN_VALUES = """
- {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
- {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
- {key: node.kubernetes.io/instance-type, operator: Exists, minValues: 20}
"""


def test_unsatisfiable_min_values_leave_pods_pending_unless_min_values_policy_is_best_effort() -> None:
    documents = sc.docs(sc.nodepool(requirements=MIN_VALUES), sc.deployment("web", 2))
    strict = sc.run(documents, until="3m")
    best = sc.run(documents, until="3m", settings="minValuesPolicy: BestEffort")
    assert sc.karpy_nodes(strict) == [] and len(sc.pending(strict, "web")) == 2
    assert len(sc.running(best, "web")) == 2
    claims = best.objects["nodeclaims"]
    assert claims and all(c["metadata"]["annotations"].get("karpenter.sh/nodeclaim-min-values-relaxed") == "true"
                          for c in claims)
    created = best.metrics["karpenter"]["karpenter_nodeclaims_created_total"]
    assert {r["labels"]["min_values_relaxed"] for r in created} == {"true"}


def test_a_scenario_using_settings_and_fields_karpy_does_not_implement_says_so_on_load() -> None:
    from karpy.simulator import scenario

    pool = sc.nodepool(extra_spec="replicas: 2")
    settings = "enableProfiling: true, featureGates: NodeOverlay=true"
    loaded = scenario.load_text(sc.text(sc.docs(pool), settings=settings), source="parity.yaml")
    unimplemented = [w for w in loaded.warnings if "karpy does not implement this yet" in w]
    assert any("spec.settings: setting enableProfiling (ENABLE_PROFILING) = True" in w for w in unimplemented)
    assert not any("NodeOverlay" in w for w in unimplemented)  # implemented (karpy.cloudprovider.overlay)
    assert not any("spec.replicas" in w for w in unimplemented)  # static NodePools are implemented
