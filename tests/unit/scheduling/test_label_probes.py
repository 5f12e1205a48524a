"""``topology.label_probes``: a pod that no probe finds is selected by no term (the probes are a
necessary condition), and terms that may select a pod without any given label give no probes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.api import selectors
from karpy.scheduling import topology

KEYS = ["app", "tier", "team"]
VALUES = ["a", "b", "c"]

requirement = st.builds(selectors.LabelSelectorRequirement, key=st.sampled_from(KEYS),
                        operator=st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
                        values=st.lists(st.sampled_from(VALUES), min_size=1, max_size=2).map(tuple))
selector = st.builds(selectors.LabelSelector,
                     match_labels=st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
                     match_expressions=st.lists(requirement, max_size=2).map(tuple))
term = st.builds(lambda sel, none: topology.Term(kind=topology.SPREAD, key="zone", selector=None if none else sel,
                                                 namespaces=None),
                 selector, st.booleans())
labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)


def _found(probes: topology.LabelProbes, pod_labels: dict[str, str]) -> bool:
    return any((v := pod_labels.get(k)) is not None and (allowed is None or v in allowed) for k, allowed in probes)


@settings(max_examples=300, deadline=None)
@given(terms=st.lists(term, max_size=4), pods=st.lists(labels, max_size=6))
def test_a_pod_some_term_selects_is_found_by_the_probes(terms: list[topology.Term], pods: list[dict[str, str]]) -> None:
    probes = topology.label_probes(terms)
    for pod_labels in pods:
        if any(t.matches("default", pod_labels) for t in terms):
            assert probes is None or _found(probes, pod_labels)


def test_probes_look_for_one_required_label_of_each_term_and_give_up_on_selectors_without_one() -> None:
    def spread(sel: selectors.LabelSelector | None) -> topology.Term:
        return topology.Term(kind=topology.SPREAD, key="zone", selector=sel, namespaces=None)

    req = selectors.LabelSelectorRequirement
    web = spread(selectors.LabelSelector({"app": "web"}))
    db_or_cache = spread(selectors.LabelSelector({}, (req("app", "In", ("db", "cache")),)))
    has_team = spread(selectors.LabelSelector({}, (req("team", "Exists", ()),)))
    assert topology.label_probes([web, db_or_cache, has_team, spread(None)]) == [
        ("app", frozenset({"web", "db", "cache"})), ("team", None)]
    assert topology.label_probes([]) == []
    not_web = spread(selectors.LabelSelector({}, (req("app", "NotIn", ("web",)),)))
    assert topology.label_probes([web, not_web]) is None
    assert topology.label_probes([spread(selectors.LabelSelector())]) is None
