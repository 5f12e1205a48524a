"""Label selectors, node selector requirements and kubectl selector strings."""

from __future__ import annotations

import pytest

from karpy.api import errors, fields, selectors


def selector(d: dict[str, object]) -> selectors.LabelSelector:
    return selectors.LabelSelector.parse(fields.Fields(d, "test"))


def test_an_empty_selector_matches_every_object() -> None:
    assert selector({}).matches({})
    assert selector({}).matches({"app": "web"})


def test_match_labels_and_expressions_must_all_hold() -> None:
    s = selector(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "team", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist"},
            ],
        }
    )
    good = {"app": "web", "tier": "front", "env": "prod", "team": "a"}
    assert s.matches(good)
    assert not s.matches({**good, "app": "db"})
    assert not s.matches({**good, "tier": "back"})
    assert not s.matches({**good, "env": "dev"})
    assert not s.matches({k: v for k, v in good.items() if k != "team"})
    assert not s.matches({**good, "legacy": "yes"})


def test_not_in_matches_objects_without_the_key_but_in_does_not() -> None:
    not_in = selectors.LabelSelectorRequirement("env", "NotIn", ("dev",))
    in_ = selectors.LabelSelectorRequirement("env", "In", ("dev",))
    assert not_in.matches({})
    assert not in_.matches({})


def test_equal_selectors_hash_alike_so_pods_can_be_grouped_by_selector() -> None:
    a = selector({"matchLabels": {"a": "1", "b": "2"}})
    b = selector({"matchLabels": {"b": "2", "a": "1"}})
    assert a == b
    assert len({a, b, selector({"matchLabels": {"a": "1"}})}) == 2


def test_an_absent_selector_is_none_and_an_empty_one_is_not() -> None:
    f = fields.Fields({"empty": {}}, "test")
    assert selectors.parse_optional(f, "missing") is None
    empty = selectors.parse_optional(f, "empty")
    assert empty is not None and empty.is_empty


def test_a_label_selector_operator_outside_the_four_is_rejected_with_its_path() -> None:
    with pytest.raises(errors.ValidationError) as info:
        selector({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
    assert info.value.errors[0].path == "matchExpressions[0].operator"
    assert info.value.errors[0].found == "Gt"


def test_a_node_selector_requirement_reads_numbers_as_strings_and_min_values() -> None:
    f = fields.Fields(
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": [4], "minValues": 2},
        "NodePool default",
        "spec.template.spec.requirements[0]",
    )
    req = selectors.NodeSelectorRequirement.parse(f)
    assert req == selectors.NodeSelectorRequirement("karpenter.k8s.aws/instance-cpu", "Gte", ("4",), 2)
    assert req.to_dict() == {
        "key": "karpenter.k8s.aws/instance-cpu",
        "operator": "Gte",
        "values": ["4"],
        "minValues": 2,
    }


def test_an_unknown_node_selector_operator_names_the_object_and_path() -> None:
    f = fields.Fields({"key": "a", "operator": "Like"}, "NodePool default", "spec.requirements[3]")
    with pytest.raises(errors.ValidationError) as info:
        selectors.NodeSelectorRequirement.parse(f)
    err = info.value.errors[0]
    assert (err.obj, err.path, err.found) == ("NodePool default", "spec.requirements[3].operator", "Like")


def test_a_node_selector_term_round_trips_through_its_dict() -> None:
    d = {
        "matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}],
        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}],
    }
    term = selectors.NodeSelectorTerm.parse(fields.Fields(d, "test"))
    assert term.to_dict() == d
    assert len(term.match_fields) == 1


def test_a_kubectl_selector_string_parses_every_term_kind() -> None:
    s = selectors.parse_selector_string("app=web,tier!=db,env in (a, b),zone notin (z1),!legacy,gpu")
    assert s.match_labels == {"app": "web"}
    assert s.match_expressions == (
        selectors.LabelSelectorRequirement("tier", "NotIn", ("db",)),
        selectors.LabelSelectorRequirement("env", "In", ("a", "b")),
        selectors.LabelSelectorRequirement("zone", "NotIn", ("z1",)),
        selectors.LabelSelectorRequirement("legacy", "DoesNotExist"),
        selectors.LabelSelectorRequirement("gpu", "Exists"),
    )
    assert s.matches({"app": "web", "env": "b", "gpu": "1"})
    assert not s.matches({"app": "web", "env": "c", "gpu": "1"})


def test_a_double_equals_term_is_an_equality() -> None:
    assert selectors.parse_selector_string("app==web").match_labels == {"app": "web"}


def test_an_empty_selector_string_matches_everything() -> None:
    assert selectors.parse_selector_string("  ").matches({"any": "thing"})


def test_a_selector_prints_back_in_kubectl_syntax() -> None:
    text = "app=web,env in (a,b),!legacy"
    assert selectors.parse_selector_string(str(selectors.parse_selector_string(text))) == (
        selectors.parse_selector_string(text)
    )


@pytest.mark.parametrize("bad", ["app=(x)", "a b", "env in a,b", "=x"])
def test_a_malformed_selector_string_is_rejected_naming_the_term(bad: str) -> None:
    with pytest.raises(errors.ValidationError) as info:
        selectors.parse_selector_string(bad)
    assert info.value.errors[0].obj == f"label selector {bad!r}"
