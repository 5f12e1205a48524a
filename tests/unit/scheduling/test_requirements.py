"""Requirement sets: construction, compatibility (Karpenter's rules and reasons), labels, minValues."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from karpy.api import labels
from karpy.scheduling import requirement, requirements

Requirements = requirements.Requirements
new = requirement.Requirement.new
ZONE = labels.ZONE
TEAM = "example.com/team"


@dataclass(frozen=True)
class Term:
    """Stands in for karpy.api.selectors.NodeSelectorRequirement."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    min_values: int | None = None


def reqs(*specs: tuple[str, str, list[str]]) -> Requirements:
    return Requirements(new(k, op, vals) for k, op, vals in specs)


# -- construction and mapping --------------------------------------------------------------------


def test_node_selector_requirements_on_the_same_key_intersect() -> None:
    r = Requirements.from_node_selector_requirements([
        Term(ZONE, "In", ("a", "b", "c")),
        Term(ZONE, "NotIn", ("b",)),
        Term(labels.INSTANCE_TYPE, "Exists", min_values=2),
    ])
    assert r[ZONE].describe() == "In [a c]"
    assert r[labels.INSTANCE_TYPE].min_values == 2
    assert sorted(r) == [labels.INSTANCE_TYPE, ZONE]


def test_bad_node_selector_requirements_raise_value_error() -> None:
    with pytest.raises(ValueError, match=r"Gt on key example\.com/team needs exactly one integer value"):
        Requirements.from_node_selector_requirements([Term(TEAM, "Gt", ("x",))])


def test_labels_become_single_valued_in_requirements_under_normalised_keys() -> None:
    r = Requirements.from_labels({labels.ZONE_LEGACY: "us-east-1a", TEAM: "web"})
    assert r == reqs((ZONE, "In", ["us-east-1a"]), (TEAM, "In", ["web"]))
    assert labels.ZONE_LEGACY not in r


def test_requirements_behave_as_a_read_only_mapping() -> None:
    r = Requirements.of(new(TEAM, "In", ["a"]))
    assert len(r) == 1
    assert TEAM in r and ZONE not in r
    assert r.get(ZONE) is None
    assert dict(r) == {TEAM: new(TEAM, "In", ["a"])}
    with pytest.raises(KeyError):
        r[ZONE]


def test_intersect_takes_the_union_of_keys_and_intersects_shared_ones() -> None:
    a = reqs((ZONE, "In", ["a", "b"]), (TEAM, "In", ["web"]))
    b = reqs((ZONE, "In", ["b", "c"]), (labels.ARCH, "In", ["arm64"]))
    both = a.intersect(b)
    assert both == reqs((ZONE, "In", ["b"]), (TEAM, "In", ["web"]), (labels.ARCH, "In", ["arm64"]))
    assert (a & b) == both
    assert a == reqs((ZONE, "In", ["a", "b"]), (TEAM, "In", ["web"])), "intersect must not change a"


def test_add_intersects_new_requirements_into_a_copy() -> None:
    a = reqs((ZONE, "In", ["a", "b"]))
    b = a.add(new(ZONE, "NotIn", ["a"]), new(TEAM, "Exists"))
    assert b[ZONE].describe() == "In [b]" and b[TEAM].describe() == "Exists"
    assert a[ZONE].describe() == "In [a b]"


def test_intersecting_with_nothing_returns_the_same_object() -> None:
    a = reqs((ZONE, "In", ["a"]))
    assert a.intersect(requirements.EMPTY) is a
    assert requirements.EMPTY.intersect(a) is a
    assert a.intersect(a) is a
    assert a.add() is a


# -- compatibility -------------------------------------------------------------------------------

NODE_SIDES = {
    "unconstrained": reqs(),
    "Exists": reqs((ZONE, "Exists", [])),
    "DoesNotExist": reqs((ZONE, "DoesNotExist", [])),
    "In [a]": reqs((ZONE, "In", ["a"])),
    "In [a b]": reqs((ZONE, "In", ["a", "b"])),
    "NotIn [a]": reqs((ZONE, "NotIn", ["a"])),
    "In [1 9]": reqs((ZONE, "In", ["1", "9"])),
    "Gt 1": reqs((ZONE, "Gt", ["1"])),
    "Lt 9": reqs((ZONE, "Lt", ["9"])),
}


@pytest.mark.parametrize(
    ("node", "pod", "ok"),
    [
        # A NodePool that does not mention a well-known key allows anything for it.
        ("unconstrained", ("In", ["a"]), True),
        ("unconstrained", ("DoesNotExist", []), True),
        ("unconstrained", ("Gt", ["9"]), True),
        ("Exists", ("In", ["a"]), True),
        ("Exists", ("NotIn", ["a"]), True),
        ("Exists", ("DoesNotExist", []), False),
        ("DoesNotExist", ("Exists", []), False),
        ("DoesNotExist", ("In", ["a"]), False),
        ("DoesNotExist", ("DoesNotExist", []), True),
        ("DoesNotExist", ("Gt", ["1"]), False),
        ("In [a]", ("In", ["a", "b"]), True),
        ("In [a]", ("In", ["b"]), False),
        ("In [a]", ("NotIn", ["a"]), False),
        ("In [a b]", ("NotIn", ["a"]), True),
        ("In [a]", ("Gt", ["1"]), False),
        # Two negative requirements always intersect: both admit a node without the label.
        ("NotIn [a]", ("DoesNotExist", []), True),
        ("NotIn [a]", ("NotIn", ["a"]), True),
        ("DoesNotExist", ("NotIn", ["a"]), True),
        ("NotIn [a]", ("In", ["a"]), False),
        ("NotIn [a]", ("Gt", ["1"]), True),
        ("In [1 9]", ("Gt", ["1"]), True),
        ("In [1 9]", ("Gt", ["9"]), False),
        ("In [1 9]", ("Lt", ["9"]), True),
        ("In [1 9]", ("NotIn", ["1", "9"]), False),
        ("Gt 1", ("Lt", ["9"]), True),
        ("Gt 1", ("Lt", ["2"]), False),
        ("Gt 1", ("Lt", ["1"]), False),
        ("Lt 9", ("Gt", ["9"]), False),
        ("Lt 9", ("In", ["a"]), False),
    ],
)
def test_compatibility_of_node_and_pod_requirements_on_a_well_known_key(
        node: str, pod: tuple[str, list[str]], ok: bool) -> None:
    reason = NODE_SIDES[node].compatible(reqs((ZONE, *pod)))
    assert (reason is None) is ok, reason


def test_a_custom_label_the_nodepool_does_not_define_is_incompatible() -> None:
    node = reqs((ZONE, "In", ["a"]))
    reason = node.compatible(reqs((TEAM, "In", ["web"])))
    assert reason == 'label "example.com/team" is not defined by the NodePool'
    assert node.compatible(reqs((TEAM, "Exists", []))) is not None
    assert node.compatible(reqs((TEAM, "Gt", ["1"]))) is not None


def test_a_custom_label_the_nodepool_does_not_define_is_fine_when_the_pod_excludes_it() -> None:
    node = reqs((ZONE, "In", ["a"]))
    assert node.compatible(reqs((TEAM, "NotIn", ["web"]))) is None
    assert node.compatible(reqs((TEAM, "DoesNotExist", []))) is None


def test_a_custom_label_the_nodepool_defines_must_intersect() -> None:
    node = reqs((TEAM, "In", ["web", "api"]))
    assert node.compatible(reqs((TEAM, "In", ["web"]))) is None
    assert node.compatible(reqs((TEAM, "In", ["batch"]))) == (
        "key example.com/team: pod needs In [batch], NodePool allows In [api web]")


def test_undefined_well_known_labels_are_allowed_only_while_in_allow_undefined() -> None:
    node = reqs()
    pod = reqs((ZONE, "In", ["a"]))
    assert node.compatible(pod) is None
    assert node.compatible(pod, allow_undefined=frozenset()) == (
        'label "topology.kubernetes.io/zone" is not defined by the NodePool')


def test_exists_combined_with_not_in_still_needs_the_label_unlike_karpenter() -> None:
    pod = reqs((TEAM, "Exists", []), (TEAM, "NotIn", ["web"]))
    assert reqs().compatible(pod) is not None
    assert reqs((TEAM, "DoesNotExist", [])).intersects(pod) is not None


def test_the_reason_names_the_key_the_pods_requirement_and_the_nodepools() -> None:
    node = reqs((ZONE, "In", ["us-east-1a", "us-east-1b"]))
    reason = node.compatible(reqs((ZONE, "In", ["us-east-1d"])))
    assert reason == ("key topology.kubernetes.io/zone: pod needs In [us-east-1d], "
                      "NodePool allows In [us-east-1a us-east-1b]")


def test_the_reason_wording_names_whoever_the_caller_says() -> None:
    instance_type = reqs((labels.ARCH, "In", ["amd64"]))
    reason = instance_type.intersects(reqs((labels.ARCH, "In", ["arm64"])),
                                      pod_name="pod default/web", node_name="instance type m5.large")
    assert reason == ("key kubernetes.io/arch: pod default/web needs In [arm64], "
                      "instance type m5.large allows In [amd64]")


def test_every_failing_key_is_reported_in_key_order() -> None:
    node = reqs((ZONE, "In", ["a"]), (labels.ARCH, "In", ["amd64"]))
    pod = reqs((ZONE, "In", ["b"]), (labels.ARCH, "In", ["arm64"]), (TEAM, "In", ["web"]))
    assert node.compatible(pod) == "; ".join([
        'label "example.com/team" is not defined by the NodePool',
        "key kubernetes.io/arch: pod needs In [arm64], NodePool allows In [amd64]",
        "key topology.kubernetes.io/zone: pod needs In [b], NodePool allows In [a]",
    ])


def test_long_value_lists_are_truncated_in_reasons() -> None:
    node = reqs((labels.INSTANCE_TYPE, "In", [f"m5.{i}xlarge" for i in range(1, 9)]))
    reason = node.intersects(reqs((labels.INSTANCE_TYPE, "In", ["c5.large"])))
    assert reason is not None
    assert reason.endswith("NodePool allows In [m5.1xlarge m5.2xlarge m5.3xlarge m5.4xlarge m5.5xlarge "
                           "and 3 others]")


def test_a_key_that_looks_like_a_well_known_one_gets_a_typo_hint() -> None:
    reason = reqs().compatible(reqs(("zone", "In", ["a"])))
    assert reason == 'label "zone" is not defined by the NodePool (typo of "topology.kubernetes.io/zone"?)'
    reason = reqs(("example.com/team", "In", ["a"])).compatible(reqs(("team", "In", ["a"])))
    assert reason == 'label "team" is not defined by the NodePool (typo of "example.com/team"?)'


def test_intersects_ignores_keys_only_one_side_defines() -> None:
    assert reqs((TEAM, "In", ["a"])).intersects(reqs((ZONE, "In", ["b"]))) is None


# -- labels --------------------------------------------------------------------------------------


def test_labels_are_the_keys_restricted_to_one_value() -> None:
    r = reqs(
        (TEAM, "In", ["web"]),
        (ZONE, "In", ["us-east-1a"]),
        (labels.CAPACITY_TYPE, "In", ["spot", "on-demand"]),
        ("example.com/tier", "NotIn", ["gold"]),
        ("example.com/gpu", "Exists", []),
        ("example.com/legacy", "DoesNotExist", []),
        (labels.HOSTNAME, "In", ["node-1"]),
        ("karpenter.sh/custom", "In", ["x"]),
        ("node.kubernetes.io/role", "In", ["worker"]),
    )
    assert r.labels() == {TEAM: "web", ZONE: "us-east-1a", "node.kubernetes.io/role": "worker"}


def test_labels_of_a_bounded_key_narrowed_to_one_value_are_written() -> None:
    r = reqs(("example.com/gen", "In", ["3", "5", "7"]), ("example.com/gen", "Gt", ["4"]),
             ("example.com/gen", "Lt", ["6"]))
    assert r.labels() == {"example.com/gen": "5"}


# -- minValues -----------------------------------------------------------------------------------

FAMILY = labels.AWS_INSTANCE_FAMILY


def test_min_values_are_met_when_enough_distinct_admitted_values_remain() -> None:
    r = Requirements.of(new(FAMILY, "In", ["c5", "m5", "r5"], min_values=2))
    assert r.min_values_violations([{FAMILY: "c5"}, {FAMILY: "m5"}]) == []
    assert r.min_values_violations([{FAMILY: "c5"}, {FAMILY: "c5"}]) == [FAMILY]


def test_min_values_do_not_count_values_the_requirement_excludes_or_missing_labels() -> None:
    r = Requirements.of(new(FAMILY, "NotIn", ["t3"], min_values=2), new(ZONE, "Exists", min_values=1))
    its = [{FAMILY: "t3"}, {FAMILY: "m5"}, {labels.ARCH: "amd64"}]
    assert r.min_values_violations(its) == [FAMILY, ZONE]
    assert r.has_min_values()
    assert not reqs((FAMILY, "Exists", [])).has_min_values()
    assert reqs((FAMILY, "Exists", [])).min_values_violations([]) == []


def test_min_values_satisfied_counts_distinct_admitted_values() -> None:
    req = new(FAMILY, "In", ["c5", "m5", "r5"], min_values=2)
    assert requirement.min_values_satisfied(req, ["c5", "m5"])
    assert not requirement.min_values_satisfied(req, ["c5", "c5", "t3"])
    assert requirement.min_values_satisfied(new(FAMILY, "Exists"), [])


# -- identity, caching, writing ------------------------------------------------------------------


def test_requirement_sets_built_in_any_order_are_equal_hash_alike_and_share_a_signature() -> None:
    a = reqs((ZONE, "In", ["a", "b"]), (TEAM, "In", ["web"]))
    b = Requirements.of(new(TEAM, "In", ["web"]), new(ZONE, "In", ["b", "a", "c"]), new(ZONE, "NotIn", ["c"]))
    assert a == b
    assert hash(a) == hash(b)
    assert a.signature == b.signature == "example.com/team In [web], topology.kubernetes.io/zone In [a b]"
    assert {a: "cached"}[b] == "cached"


def test_requirement_sets_that_differ_are_not_equal() -> None:
    a = reqs((ZONE, "In", ["a"]))
    assert a != reqs((ZONE, "In", ["b"]))
    assert a != reqs((ZONE, "In", ["a"]), (TEAM, "Exists", []))
    with_min = Requirements.of(new(ZONE, "In", ["a"], min_values=1))
    assert a != with_min
    assert a.signature != with_min.signature
    assert with_min.signature == "topology.kubernetes.io/zone In [a] minValues 1"
    assert a != {ZONE: new(ZONE, "In", ["a"])}
    hash(a), hash(with_min)
    assert a != with_min, "cached hashes must not change the answer"


def test_to_node_selector_requirements_round_trips() -> None:
    r = Requirements.of(new(ZONE, "In", ["a", "b"]), new(TEAM, "Gt", ["1"]), new(TEAM, "Lt", ["9"]))
    terms = r.to_node_selector_requirements()
    assert terms == [(TEAM, "Gt", ("1",)), (TEAM, "Lt", ("9",)), (ZONE, "In", ("a", "b"))]
    assert Requirements.from_node_selector_requirements(Term(*t) for t in terms) == r


def test_repr_shows_the_signature() -> None:
    assert repr(reqs((ZONE, "Exists", []))) == "Requirements(topology.kubernetes.io/zone Exists)"
