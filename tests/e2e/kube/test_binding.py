"""``Cluster.bind`` (the Pod ``binding`` subresource), run against the in-memory cluster AND the adapter over
HTTP to the emulated API server (a POST of a v1 Binding): the same test, the same expected behaviour."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.kube import errors, interface

from .conftest import Harness


def pending_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/0 nodes"}]},
    }


def test_bind_assigns_the_node_and_sets_pod_scheduled_in_one_write(harness: Harness) -> None:
    c = harness.cluster
    c.create(pending_pod("web-0"))
    c.patch_status("Pod", "web-0", {"status": pending_pod("web-0")["status"]})
    before = c.get("Pod", "web-0")["metadata"]["resourceVersion"]
    writes: list[str] = []
    harness.other.watch("Pod", lambda event, obj: writes.append(event))
    bound = c.bind("web-0", "default", "n1")
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["metadata"]["resourceVersion"] != before
    conditions = bound["status"]["conditions"]
    assert [(x["type"], x["status"]) for x in conditions] == [("PodScheduled", "True")]
    assert writes == [interface.MODIFIED]
    assert c.get("Pod", "web-0")["spec"]["nodeName"] == "n1"  # read-your-writes on the adapter too
    assert harness.other.get("Pod", "web-0", "default")["spec"]["nodeName"] == "n1"


def test_binding_a_bound_pod_is_a_conflict_and_a_missing_pod_is_not_found(harness: Harness) -> None:
    c = harness.cluster
    c.create(pending_pod("web-0"))
    c.bind("web-0", "default", "n1")
    with pytest.raises(errors.Conflict):
        c.bind("web-0", "default", "n2")
    assert harness.other.get("Pod", "web-0", "default")["spec"]["nodeName"] == "n1"
    with pytest.raises(errors.NotFound):
        c.bind("ghost", "default", "n1")
