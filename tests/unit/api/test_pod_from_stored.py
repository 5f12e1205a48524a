"""``Pod.from_stored``: the parse of a stored (never changed in place) pod equals ``from_manifest``'s."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from karpy.api import errors, pod


def _manifest(name: str, spec: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}", "resourceVersion": "7",
                         "labels": {"app": "web"}, "annotations": {"note": "x"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                                              "uid": "rs-uid", "controller": True}]},
            "spec": spec, "status": status or {"phase": "Pending"}}


def _spec() -> dict[str, Any]:
    return {"containers": [{"name": "app", "image": "app:1",
                            "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                           "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "web"}}}]}


def test_pods_sharing_one_stored_spec_parse_as_from_manifest_and_share_the_spec_models() -> None:
    spec = _spec()
    first, second = _manifest("a", spec), _manifest("b", spec)
    a, b = pod.Pod.from_stored(first), pod.Pod.from_stored(second)
    assert a == pod.Pod.from_manifest(copy.deepcopy(first))
    assert b == pod.Pod.from_manifest(copy.deepcopy(second))
    assert b.containers is a.containers and b.topology_spread_constraints is a.topology_spread_constraints
    assert b.name == "b" and b.metadata.uid == "uid-b"


def test_a_bound_pod_whose_spec_keeps_the_shared_entries_reuses_the_parse_with_its_node_name() -> None:
    spec = _spec()
    before = pod.Pod.from_stored(_manifest("a", spec))
    bound = _manifest("a", {**spec, "nodeName": "node-1"}, phase="Running", conditions=[
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}])
    after = pod.Pod.from_stored(bound)
    assert after == pod.Pod.from_manifest(copy.deepcopy(bound))
    assert after.node_name == "node-1" and after.phase == "Running"
    assert after.containers is before.containers
    assert after.condition("PodScheduled") is not None


def test_a_stored_pod_keeps_its_labels_mapping_and_a_manifest_parse_copies_it() -> None:
    m = _manifest("a", _spec())
    assert pod.Pod.from_stored(m).labels is m["metadata"]["labels"]
    assert pod.Pod.from_manifest(m).labels is not m["metadata"]["labels"]
    assert pod.Pod.from_manifest(m).labels == m["metadata"]["labels"]


def test_equal_conditions_of_different_pods_share_one_model() -> None:
    cond = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}
    a = pod.Pod.from_manifest(_manifest("a", _spec(), phase="Running", conditions=[dict(cond)]))
    b = pod.Pod.from_manifest(_manifest("b", _spec(), phase="Running", conditions=[dict(cond)]))
    assert a.conditions[0] is b.conditions[0]
    assert a.conditions[0].last_transition_time is not None


def test_a_bad_stored_pod_is_refused_like_a_manifest() -> None:
    spec = _spec()
    spec["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(errors.ValidationError):
        pod.Pod.from_stored(_manifest("a", spec))
    with pytest.raises(errors.ValidationError):
        pod.Pod.from_stored(_manifest("b", _spec(), phase="Running",
                                      conditions=[{"type": "Ready", "lastTransitionTime": "yesterday"}]))


def test_pods_sharing_a_stored_spec_share_their_request_and_owner_references() -> None:
    spec = _spec()
    first, second = _manifest("a", spec), _manifest("b", spec)
    second["metadata"]["ownerReferences"] = first["metadata"]["ownerReferences"]  # as the store shares them
    a, b = pod.Pod.from_stored(first), pod.Pod.from_stored(second)
    assert b.requests is a.requests and a.requests == pod.Pod.from_manifest(first).requests
    assert b.metadata.owner_references is a.metadata.owner_references
    assert b.owner_kind == "ReplicaSet"


def test_evolve_keeps_the_cached_request_unless_the_spec_changes() -> None:
    a = pod.Pod.from_stored(_manifest("a", _spec()))
    running = a.evolve(phase="Running", node_name="n1")
    assert running.requests is a.requests and running.phase == "Running"
    bigger = a.evolve(overhead={"cpu": 100})
    assert bigger.requests is not a.requests and bigger.requests["cpu"] == a.requests["cpu"] + 100


def test_evolving_status_fields_equals_dataclasses_replace_field_for_field() -> None:
    import dataclasses

    a = pod.Pod.from_stored(_manifest("a", {**_spec(), "priority": 5, "priorityClassName": "high",
                                            "nodeSelector": {"d": "e"}, "hostNetwork": True,
                                            "terminationGracePeriodSeconds": 3, "restartPolicy": "Never",
                                            "resources": {"requests": {"cpu": "2"}}}))
    changes: dict[str, Any] = {"phase": "Running", "node_name": "n1", "conditions": (), "start_time": 5.0,
                               "metadata": a.metadata.with_resource_version("9")}
    fast = a.evolve(**changes)
    slow = dataclasses.replace(a, **changes)
    for f in dataclasses.fields(pod.Pod):
        if f.init:
            assert getattr(fast, f.name) is getattr(slow, f.name), f.name
    # every init field is passed on by position: a new field must be added to evolve's fast path
    assert len([f for f in dataclasses.fields(pod.Pod) if f.init]) == 24


def test_stored_conditions_read_once_per_list_equal_a_fresh_read() -> None:
    from karpy.api import fields, pod_cache

    conds = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
              "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    status = fields.Fields({"phase": "Pending", "conditions": conds}, "Pod shop/a", "status")
    plain = pod_cache.read_status(status)
    assert pod_cache.read_status(status, shared=True) == plain
    assert pod_cache.read_status(status, shared=True) == plain  # remembered by the list
    other = fields.Fields({"phase": "Pending", "conditions": [dict(conds[0], status="True")]}, "Pod shop/a", "status")
    assert pod_cache.read_status(other, shared=True) == pod_cache.read_status(other)
    assert pod_cache.read_status(other, shared=True)[1][0].status == "True"
    bad = fields.Fields({"conditions": [{"status": "True"}]}, "Pod shop/a", "status")  # no type
    for _ in range(2):
        with pytest.raises(errors.ValidationError):
            pod_cache.read_status(bad, shared=True)


def test_pods_holding_one_spec_dict_parse_as_from_manifest_bound_or_not() -> None:
    spec = _spec()
    a = _manifest("a", spec)
    b = _manifest("b", spec)  # the very same dict, as the store keeps replicas' specs
    bound = _manifest("c", {**spec, "nodeName": "n1"})
    for m in (a, b, bound, a):
        assert pod.Pod.from_stored(m) == pod.Pod.from_manifest(copy.deepcopy(m))
    assert pod.Pod.from_stored(b).requests is pod.Pod.from_stored(a).requests
