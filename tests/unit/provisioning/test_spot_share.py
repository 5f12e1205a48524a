"""Spot share per workload (``karpy.io/max-spot-percent``): the floor rule, which pending pods are kept
off spot, owners through ReplicaSets, and bad values named (issue 23 section 7)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from karpy.api import labels as wk
from karpy.api import pod
from karpy.provisioning import spot_share

from . import builders as b


def _deploy(name: str = "api", percent: Any = "30", replicas: int = 10) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "annotations": {spot_share.ANNOTATION: percent}},
            "spec": {"replicas": replicas}}


def _rs(name: str = "api-abc", owner: str = "api") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": owner, "controller": True}]}}


def _pod(name: str, owner_kind: str = "ReplicaSet", owner: str = "api-abc") -> pod.Pod:
    return pod.Pod.from_manifest({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "default",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner_kind, "name": owner, "controller": True}]},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})


def _off_spot(p: pod.Pod) -> bool:
    na = p.node_affinity
    return na is not None and bool(na.required) and all(
        any(e.key == wk.CAPACITY_TYPE and e.operator == "NotIn" and wk.CAPACITY_TYPE_SPOT in e.values
            for e in t.match_expressions) for t in na.required)


@pytest.mark.parametrize(("percent", "replicas", "expected"), [(30, 10, 3), (25, 10, 2), (0, 10, 0),
                                                               (100, 7, 7), (33, 3, 0), (50, 3, 1)])
def test_the_allowed_spot_replicas_are_the_floor_of_the_share(percent: int, replicas: int, expected: int) -> None:
    assert spot_share.allowed(percent, replicas) == expected


@pytest.mark.parametrize(("text", "expected"), [("30", 30), ("30%", 30), (" 0 ", 0), ("100", 100),
                                                ("101", None), ("-5", None), ("3.5", None), ("lots", None)])
def test_a_percentage_is_a_whole_number_from_0_to_100(text: str, expected: int | None) -> None:
    assert spot_share.parse_percent(text) == expected


def test_of_ten_pending_replicas_three_may_use_spot_and_seven_are_kept_off_it() -> None:
    w = spot_share.Workloads([_deploy()], [], [_rs()])
    pending = [_pod(f"api-{i:02d}") for i in range(10)]
    out = spot_share.constrain(pending, w, {})
    assert [p.name for p in out if not _off_spot(p)] == ["api-00", "api-01", "api-02"]
    assert sum(_off_spot(p) for p in out) == 7


def test_replicas_already_on_spot_use_up_the_share() -> None:
    w = spot_share.Workloads([_deploy()], [], [_rs()])
    spot_node = b.existing_node("s1", labels={wk.CAPACITY_TYPE: wk.CAPACITY_TYPE_SPOT},
                                running=[_pod("api-x"), _pod("api-y")])
    od_node = b.existing_node("o1", running=[_pod("api-z")])
    now = spot_share.on_spot([spot_node, od_node], w)
    assert now == {("Deployment", "default", "api"): 2}
    out = spot_share.constrain([_pod(f"api-{i}") for i in range(3)], w, now)
    assert sum(not _off_spot(p) for p in out) == 1


def test_a_statefulset_and_unannotated_workloads_are_told_apart() -> None:
    sts = {"metadata": {"name": "db", "namespace": "default", "annotations": {spot_share.ANNOTATION: "0"}},
           "spec": {"replicas": 2}}
    w = spot_share.Workloads([], [sts], [])
    out = spot_share.constrain([_pod("db-0", "StatefulSet", "db"), _pod("web-1", "ReplicaSet", "web-1")], w, {})
    assert [_off_spot(p) for p in out] == [True, False]


def test_the_off_spot_expression_is_anded_into_every_required_term() -> None:
    w = spot_share.Workloads([_deploy(percent="0")], [], [_rs()])
    p = pod.Pod.from_manifest({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "api-0", "namespace": "default", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "api-abc", "controller": True}]},
        "spec": {"containers": [{"name": "c"}], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": ["a"]}]},
                {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": ["b"]}]}]}}}}})
    (out,) = spot_share.constrain([p], w, {})
    assert out.node_affinity is not None and len(out.node_affinity.required) == 2
    assert _off_spot(out)


def test_a_bad_value_is_reported_with_object_field_expected_and_found_and_ignored() -> None:
    w = spot_share.Workloads([_deploy(percent="half")], [], [_rs()])
    assert not w
    (bad,) = w.invalid
    message = bad.message()
    assert message.startswith("Deployment default/api: annotation karpy.io/max-spot-percent: expected")
    assert "0 to 100" in message and "'half'" in message
    assert spot_share.constrain([_pod("api-0")], w, {})[0].node_affinity is None


def test_consolidation_keeps_pods_that_are_off_spot_off_spot_and_leaves_spot_pods_free() -> None:
    w = spot_share.Workloads([_deploy()], [], [_rs()])
    pods = [_pod("api-0"), _pod("other", "ReplicaSet", "other-rs")]
    assert [_off_spot(p) for p in spot_share.keep_off_spot(pods, w, node_is_spot=False)] == [True, False]
    assert not any(_off_spot(p) for p in spot_share.keep_off_spot(pods, w, node_is_spot=True))


def test_terminating_pods_on_spot_do_not_count() -> None:
    w = spot_share.Workloads([_deploy()], [], [_rs()])
    gone = _pod("api-x")
    gone = dataclasses.replace(gone, metadata=dataclasses.replace(gone.metadata, deletion_timestamp=1.0))
    node = b.existing_node("s1", labels={wk.CAPACITY_TYPE: wk.CAPACITY_TYPE_SPOT}, running=[gone])
    assert spot_share.on_spot([node], w) == {}


