"""Requirements drift (issue 12 item 3): a node is never drifted for requirements it was launched
under, and the labels karpy gives new NodeClaims satisfy them as Karpenter's do."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.api import nodeclaim, nodepool
from karpy.disruption import drift
from karpy.provisioning import nodelabels
from karpy.scheduling import requirement
from karpy.scheduling import requirements as reqs_mod

REQS: list[dict[str, Any]] = [
    {"key": "example.com/team", "operator": "Exists"},
    {"key": "example.com/generation", "operator": "Gt", "values": ["4"]},
    {"key": "example.com/slots", "operator": "Lt", "values": ["3"]},
    {"key": "example.com/tier", "operator": "NotIn", "values": ["0", "1", "batch"]},
    {"key": "example.com/legacy", "operator": "DoesNotExist"},
    {"key": "example.com/flavour", "operator": "In", "values": ["vanilla", "mint"]},
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    {"key": "kubernetes.io/hostname", "operator": "Exists"},
]


def _pool(reqs: list[dict[str, Any]]) -> nodepool.NodePool:
    return nodepool.NodePool.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "requirements": [r for r in reqs if r["key"] != "kubernetes.io/hostname"],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}})


def _claim(reqs: list[dict[str, Any]], labels: dict[str, str]) -> nodeclaim.NodeClaim:
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default", **labels}},
        "spec": {"requirements": [r for r in reqs if r["key"] != "kubernetes.io/hostname"],
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}})


def test_custom_labels_resolve_every_custom_key_to_a_value_its_requirement_admits() -> None:
    reqs = reqs_mod.Requirements.of(*(requirement.Requirement.new(r["key"], r["operator"], r.get("values", ()))
                                      for r in REQS))
    labels = nodelabels.custom_labels(reqs)
    assert labels == {"example.com/team": "0", "example.com/generation": "5", "example.com/slots": "0",
                      "example.com/tier": "2", "example.com/flavour": "mint"}
    for key, value in labels.items():
        assert reqs[key].has(value)


def test_a_claim_launched_under_unchanged_requirements_is_not_drifted_even_without_labels() -> None:
    pool = _pool(REQS)
    claim = _claim(REQS, {})
    assert drift.requirements_drift(pool, dict(claim.labels)) == drift.REQUIREMENTS_DRIFTED
    assert drift.launched_under(claim, pool)
    assert drift.drift_reason(claim, pool) is None


def test_a_claim_is_drifted_once_a_requirement_no_longer_admits_its_labels() -> None:
    claim = _claim(REQS, nodelabels.custom_labels(
        reqs_mod.Requirements.from_node_selector_requirements(_pool(REQS).template.spec.requirements)))
    assert drift.drift_reason(claim, _pool(REQS)) is None
    narrowed = [r if r["key"] != "example.com/generation" else {**r, "values": ["6"]} for r in REQS]
    assert not drift.launched_under(claim, _pool(narrowed))
    assert drift.drift_reason(claim, _pool(narrowed)) == drift.REQUIREMENTS_DRIFTED


def test_keys_the_instance_types_label_are_left_to_the_cloud() -> None:
    reqs = reqs_mod.Requirements.of(
        requirement.Requirement.new("example.com/rack", "In", ["r1", "r2"]),
        requirement.Requirement.new("topology.k8s.aws/zone-id", "In", ["use1-az1", "use1-az2"]),
        requirement.Requirement.new("example.com/team", "Exists"))
    assert nodelabels.custom_labels(reqs, provided={"example.com/rack"}) == {"example.com/team": "0"}


def test_a_nodepool_s_hash_and_requirements_are_read_once_per_nodepool_object() -> None:
    pool = _pool(REQS)
    view = drift.pool_view(pool)
    assert drift.pool_view(pool) is view and view.hash == pool.hash()
    assert view.requirements == reqs_mod.Requirements.from_node_selector_requirements(pool.template.spec.requirements)
    changed = _pool([r for r in REQS if r["key"] != "example.com/legacy"])  # a new version is a new object
    assert drift.pool_view(changed).requirements != view.requirements


def test_labels_the_nodepool_does_not_constrain_do_not_change_the_requirements_verdict() -> None:
    labels = nodelabels.custom_labels(
        reqs_mod.Requirements.from_node_selector_requirements(_pool(REQS).template.spec.requirements))
    labels["kubernetes.io/arch"] = "amd64"
    noisy = {**labels, "example.com/unrelated": "x", "failure-domain.beta.kubernetes.io/zone": "z1",
             "node.kubernetes.io/instance-type": "m5.large"}
    assert drift.requirements_drift(_pool(REQS), labels) is None
    assert drift.requirements_drift(_pool(REQS), noisy) is None
    wrong_arch = {**noisy, "kubernetes.io/arch": "arm64"}
    assert drift.requirements_drift(_pool(REQS), wrong_arch) == drift.REQUIREMENTS_DRIFTED
    legacy = {**noisy, "example.com/legacy": "yes"}  # DoesNotExist no longer holds
    assert drift.requirements_drift(_pool(REQS), legacy) == drift.REQUIREMENTS_DRIFTED


def _plain_requirements_drift(pool: nodepool.NodePool, node_labels: dict[str, str]) -> str | None:
    view = drift.pool_view(pool)
    assert view.requirements is not None
    have = reqs_mod.Requirements.from_labels({k: node_labels[k] for k in view.label_keys if k in node_labels})
    return drift.REQUIREMENTS_DRIFTED if have.compatible(view.requirements, frozenset()) is not None else None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({}, optional={
    "example.com/team": st.sampled_from(["a", "b"]),
    "example.com/generation": st.sampled_from(["3", "4", "5", "x"]),
    "example.com/slots": st.sampled_from(["1", "2", "3"]),
    "example.com/tier": st.sampled_from(["0", "2", "batch"]),
    "example.com/legacy": st.just("yes"),
    "example.com/flavour": st.sampled_from(["vanilla", "mint", "lemon"]),
    "kubernetes.io/arch": st.sampled_from(["amd64", "arm64"]),
    "other.io/label": st.sampled_from(["p", "q"])}), max_size=12))
def test_remembered_requirements_answers_are_what_a_fresh_comparison_gives(labels: list[dict[str, str]]) -> None:
    pool = _pool(REQS)
    for node_labels in labels + labels:  # the second round is answered from what was remembered
        assert drift.requirements_drift(pool, node_labels) == _plain_requirements_drift(pool, node_labels)
