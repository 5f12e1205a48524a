"""InMemoryCluster.bind: the pods/binding subresource, node and PodScheduled condition in one write."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.kube import errors, interface

from . import builders


def test_binding_sets_the_node_and_the_scheduled_condition_in_one_write() -> None:
    cluster, vclock = builders.new_cluster()
    created = cluster.create(builders.pod("web-0"))
    cluster.patch_status("Pod", "web-0", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/0 nodes"}]}}, "default")
    seen: list[tuple[str, dict[str, Any]]] = []
    cluster.watch("Pod", lambda event, obj: seen.append((event, obj)))
    vclock.advance(5)
    before = cluster.revision
    bound = cluster.bind("web-0", "default", "n1")
    assert cluster.revision == before + 1
    assert [event for event, _ in seen] == [interface.MODIFIED]
    assert seen[0][1] is bound
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["status"]["conditions"] == [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}]
    assert bound["spec"]["containers"] == created["spec"]["containers"]


def test_binding_a_pod_that_is_already_bound_is_a_conflict() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.pod("web-0"))
    cluster.bind("web-0", "default", "n1")
    with pytest.raises(errors.Conflict):
        cluster.bind("web-0", "default", "n2")
    assert cluster.get("Pod", "web-0", "default")["spec"]["nodeName"] == "n1"


def test_binding_a_missing_pod_is_not_found() -> None:
    cluster, _ = builders.new_cluster()
    with pytest.raises(errors.NotFound):
        cluster.bind("ghost", "default", "n1")
