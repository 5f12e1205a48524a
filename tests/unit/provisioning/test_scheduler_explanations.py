"""Scenarios: why a pod fits nowhere, in words a user can act on."""

from __future__ import annotations

from karpy.api import labels as wk

from . import builders as b


def test_a_requirement_conflict_names_the_key_the_pods_values_and_the_nodepools_values() -> None:
    pool = b.make_nodepool(requirements=[b.requirement(wk.ZONE, "In", "zone-a")])
    p = b.make_pod("p", nodeSelector={wk.ZONE: "zone-b"})
    res = b.solve([p], nodepools=[pool])
    b.expect_unschedulable(res, p, containing=['NodePool "default"', "key topology.kubernetes.io/zone",
                                               "pod needs In [zone-b]", "NodePool allows In [zone-a]"])


def test_an_untolerated_taint_is_named() -> None:
    pool = b.make_nodepool(taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    p = b.make_pod("p")
    res = b.solve([p], nodepools=[pool])
    b.expect_unschedulable(res, p, containing=["does not tolerate", "dedicated=gpu:NoSchedule"])


def test_an_unknown_custom_label_is_named() -> None:
    p = b.make_pod("p", nodeSelector={"example.com/team": "blue"})
    res = b.solve([p])
    b.expect_unschedulable(res, p, containing=['label "example.com/team" is not defined by the NodePool'])


def test_a_custom_label_the_nodepool_sets_is_satisfiable() -> None:
    pool = b.make_nodepool(labels={"example.com/team": "blue"})
    p = b.make_pod("p", nodeSelector={"example.com/team": "blue"})
    res = b.solve([p], nodepools=[pool])
    b.expect_all_placed(res, [p])
    assert res.new_claims[0].labels["example.com/team"] == "blue"


def test_every_nodepool_gives_its_own_reason() -> None:
    tainted = b.make_nodepool("tainted", taints=[{"key": "team", "effect": "NoSchedule"}])
    zonal = b.make_nodepool("zonal", requirements=[b.requirement(wk.ZONE, "In", "zone-a")])
    p = b.make_pod("p", nodeSelector={wk.ZONE: "zone-c"})
    res = b.solve([p], nodepools=[tainted, zonal])
    message = b.expect_unschedulable(res, p, containing=['NodePool "tainted"', "team:NoSchedule",
                                                         'NodePool "zonal"', "pod needs In [zone-c]"])
    assert message.count("NodePool \"") == 2


def test_an_architecture_no_instance_type_has_is_named_with_what_the_types_offer() -> None:
    p = b.make_pod("p", nodeSelector={wk.ARCH: "arm64"})
    res = b.solve([p])
    b.expect_unschedulable(res, p, containing=["key kubernetes.io/arch: needs In [arm64]",
                                               "the instance types offer [amd64]"])


def test_a_pod_too_large_for_every_type_names_the_closest_type_and_the_short_resource() -> None:
    p = b.make_pod("huge", cpu="32", memory="1Gi")
    res = b.solve([p])
    b.expect_unschedulable(res, p, containing=["no instance type can hold the pod's requests (cpu 32",
                                               "the closest is large", "short of cpu"])


def test_without_nodepools_the_explanation_says_so() -> None:
    p = b.make_pod("p")
    res = b.solve([p], nodepools=[], types={})
    b.expect_unschedulable(res, p, containing=["no NodePool"])
