"""Watch filters: a handler that says what it ignores is not called for it (the in-memory cluster)."""

from __future__ import annotations

from typing import Any

from karpy.controllers import runtime
from karpy.kube import interface

from . import builders


def _unschedulable(message: str) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                       "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def test_a_filtered_watch_is_not_called_for_a_status_write_that_only_rewords_a_condition_message() -> None:
    cluster, _ = builders.new_cluster()
    every: list[str] = []
    filtered: list[str] = []
    cluster.watch("Pod", lambda e, o: every.append(e))
    cluster.watch("Pod", interface.Filtered(lambda e, o: filtered.append(e), interface.MESSAGES_ONLY))
    cluster.create(builders.pod("p", phase="Pending", ready=None))
    cluster.patch_status("Pod", "p", _unschedulable("0/1 nodes are available"), "default")
    cluster.patch_status("Pod", "p", _unschedulable("0/2 nodes are available"), "default")
    cluster.patch_status("Pod", "p", _unschedulable("0/3 nodes are available"), "default")
    assert every == ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED"]
    assert filtered == ["ADDED", "MODIFIED"]  # the first mark changed the status; the rewordings did not


def test_a_filtered_watch_still_gets_every_change_outside_what_it_ignores() -> None:
    cluster, _ = builders.new_cluster()
    seen: list[tuple[str, str]] = []
    cluster.watch("Pod", interface.Filtered(lambda e, o: seen.append((e, str(o["status"].get("phase")))),
                                            interface.MESSAGES_ONLY))
    cluster.create(builders.pod("p", phase="Pending", ready=None))
    cluster.patch_status("Pod", "p", _unschedulable("0/1 nodes are available"), "default")
    cluster.patch_status("Pod", "p", {"status": {"phase": "Running"}}, "default")  # status, not a message
    cluster.patch("Pod", "p", {"metadata": {"labels": {"a": "1"}}}, "default")  # metadata
    cluster.patch_status("Pod", "p", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "True", "message": "0/1 nodes are available",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, "default")  # a condition's status
    cluster.delete("Pod", "p", "default")
    assert [e for e, _ in seen] == ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]
    assert seen[2] == ("MODIFIED", "Running")


def test_a_watch_filter_can_ignore_status_writes_and_event_types() -> None:
    cluster, _ = builders.new_cluster()
    seen: list[str] = []
    only = interface.WatchFilter(events=frozenset({interface.ADDED, interface.MODIFIED}),
                                 ignore=frozenset({interface.STATUS}))
    cluster.watch("Pod", interface.Filtered(lambda e, o: seen.append(e), only))
    cluster.create(builders.pod("p", phase="Pending", ready=None))
    cluster.patch_status("Pod", "p", {"status": {"phase": "Running"}}, "default")
    cluster.patch_status("Pod", "p", _unschedulable("reworded"), "default")
    cluster.patch("Pod", "p", {"spec": {"nodeName": "n1"}}, "default")
    cluster.delete("Pod", "p", "default")
    assert seen == ["ADDED", "MODIFIED"]  # the spec write only


def test_changed_parts_names_what_a_write_changed_but_the_resource_version() -> None:
    conditions = [{"type": "PodScheduled", "message": "x"}]
    old: dict[str, Any] = {"metadata": {"name": "p", "resourceVersion": "1"}, "spec": {"a": 1},
                           "status": {"phase": "Pending", "conditions": conditions}}
    reworded = {**old, "metadata": {"name": "p", "resourceVersion": "2"},
                "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "message": "y"}]}}
    assert interface.changed_parts(old, reworded) == {interface.CONDITION_MESSAGES}
    moved = {**old, "status": {"phase": "Running", "conditions": conditions}}
    assert interface.changed_parts(old, moved) == {"status"}
    assert interface.changed_parts(old, {**old, "spec": {"a": 2}}) == {"spec"}
    assert interface.changed_parts(old, {**old, "metadata": {"name": "p", "resourceVersion": "1",
                                                             "labels": {"a": "b"}}}) == {"metadata"}


def test_a_controller_mapper_wrapped_by_only_is_not_called_for_what_it_ignores() -> None:
    cluster, vclock = builders.new_cluster()
    manager = runtime.Manager(cluster, vclock)
    mapped: list[str] = []

    def mapper(event: str, obj: dict[str, Any]) -> list[str]:
        mapped.append(event)
        return [interface.name_of(obj)]

    manager.register(runtime.Controller("c", lambda key: None, [("Pod", runtime.only(mapper))]))
    cluster.create(builders.pod("p", phase="Pending", ready=None))
    cluster.patch_status("Pod", "p", _unschedulable("0/1 nodes are available"), "default")
    cluster.patch_status("Pod", "p", _unschedulable("0/2 nodes are available"), "default")
    assert mapped == ["ADDED", "MODIFIED"]
    assert manager.pending() == 1


def test_stored_returns_the_current_stored_object_or_none() -> None:
    cluster, _ = builders.new_cluster()
    created = cluster.create(builders.node("n1"))
    assert cluster.stored("Node", "n1") is created
    updated = cluster.patch("Node", "n1", {"metadata": {"labels": {"a": "1"}}})
    assert cluster.stored("Node", "n1") is updated is not created
    assert cluster.stored("Node", "n2") is None
    assert cluster.stored("Pod", "n1") is None
