"""Laws of the requirement algebra, checked by Hypothesis over a small universe of values.

A requirement is read as the set of label values it admits plus one extra member, "absent" (a
node without the label). Intersection must be that set's intersection; ``intersects`` must say
"fine" exactly when the intersection admits something.

The last law compares with a reference model of Karpenter's own rule ("the intersection has a
value, or both sides are NotIn / DoesNotExist"). For requirements written with one operator each
the two agree, except that karpy sees that bounds leaving no integer (``Gt 4`` and ``Lt 5``)
admit nothing, where Karpenter only checks ``gt >= lt``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.scheduling import requirement, requirements

Requirement = requirement.Requirement
Requirements = requirements.Requirements

KEY = "example.com/k"
VALUES = ["a", "b", "c", "1", "2", "3", "5", "8", "10", "05"]
PROBES = [*VALUES, "", "x", "0", "4", "6", "7", "9", "11", "-1", "-3", "+3", "007", " 5"]
ABSENT = None
"""The probe for "the node does not have the label"."""
SETTINGS = settings(max_examples=200, deadline=None)

Spec = tuple[str, tuple[str, ...]]

value_sets = st.frozensets(st.sampled_from(VALUES), max_size=4)
bound = st.integers(min_value=-2, max_value=12).map(str)
specs: st.SearchStrategy[Spec] = st.one_of(
    st.tuples(st.just("In"), value_sets.map(lambda s: tuple(sorted(s)))),
    st.tuples(st.just("NotIn"), value_sets.filter(bool).map(lambda s: tuple(sorted(s)))),
    st.tuples(st.sampled_from(["Exists", "DoesNotExist"]), st.just(())),
    st.tuples(st.sampled_from(["Gt", "Lt", "Gte", "Lte"]), bound.map(lambda v: (v,))),
)
min_values = st.none() | st.integers(min_value=1, max_value=3)
reqs = st.builds(lambda spec, mv: Requirement.new(KEY, spec[0], spec[1], mv), specs, min_values)


def admits(r: Requirement, probe: str | None) -> bool:
    return r.admits_absence() if probe is ABSENT else r.has(probe)


def admitted(r: Requirement) -> frozenset[str | None]:
    return frozenset(p for p in [*PROBES, ABSENT] if admits(r, p))


@SETTINGS
@given(reqs, reqs)
def test_intersection_is_commutative(a: Requirement, b: Requirement) -> None:
    assert a & b == b & a
    assert hash(a & b) == hash(b & a)


@SETTINGS
@given(reqs, reqs, reqs)
def test_intersection_is_associative(a: Requirement, b: Requirement, c: Requirement) -> None:
    assert (a & b) & c == a & (b & c)


@SETTINGS
@given(specs, min_values)
def test_intersection_is_idempotent(spec: Spec, mv: int | None) -> None:
    a, same = Requirement.new(KEY, *spec, min_values=mv), Requirement.new(KEY, *spec, min_values=mv)
    assert a is not same
    assert a & same == a
    assert admitted(a & same) == admitted(a)


@SETTINGS
@given(reqs, reqs)
def test_the_intersection_admits_a_value_or_absence_iff_both_sides_do(a: Requirement, b: Requirement) -> None:
    both = a & b
    assert admitted(both) == admitted(a) & admitted(b)
    assert both.min_values == max((m for m in (a.min_values, b.min_values) if m is not None), default=None)


@SETTINGS
@given(reqs)
def test_any_is_a_witness_and_emptiness_is_sound(r: Requirement) -> None:
    value = r.any()
    assert (value is not None) is r.admits_value() is (len(r) > 0)
    if value is not None:
        assert r.has(value)
    if r.is_empty():
        assert admitted(r) == frozenset()


@SETTINGS
@given(reqs, reqs)
def test_overlaps_is_exactly_a_non_empty_intersection(a: Requirement, b: Requirement) -> None:
    both = a & b
    assert a.overlaps(b) is (not both.is_empty())
    if both.is_empty():
        assert admitted(both) == frozenset()
    else:
        assert both.admits_absence() or both.has(both.any() or "")


@SETTINGS
@given(reqs)
def test_node_selector_terms_rebuild_the_same_requirement(r: Requirement) -> None:
    terms = r.to_node_selector_requirements()
    rebuilt = Requirements(Requirement.new(k, op, vals, r.min_values) for k, op, vals in terms)
    assert rebuilt[KEY] == r


OTHER = "example.com/other"
keyed_reqs = st.builds(
    lambda key, spec: Requirement.new(key, *spec), st.sampled_from([KEY, OTHER]), specs)
req_sets = st.lists(keyed_reqs, max_size=4).map(Requirements)


@SETTINGS
@given(req_sets, req_sets)
def test_requirement_sets_intersect_iff_every_shared_key_still_admits_something(
        node: Requirements, pod: Requirements) -> None:
    shared = node.keys() & pod.keys()
    expected = all(not (node[k] & pod[k]).is_empty() for k in shared)
    assert (node.intersects(pod) is None) is expected
    assert (pod.intersects(node) is None) is expected
    combined = node & pod
    assert combined == pod & node
    assert hash(combined) == hash(pod & node)
    assert combined.signature == (pod & node).signature


@SETTINGS
@given(req_sets, req_sets)
def test_a_key_the_node_side_leaves_undefined_needs_a_pod_requirement_that_admits_absence(
        node: Requirements, pod: Requirements) -> None:
    undefined_ok = all(pod[k].admits_absence() for k in pod.keys() - node.keys())
    expected = undefined_ok and node.intersects(pod) is None
    assert (node.compatible(pod, allow_undefined=frozenset()) is None) is expected
    everything = frozenset({KEY, OTHER})
    assert (node.compatible(pod, allow_undefined=everything) is None) is (node.intersects(pod) is None)


# -- Karpenter's rule, as a reference model ------------------------------------------------------


@dataclass(frozen=True)
class KarpenterReq:
    complement: bool
    values: frozenset[str]
    gt: int | None = None
    lt: int | None = None

    @staticmethod
    def new(operator: str, values: tuple[str, ...]) -> KarpenterReq:
        if operator == "In":
            return KarpenterReq(False, frozenset(values))
        if operator == "NotIn":
            return KarpenterReq(True, frozenset(values))
        if operator == "Exists":
            return KarpenterReq(True, frozenset())
        if operator == "DoesNotExist":
            return KarpenterReq(False, frozenset())
        n = int(values[0])
        return {
            "Gt": KarpenterReq(True, frozenset(), gt=n),
            "Gte": KarpenterReq(True, frozenset(), gt=n - 1),
            "Lt": KarpenterReq(True, frozenset(), lt=n),
            "Lte": KarpenterReq(True, frozenset(), lt=n + 1),
        }[operator]

    def operator(self) -> str:
        if self.complement:
            return "NotIn" if self.values else "Exists"
        return "In" if self.values else "DoesNotExist"

    def intersection_len_is_zero(self, other: KarpenterReq) -> bool:
        gts = [g for g in (self.gt, other.gt) if g is not None]
        lts = [t for t in (self.lt, other.lt) if t is not None]
        gt, lt = (max(gts) if gts else None), (min(lts) if lts else None)
        if gt is not None and lt is not None and gt >= lt:
            return True
        if self.complement and other.complement:
            return False
        if self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values

        def within(value: str) -> bool:
            if gt is None and lt is None:
                return True
            n = requirement.parse_int(value)
            return n is not None and (gt is None or n > gt) and (lt is None or n < lt)

        return not any(within(v) for v in values)

    def intersects(self, other: KarpenterReq) -> bool:
        if not self.intersection_len_is_zero(other):
            return True
        negative = ("NotIn", "DoesNotExist")
        return self.operator() in negative and other.operator() in negative


nonempty_specs = specs.filter(lambda s: s[0] != "In" or bool(s[1]))


@SETTINGS
@given(nonempty_specs, nonempty_specs)
def test_karpy_agrees_with_karpenters_rule_except_for_integer_free_bounds(node: Spec, pod: Spec) -> None:
    node_side = Requirements.of(Requirement.new(KEY, *node))
    pod_side = Requirements.of(Requirement.new(KEY, *pod))
    ours = node_side.intersects(pod_side)
    theirs = KarpenterReq.new(*node).intersects(KarpenterReq.new(*pod))
    if (ours is None) is not theirs:
        a, b = Requirement.new(KEY, *node), Requirement.new(KEY, *pod)
        gt = max((g for g in (a.greater_than, b.greater_than) if g is not None), default=None)
        lt = min((t for t in (a.less_than, b.less_than) if t is not None), default=None)
        assert theirs and ours is not None, "karpy may only be stricter"
        assert a.complement and b.complement and gt is not None and lt is not None and lt - gt == 1
