"""One key's requirement: operators, membership, intersection, rendering and identity."""

from __future__ import annotations

import copy
import pickle

import pytest

from karpy.api import labels
from karpy.scheduling import requirement, requirements

Requirement = requirement.Requirement
new = requirement.Requirement.new
K = "example.com/size"


# -- construction --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operator", "values", "admitted", "refused", "absent_ok"),
    [
        ("In", ["a", "b"], ["a", "b"], ["c", ""], False),
        ("NotIn", ["a"], ["b", "", "7"], ["a"], True),
        ("Exists", [], ["a", "", "7"], [], False),
        ("DoesNotExist", [], [], ["a", "", "7"], True),
        ("Gt", ["4"], ["5", "100", "05", "+5"], ["4", "3", "-1", "x", "", " 5", "1_000"], False),
        ("Lt", ["4"], ["3", "-10", "0"], ["4", "5", "x"], False),
        ("Gte", ["4"], ["4", "5"], ["3", "x"], False),
        ("Lte", ["4"], ["4", "3"], ["5", "x"], False),
    ],
)
def test_each_operator_admits_exactly_the_values_kubernetes_would_match(
        operator: str, values: list[str], admitted: list[str], refused: list[str], absent_ok: bool) -> None:
    r = new(K, operator, values)
    assert [v for v in admitted if not r.has(v)] == []
    assert [v for v in refused if r.has(v)] == []
    assert r.admits_absence() is absent_ok


@pytest.mark.parametrize(
    ("operator", "values", "karpenter_operator", "described"),
    [
        ("In", ["b", "a"], "In", "In [a b]"),
        ("NotIn", ["x"], "NotIn", "NotIn [x]"),
        ("Exists", [], "Exists", "Exists"),
        ("DoesNotExist", [], "DoesNotExist", "DoesNotExist"),
        ("Gt", ["4"], "Exists", "Gt 4"),
        ("Lt", ["16"], "Exists", "Lt 16"),
        ("Gte", ["4"], "Exists", "Gt 3"),
        ("Lte", ["16"], "Exists", "Lt 17"),
    ],
)
def test_operator_follows_karpenter_and_describe_reads_like_the_manifest(
        operator: str, values: list[str], karpenter_operator: str, described: str) -> None:
    r = new(K, operator, values)
    assert r.operator() == karpenter_operator
    assert r.describe() == described


@pytest.mark.parametrize(
    ("operator", "values", "message_part"),
    [
        ("Gt", ["four"], "Gt on key example.com/size needs exactly one integer value, got [four]"),
        ("Lt", ["1", "2"], "Lt on key example.com/size needs exactly one integer value, got [1 2]"),
        ("Gte", [], "Gte on key example.com/size needs exactly one integer value, got []"),
        ("Lte", ["1.5"], "got [1.5]"),
        ("Exists", ["a"], "Exists on key example.com/size takes no values, got [a]"),
        ("DoesNotExist", ["a"], "DoesNotExist on key example.com/size takes no values"),
        ("NotIn", [], "NotIn on key example.com/size needs at least one value"),
        ("Matches", ["a"], "unknown operator 'Matches' on key example.com/size; expected one of In, NotIn"),
    ],
)
def test_bad_operator_and_values_raise_value_error_naming_them(
        operator: str, values: list[str], message_part: str) -> None:
    with pytest.raises(ValueError) as info:
        new(K, operator, values)
    assert message_part in str(info.value)


def test_min_values_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"minValues for key example\.com/size must be a positive integer"):
        new(K, "In", ["a"], min_values=0)


def test_deprecated_keys_are_normalised_to_the_key_karpy_schedules_on() -> None:
    r = new(labels.ZONE_LEGACY, "In", ["us-east-1a"])
    assert r.key == labels.ZONE
    assert new(labels.PROVISIONER_NAME, "Exists").key == labels.NODEPOOL


def test_a_requirement_cannot_be_built_directly_or_changed() -> None:
    with pytest.raises(TypeError, match=r"Requirement\.new"):
        Requirement()
    r = new(K, "In", ["a"])
    with pytest.raises(AttributeError, match="immutable"):
        r.key = "other"
    with pytest.raises(AttributeError, match="immutable"):
        del r.values
    assert r.key == K


# -- intersection --------------------------------------------------------------------------------

X = tuple[str, list[str]]


@pytest.mark.parametrize(
    ("a", "b", "described", "absent_ok"),
    [
        (("In", ["a", "b"]), ("In", ["b", "c"]), "In [b]", False),
        (("In", ["a", "b"]), ("NotIn", ["a"]), "In [b]", False),
        (("In", ["a"]), ("Exists", []), "In [a]", False),
        (("In", ["a"]), ("DoesNotExist", []), "In []", False),
        (("In", ["a"]), ("In", ["b"]), "In []", False),
        (("NotIn", ["a"]), ("NotIn", ["b"]), "NotIn [a b]", True),
        (("NotIn", ["a"]), ("DoesNotExist", []), "DoesNotExist", True),
        (("NotIn", ["a"]), ("Exists", []), "Exists NotIn [a]", False),
        (("Exists", []), ("DoesNotExist", []), "In []", False),
        (("Exists", []), ("Exists", []), "Exists", False),
        (("DoesNotExist", []), ("DoesNotExist", []), "DoesNotExist", True),
        (("Gt", ["4"]), ("Lt", ["16"]), "Gt 4 Lt 16", False),
        (("Gt", ["4"]), ("Gt", ["8"]), "Gt 8", False),
        (("Lt", ["4"]), ("Lt", ["8"]), "Lt 4", False),
        (("Gt", ["4"]), ("In", ["3", "5", "x", "05"]), "In [05 5]", False),
        (("Gt", ["4"]), ("NotIn", ["2", "5", "x"]), "Gt 4 NotIn [5]", False),
        (("Gt", ["4"]), ("Exists", []), "Gt 4", False),
        (("Gt", ["4"]), ("DoesNotExist", []), "In []", False),
        (("Gt", ["4"]), ("Lt", ["5"]), "In []", False),
        (("Gt", ["10"]), ("Lt", ["2"]), "In []", False),
        (("Gte", ["4"]), ("Lte", ["4"]), "Gt 3 Lt 5", False),
    ],
)
def test_intersection_of_operator_pairs(a: X, b: X, described: str, absent_ok: bool) -> None:
    ra, rb = new(K, *a), new(K, *b)
    both = ra.intersection(rb)
    assert both.describe() == described
    assert both.admits_absence() is absent_ok
    assert rb.intersection(ra) == both
    assert (ra & rb) == both


def test_bounds_that_leave_no_integer_admit_nothing_unlike_karpenters_gt_ge_lt_check() -> None:
    nothing = new(K, "Gt", ["4"]) & new(K, "Lt", ["5"])
    assert nothing.is_empty()
    assert not nothing.has("4") and not nothing.has("5") and not nothing.has("04")
    assert nothing.any() is None


def test_gt_and_lt_apply_only_to_integer_values() -> None:
    bounded = new(K, "Gt", ["4"]) & new(K, "NotIn", ["large"])
    assert bounded.has("8")
    assert not bounded.has("large") and not bounded.has("xlarge")


def test_min_values_of_an_intersection_is_the_larger_of_the_two() -> None:
    a = new(K, "In", ["a", "b", "c"], min_values=2)
    b = new(K, "Exists", min_values=3)
    assert (a & b).min_values == 3
    assert (a & new(K, "In", ["a"])).min_values == 2


def test_intersecting_requirements_on_different_keys_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"different keys example\.com/size and other"):
        new(K, "In", ["a"]) & new("other", "In", ["a"])


def test_intersecting_a_requirement_with_itself_allocates_nothing() -> None:
    r = new(K, "In", ["a", "b"])
    assert r.intersection(r) is r


def test_an_intersection_equal_to_one_side_reuses_that_side() -> None:
    narrow, wide = new(K, "In", ["a"]), new(K, "In", ["a", "b"])
    assert narrow & wide is narrow
    assert wide & narrow is narrow
    assert narrow & new(K, "Exists") is narrow
    assert narrow & new(K, "NotIn", ["b"]) is narrow
    with_min = new(K, "In", ["a", "b"], min_values=2)
    assert (narrow & with_min) is not narrow and (narrow & with_min).min_values == 2


def test_overlaps_agrees_with_the_intersection_for_representative_pairs() -> None:
    reqs = [new(K, *spec) for spec in [
        ("In", ["a"]), ("In", ["5"]), ("NotIn", ["a"]), ("Exists", []), ("DoesNotExist", []),
        ("Gt", ["4"]), ("Lt", ["5"]), ("Lt", ["4"]), ("In", []),
    ]]
    mismatches = [(a, b) for a in reqs for b in reqs if a.overlaps(b) is (a & b).is_empty()]
    assert mismatches == []


# -- size, emptiness, any ------------------------------------------------------------------------


def test_len_is_finite_for_in_sets_and_karpenters_infinity_for_complements() -> None:
    assert len(new(K, "In", ["a", "b"])) == 2
    assert len(new(K, "DoesNotExist")) == 0
    assert len(new(K, "Exists")) == requirement.INFINITE
    assert len(new(K, "NotIn", ["a", "b"])) == requirement.INFINITE - 2
    assert len(new(K, "In", ["1", "9"]) & new(K, "Gt", ["4"])) == 1


def test_is_empty_means_neither_a_value_nor_absence_satisfies_it() -> None:
    assert not new(K, "DoesNotExist").is_empty()
    assert not new(K, "DoesNotExist").admits_value()
    assert (new(K, "In", ["a"]) & new(K, "DoesNotExist")).is_empty()
    assert not new(K, "Gt", ["1"]).is_empty()


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (new(K, "In", ["c", "b"]), "b"),
        (new(K, "DoesNotExist"), None),
        (new(K, "In", []), None),
        (new(K, "Exists"), "0"),
        (new(K, "NotIn", ["0", "1"]), "2"),
        (new(K, "Gt", ["4"]), "5"),
        (new(K, "Lt", ["0"]), "-1"),
        (new(K, "Lt", ["10"]), "0"),
        (new(K, "Gt", ["4"]) & new(K, "Lt", ["6"]) & new(K, "NotIn", ["5"]), "05"),
    ],
)
def test_any_returns_an_admitted_value_deterministically(
        requirement: Requirement, expected: str | None) -> None:
    got = requirement.any()
    assert got == expected
    if got is not None:
        assert requirement.has(got)


def test_values_sorted_lists_the_values_in_order() -> None:
    assert new(K, "NotIn", ["c", "a", "b"]).values_sorted() == ("a", "b", "c")


def test_describe_can_truncate_long_value_lists() -> None:
    r = new(K, "In", [f"v{i}" for i in range(8)])
    assert r.describe(max_values=5) == "In [v0 v1 v2 v3 v4 and 3 others]"
    assert r.describe().count("v") == 8


# -- writing NodeClaim specs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requirement", "term"),
    [
        (new(K, "In", ["b", "a"]), (K, "In", ("a", "b"))),
        (new(K, "NotIn", ["a"]), (K, "NotIn", ("a",))),
        (new(K, "Exists"), (K, "Exists", ())),
        (new(K, "DoesNotExist"), (K, "DoesNotExist", ())),
        (new(K, "Gt", ["4"]) & new(K, "Lt", ["16"]), (K, "Gt", ("4",))),
        (new(K, "Lte", ["16"]), (K, "Lt", ("17",))),
    ],
)
def test_to_node_selector_requirement_writes_the_term_karpenter_writes(
        requirement: Requirement, term: tuple[str, str, tuple[str, ...]]) -> None:
    assert requirement.to_node_selector_requirement() == term


def test_to_node_selector_requirements_keeps_every_bound_and_exclusion() -> None:
    r = new(K, "Gt", ["4"]) & new(K, "Lt", ["16"]) & new(K, "NotIn", ["8"])
    terms = r.to_node_selector_requirements()
    assert terms == ((K, "Gt", ("4",)), (K, "Lt", ("16",)), (K, "NotIn", ("8",)))
    rebuilt = requirements.Requirements(new(k, op, vals) for k, op, vals in terms)[K]
    assert rebuilt == r
    exists_not_in = new(K, "Exists") & new(K, "NotIn", ["a"])
    assert exists_not_in.to_node_selector_requirements() == ((K, "Exists", ()), (K, "NotIn", ("a",)))


# -- identity ------------------------------------------------------------------------------------


def test_requirements_with_the_same_meaning_are_equal_and_hash_alike() -> None:
    assert new(K, "In", ["a", "b"]) == new(K, "In", ("b", "a"))
    assert new(K, "Gte", ["5"]) == new(K, "Gt", ["4"])
    assert new(K, "NotIn", ["x", "9"]) & new(K, "Gt", ["4"]) == new(K, "Gt", ["4"]) & new(K, "NotIn", ["9"])
    assert len({new(K, "In", ["a", "b"]), new(K, "In", ["b", "a"])}) == 1


def test_requirements_that_differ_in_key_absence_or_min_values_are_not_equal() -> None:
    assert new(K, "In", ["a"]) != new("other", "In", ["a"])
    assert new(K, "In", ["a"]) != new(K, "In", ["a"], min_values=1)
    assert new(K, "NotIn", ["a"]) != new(K, "Exists") & new(K, "NotIn", ["a"])
    assert new(K, "In", ["a"]) != "In [a]"


def test_requirements_survive_pickle_and_copy() -> None:
    r = new(K, "Gt", ["4"], min_values=2) & new(K, "NotIn", ["8"])
    assert pickle.loads(pickle.dumps(r)) == r
    assert copy.deepcopy(r) == r
    assert copy.copy(r).describe() == "Gt 4 NotIn [8]"


def test_parse_int_follows_go_atoi_syntax() -> None:
    assert requirement.parse_int("-12") == -12
    assert requirement.parse_int("+7") == 7
    assert requirement.parse_int("007") == 7
    assert [requirement.parse_int(v) for v in ["", " 1", "1 ", "1_0", "1.0", "0x1", "\u0661"]] == [None] * 7
