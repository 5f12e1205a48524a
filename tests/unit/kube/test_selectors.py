"""Label and field selector parsing and matching (pure, no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.kube import errors, selectors


def _labels(text: str, labels: dict[str, str]) -> bool:
    return selectors.parse_label_selector(text).matches(labels)


def test_equality_and_inequality_label_requirements() -> None:
    assert _labels("app=web", {"app": "web"})
    assert _labels("app==web", {"app": "web"})
    assert not _labels("app=web", {"app": "db"})
    assert _labels("app!=web", {"app": "db"})
    assert _labels("app!=web", {})  # a missing label is not equal
    assert not _labels("app=web", {})


def test_set_based_label_requirements() -> None:
    assert _labels("env in (prod, staging)", {"env": "staging"})
    assert not _labels("env in (prod,staging)", {"env": "dev"})
    assert _labels("env notin (prod)", {"env": "dev"})
    assert _labels("env notin (prod)", {})
    assert _labels("gpu", {"gpu": ""})
    assert not _labels("gpu", {})
    assert _labels("!spot", {})
    assert not _labels("!spot", {"spot": "true"})


def test_numeric_comparisons_need_an_integer_label() -> None:
    assert _labels("priority>3", {"priority": "4"})
    assert not _labels("priority>3", {"priority": "3"})
    assert _labels("priority<3", {"priority": "-1"})
    assert not _labels("priority<3", {"priority": "low"})
    assert not _labels("priority<3", {})


def test_every_requirement_must_match_and_commas_inside_parentheses_do_not_split() -> None:
    text = "app=web, env in (prod,staging), !canary"
    query = selectors.parse_label_selector(text)
    assert len(query.requirements) == 3
    assert query.matches({"app": "web", "env": "prod"})
    assert not query.matches({"app": "web", "env": "prod", "canary": "1"})


def test_an_empty_label_selector_matches_everything() -> None:
    assert selectors.parse_label_selector("").matches({"any": "thing"})
    assert selectors.label_query("") is None
    assert selectors.label_query({}) is None


@pytest.mark.parametrize(
    "text", ["app in (", "app=(x)", "env in ()", "=x", "a b", "priority>high", "app=bad value"]
)
def test_malformed_label_selectors_are_bad_requests(text: str) -> None:
    with pytest.raises(errors.BadRequest):
        selectors.parse_label_selector(text)


def test_a_mapping_is_an_equality_selector() -> None:
    query = selectors.label_query({"app": "web", "tier": "front"})
    assert query is not None
    assert query.matches({"app": "web", "tier": "front", "x": "y"})
    assert not query.matches({"app": "web"})


def test_metav1_label_selector_semantics() -> None:
    selector: dict[str, Any] = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a", "b"]},
            {"key": "spot", "operator": "DoesNotExist"},
        ],
    }
    assert selectors.matches_label_selector(selector, {"app": "web", "zone": "a"})
    assert not selectors.matches_label_selector(selector, {"app": "web", "zone": "c"})
    assert not selectors.matches_label_selector(None, {"app": "web"})
    assert selectors.matches_label_selector({}, {"app": "web"})
    text = selectors.label_selector_to_string(selector)
    assert selectors.parse_label_selector(text) == selectors.from_label_selector(selector)
    with pytest.raises(errors.Invalid):
        selectors.from_label_selector({"matchExpressions": [{"key": "a", "operator": "Near"}]})


def _fields(text: str, obj: dict[str, Any], kind: str = "Pod") -> bool:
    return selectors.parse_field_selector(text).matches(obj, kind)


POD: dict[str, Any] = {
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {"nodeName": "n1"},
    "status": {"phase": "Running"},
}


def test_field_selectors_with_each_operator() -> None:
    assert _fields("spec.nodeName=n1", POD)
    assert _fields("spec.nodeName==n1", POD)
    assert _fields("spec.nodeName!=n2", POD)
    assert not _fields("spec.nodeName!=n1", POD)
    assert _fields("metadata.name=p,status.phase=Running", POD)
    assert not _fields("metadata.name=p,status.phase=Pending", POD)


def test_a_missing_field_reads_as_empty_and_booleans_read_true_or_false() -> None:
    unbound: dict[str, Any] = {"kind": "Pod", "metadata": {"name": "q"}, "spec": {}}
    assert _fields("spec.nodeName=", unbound)
    assert not _fields("spec.nodeName=", POD)
    node: dict[str, Any] = {"kind": "Node", "metadata": {"name": "n"}, "spec": {}}
    assert _fields("spec.unschedulable=false", node, "Node")
    node["spec"]["unschedulable"] = True
    assert _fields("spec.unschedulable=true", node, "Node")


def test_escaped_characters_in_field_selector_values() -> None:
    query = selectors.parse_field_selector(r"metadata.name=a\,b\=c\\d,status.phase=x!y")
    assert [(r.field, r.value) for r in query.requirements] == [
        ("metadata.name", "a,b=c\\d"),
        ("status.phase", "x!y"),
    ]


@pytest.mark.parametrize("text", ["spec.nodeName", "=x", r"metadata.name=a\q", "metadata.name=a=b"])
def test_malformed_field_selectors_are_bad_requests(text: str) -> None:
    with pytest.raises(errors.BadRequest):
        selectors.parse_field_selector(text)


def test_only_supported_fields_may_be_selected() -> None:
    selectors.parse_field_selector("spec.nodeName=n1").check("Pod")
    with pytest.raises(errors.BadRequest):
        selectors.parse_field_selector("spec.nodeName=n1").check("Deployment")
    selectors.parse_field_selector("involvedObject.uid=u,source=karpenter").check("Event")
    assert "spec.providerID" not in selectors.supported_fields("Node")  # no real API server accepts it


def test_the_event_source_field_reads_the_source_component() -> None:
    event = {"kind": "Event", "metadata": {"name": "e"}, "source": {"component": "karpenter"}}
    assert _fields("source=karpenter", event, "Event")
    assert selectors.parse_field_selector("source=karpenter").equals("source") == "karpenter"


@pytest.mark.parametrize(("kind", "field"), [
    ("Node", "spec.providerID"),
    ("Node", "metadata.namespace"),
    ("NodeClaim", "status.providerID"),
    ("NodeClaim", "status.nodeName"),
    ("NodePool", "spec.template.spec.nodeClassRef.name"),
    ("Pod", "spec.containers"),
    ("Namespace", "metadata.namespace"),
    ("Widget", "spec.size"),
])
def test_a_field_selector_a_real_api_server_rejects_is_refused_naming_the_field_and_kind(
        kind: str, field: str) -> None:
    query = selectors.parse_field_selector(f"{field}=x")
    with pytest.raises(errors.BadRequest) as raised:
        query.check(kind)
    assert f'"{field}" for {kind}' in raised.value.message
    assert "supported: metadata.name" in raised.value.message


@pytest.mark.parametrize(("kind", "field"), [
    ("Pod", "spec.nodeName"), ("Pod", "status.phase"), ("Pod", "status.podIPs"), ("Pod", "spec.schedulerName"),
    ("Pod", "metadata.namespace"), ("Node", "metadata.name"), ("Node", "spec.unschedulable"),
    ("Event", "involvedObject.uid"), ("NodeClaim", "metadata.name"), ("Widget", "metadata.namespace"),
])
def test_the_field_selectors_a_real_api_server_accepts_are_accepted(kind: str, field: str) -> None:
    selectors.parse_field_selector(f"{field}=x").check(kind)
