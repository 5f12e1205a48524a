"""Pods with Dynamic Resource Allocation requirements, as Karpenter v1.14's scheduler treats them.

Expectations from Karpenter's tests: ``pkg/controllers/provisioning/dra_test.go`` "should reject DRA pods
with a DRAError when IgnoreDRARequests is enabled (N1)" and "should handle a mixed batch of DRA and
non-DRA pods (R1)"; ``scheduling/suite_test.go`` "should handle DaemonSet pods with DRA requirements
based on IgnoreDRARequests flag value"; ``pkg/utils/pod.HasDRARequirements`` for what counts.
"""

from __future__ import annotations

from karpy.provisioning import dra, scheduler

from . import builders as b

CLAIM = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]


def test_a_pod_with_resource_claims_is_refused_with_karpenters_dra_reason_and_no_claim_is_made() -> None:
    p = b.make_pod("gpu", resourceClaims=CLAIM)
    res = b.solve([p])
    assert res.errors == {p.key: dra.MESSAGE}
    assert res.new_claims == [] and res.existing == {}
    assert res.relaxed == {}


def test_a_container_consuming_a_claim_counts_as_a_dra_requirement() -> None:
    containers = [{"name": "main", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]
    p = b.make_pod("c", containers=containers)
    assert dra.has_requirements(p)
    assert b.solve([p]).errors == {p.key: dra.MESSAGE}


def test_an_init_container_consuming_a_claim_counts_too() -> None:
    init = [{"name": "init", "resources": {"claims": [{"name": "gpu"}]}}]
    p = b.make_pod("i", initContainers=init)
    assert dra.has_requirements(p)
    assert not dra.has_requirements(b.make_pod("plain"))


def test_a_mixed_batch_places_the_plain_pods_and_refuses_only_the_dra_ones() -> None:
    plain = b.make_pods("web", 3)
    gpu = b.make_pod("gpu", resourceClaims=CLAIM)
    res = b.solve([*plain, gpu])
    assert all(b.node_of(res, p) is not None for p in plain)
    assert set(res.errors) == {gpu.key}
    assert all(gpu not in c.pods for c in res.new_claims)


def test_preferences_of_a_dra_pod_are_never_relaxed() -> None:
    pref = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["nowhere"]}]}}]}}
    p = b.make_pod("gpu", resourceClaims=CLAIM, affinity=pref)
    res = b.solve([p])
    assert res.relaxed == {}
    assert res.errors[p.key] == dra.MESSAGE


def test_a_dra_daemonset_pod_is_left_out_of_the_daemon_overhead_of_new_nodes() -> None:
    daemon = b.daemonset_pod("dra-daemon", cpu="3", resourceClaims=CLAIM)
    app = b.make_pod("app", cpu="1")
    with_dra = b.solve([app], daemonsets=[daemon])
    plain_daemon = b.daemonset_pod("plain-daemon", cpu="3")
    with_plain = b.solve([app], daemonsets=[plain_daemon])
    assert with_dra.new_claims[0].daemon_overhead.get("cpu", 0) == 0
    assert with_plain.new_claims[0].daemon_overhead.get("cpu", 0) == 3000
    assert with_dra.new_claims[0].price < with_plain.new_claims[0].price


def test_the_refusal_can_say_that_karpy_allocates_no_devices() -> None:
    p = b.make_pod("gpu", resourceClaims=CLAIM)
    pool = b.make_nodepool()
    res = scheduler.Scheduler([pool], {pool.name: b.small_catalog()}, dra_explanation=dra.NOT_ALLOCATED).solve([p])
    assert res.errors == {p.key: dra.NOT_ALLOCATED}
    assert dra.is_dra_error(dra.NOT_ALLOCATED) and dra.is_dra_error(dra.MESSAGE)


def test_the_claims_round_trip_through_the_pod_manifest() -> None:
    containers = [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}]
    p = b.make_pod("gpu", resourceClaims=CLAIM, containers=containers)
    spec = p.spec_dict()
    assert spec["resourceClaims"] == CLAIM
    assert spec["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
