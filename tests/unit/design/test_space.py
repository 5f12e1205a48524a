"""The design space: strict validation, every problem named with its field, expected value and what was found."""

from __future__ import annotations

import pathlib

import pytest

from karpy.api import errors
from karpy.design import inputs, nodepools, space
from karpy.kube import interface
from karpy.simulator import scenario
from support import design_workload

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"


def _doc(variables: str, extra: str = "") -> str:
    return ("apiVersion: karpy.io/v1alpha1\nkind: DesignSpace\nmetadata: {name: s}\nspec:\n" + extra +
            "  variables:\n" + variables)


def _errors(text: str) -> list[errors.FieldError]:
    with pytest.raises(errors.ValidationError) as exc:
        space.parse(text, source="space.yaml")
    return list(exc.value.errors)


def test_a_space_lists_its_variables_in_the_documented_order_with_ranges_expanded() -> None:
    sp = space.parse(_doc("    consolidateAfter: [30s, 5m]\n    spotShare: {min: 0, max: 1, step: 0.25}\n"
                          "    instanceFamily: [m5, [c5, m5]]\n    instanceGeneration: {min: 5, max: 7, step: 1}\n"))
    assert [v.name for v in sp.variables] == ["instanceFamily", "instanceGeneration", "spotShare", "consolidateAfter"]
    assert sp.choices() == {"instanceFamily": ["m5", ["c5", "m5"]], "instanceGeneration": [5, 6, 7],
                            "spotShare": [0.0, 0.25, 0.5, 0.75, 1.0], "consolidateAfter": ["30s", "5m"]}
    assert sp.size() == 2 * 3 * 5 * 2
    assert sp.variables[0].labels() == ["m5", "c5,m5"]


def test_an_unknown_variable_is_named_with_the_variables_a_space_may_have() -> None:
    [e] = _errors(_doc("    instanceFamilies: [m5]\n"))
    assert e.obj == "space.yaml: DesignSpace/s"
    assert e.path == "spec.variables.instanceFamilies"
    assert "instanceFamily" in e.expected and "consolidateAfter" in e.expected
    assert e.found == "instanceFamilies"


def test_every_bad_value_is_reported_at_once_with_its_index() -> None:
    found = _errors(_doc("    consolidationPolicy: [WhenEmpty, WhenIdle]\n    consolidateAfter: [30s, soon]\n"
                         "    budgets: ['10%', '150%', -1]\n    capacityType: [spot, preemptible]\n"
                         "    weight: [0]\n"))
    by_path = {e.path: e for e in found}
    assert set(by_path) == {"spec.variables.consolidationPolicy[1]", "spec.variables.consolidateAfter[1]",
                            "spec.variables.budgets[1]", "spec.variables.budgets[2]",
                            "spec.variables.capacityType[1]", "spec.variables.weight[0]"}
    assert by_path["spec.variables.consolidationPolicy[1]"].found == "WhenIdle"
    assert by_path["spec.variables.consolidationPolicy[1]"].expected == \
        "WhenEmpty, WhenEmptyOrUnderutilized or Balanced (one policy, not a list)"
    assert by_path["spec.variables.budgets[1]"].found == "150%"
    assert "expected a duration" in str(by_path["spec.variables.consolidateAfter[1]"])


def test_balanced_is_a_consolidation_policy_a_space_may_choose_but_not_misspelled() -> None:
    sp = space.parse(_doc("    consolidationPolicy: [WhenEmptyOrUnderutilized, Balanced]\n"))
    assert sp.choices() == {"consolidationPolicy": ["WhenEmptyOrUnderutilized", "Balanced"]}
    found = _errors(_doc("    consolidationPolicy: [Balanced, balanced, [WhenEmpty, Balanced]]\n"))
    assert [(e.path, e.found) for e in found] == [("spec.variables.consolidationPolicy[1]", "balanced"),
                                                  ("spec.variables.consolidationPolicy[2]", ["WhenEmpty", "Balanced"])]
    assert all(e.expected == "WhenEmpty, WhenEmptyOrUnderutilized or Balanced (one policy, not a list)"
               for e in found)


def test_a_repeated_choice_is_refused_as_it_would_be_sampled_twice() -> None:
    [e] = _errors(_doc("    instanceCategory: [[c, m], m, 'c,m']\n"))
    assert e.path == "spec.variables.instanceCategory[2]"
    assert "different from spec.variables.instanceCategory[0]" in e.expected


def test_a_range_needs_min_max_and_a_positive_step_within_the_variable_s_limits() -> None:
    found = _errors(_doc("    spotShare: {min: 0, max: 2, step: 0.5}\n    weight: {min: 1, max: 10}\n"
                         "    instanceGeneration: {min: 5, max: 6, step: 0.5}\n"))
    by_path = {e.path: e for e in found}
    assert by_path["spec.variables.spotShare.max"].found == 2
    assert by_path["spec.variables.weight.step"].found is None
    assert by_path["spec.variables.instanceGeneration.step"].expected == "an integer (required)"
    [e] = _errors(_doc("    consolidateAfter: {min: 1, max: 2, step: 1}\n"))
    assert e.path == "spec.variables.consolidateAfter" and e.expected.startswith("a list of choices")


def test_spot_share_and_capacity_type_cannot_both_vary() -> None:
    [e] = _errors(_doc("    capacityType: [spot]\n    spotShare: [0.5]\n"))
    assert e.path == "spec.variables.spotShare" and e.found == "both"


def test_the_document_itself_is_checked_kind_api_version_and_unknown_fields() -> None:
    found = _errors("apiVersion: v1\nkind: Space\nspec: {variables: {}, pools: 2}\nextra: 1\n")
    assert {(e.path, str(e.found)) for e in found} == {
        ("apiVersion", "v1"), ("kind", "Space"), ("extra", "extra"), ("spec.pools", "pools"),
        ("spec.variables", "{}")}


def _workload() -> scenario.Scenario:
    return inputs.load([("tiny.yaml", design_workload.SCENARIO)], trace=None, until=600)


def test_a_family_the_catalog_does_not_have_is_named_against_the_workload() -> None:
    sp = space.parse(_doc("    instanceFamily: [m5, m55]\n"), source="space.yaml")
    with pytest.raises(errors.ValidationError) as exc:
        nodepools.resolve(sp, _workload())
    [e] = exc.value.errors
    assert (e.path, e.found) == ("spec.variables.instanceFamily[1]", "m55")
    assert "karpenter.k8s.aws/instance-family value of the aws catalog" in e.expected


def test_a_node_pool_the_input_does_not_have_is_named_with_the_ones_it_has() -> None:
    sp = space.parse(_doc("    instanceFamily: [m5]\n", extra="  nodePool: gpu\n"), source="space.yaml")
    with pytest.raises(errors.ValidationError) as exc:
        nodepools.resolve(sp, _workload())
    [e] = exc.value.errors
    assert (e.path, e.found, e.expected) == ("spec.nodePool", "gpu", "one of the input's NodePools: general")


def test_the_example_space_is_valid_against_the_example_workload() -> None:
    sp = space.load(str(EXAMPLES / "design" / "space.yaml"))
    trace = EXAMPLES / "design" / "trace.csv"
    scn = inputs.load([("workload.yaml", (EXAMPLES / "design" / "workload.yaml").read_text())],
                      trace=(str(trace), trace.read_text()), until=86400)
    target = nodepools.resolve(sp, scn)
    assert interface.name_of(target.base) == "general"
    assert len(scn.steps) == 144  # 48 half-hours x 3 Deployments
