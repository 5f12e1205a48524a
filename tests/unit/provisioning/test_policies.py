"""PREFERENCE_POLICY and MIN_VALUES_POLICY helpers (karpy.provisioning.policies)."""

from __future__ import annotations

from karpy.api import labels as wk
from karpy.provisioning import policies

from . import builders as pb

PREFERRED = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": wk.ARCH, "operator": "In", "values": ["amd64"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": ["a"]}]}}]},
    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"a": "b"}}}}]},
}
SPREADS = [{"maxSkew": 1, "topologyKey": wk.ZONE, "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"a": "b"}}},
           {"maxSkew": 1, "topologyKey": wk.HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"a": "b"}}}]


def test_ignoring_preferences_keeps_every_requirement_and_drops_every_preference() -> None:
    p = pb.make_pod("web", affinity=PREFERRED, topologySpreadConstraints=SPREADS)
    q = policies.without_preferences(p)
    assert q.key == p.key and q.requests == p.requests
    assert q.node_affinity is not None and q.node_affinity.required == p.node_affinity.required  # type: ignore[union-attr]
    assert q.node_affinity.preferred == ()
    assert q.pod_anti_affinity is not None and q.pod_anti_affinity.preferred == ()
    assert [t.when_unsatisfiable for t in q.topology_spread_constraints] == ["DoNotSchedule"]
    plain = pb.make_pod("plain")
    assert policies.without_preferences(plain) is plain


def test_min_values_are_lowered_to_what_the_types_offer_then_removed() -> None:
    pool = pb.make_nodepool(requirements=[
        {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["a", "b", "c"], "minValues": 3},
        {"key": wk.ARCH, "operator": "Exists", "minValues": 1}])
    types = [pb.make_type("a", cpu=2, memory_gi=4), pb.make_type("b", cpu=4, memory_gi=8),
             pb.make_type("z", cpu=8, memory_gi=16)]
    lowered = policies.lower_min_values(pool, types)
    assert [r.min_values for r in lowered.template.spec.requirements] == [2, 1]
    assert policies.violates_min_values(pool, types[:2]) and not policies.violates_min_values(lowered, types[:2])
    assert all(r.min_values is None for r in policies.relax_min_values(pool).template.spec.requirements)
    assert policies.relax_min_values(lowered) != lowered and policies.has_min_values(pool)
