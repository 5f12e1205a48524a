"""Nominations: a re-plan keeps pods on the in-flight capacity an earlier run planned them on."""

from __future__ import annotations

from . import builders as b


def test_without_nominations_pods_go_first_fit_onto_in_flight_capacity() -> None:
    big = b.make_pod("big", cpu="3", memory="1Gi")
    small = b.make_pod("small", cpu="1", memory="1Gi")
    a = b.existing_node("claim-a", cpu=3, in_flight=True)
    c = b.existing_node("claim-c", cpu=3, in_flight=True)
    res = b.solve([small, big], existing=[a, c], nodepools=[])
    assert b.node_of(res, big) == "claim-a" and b.node_of(res, small) == "claim-c"


def test_a_nominated_pod_keeps_its_planned_in_flight_node_when_it_still_fits() -> None:
    big = b.make_pod("big", cpu="3", memory="1Gi")
    small = b.make_pod("small", cpu="1", memory="1Gi")
    a = b.existing_node("claim-a", cpu=3, in_flight=True)
    c = b.existing_node("claim-c", cpu=3, in_flight=True)
    res = b.solve([small, big], existing=[a, c], nodepools=[],
                  nominations={small.key: "claim-a", big.key: "claim-c"})
    assert b.node_of(res, small) == "claim-a" and b.node_of(res, big) == "claim-c"


def test_a_nomination_that_no_longer_fits_falls_back_to_normal_scheduling() -> None:
    big = b.make_pod("big", cpu="3", memory="1Gi")
    running = b.make_pod("running", cpu="2", memory="1Gi")
    a = b.existing_node("claim-a", cpu=3, in_flight=True, running=[running])
    c = b.existing_node("claim-c", cpu=3, in_flight=True)
    res = b.solve([big], existing=[a, c], nodepools=[], nominations={big.key: "claim-a"})
    assert b.node_of(res, big) == "claim-c"
