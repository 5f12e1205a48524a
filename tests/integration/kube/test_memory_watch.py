"""Synchronous, ordered watches on the in-memory cluster."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.kube import interface

from . import builders


def _recorder(log: list[tuple[str, str, str]]) -> interface.WatchHandler:
    def handler(event_type: str, obj: dict[str, Any]) -> None:
        log.append((event_type, obj["kind"], obj["metadata"]["name"]))

    return handler


def test_a_watch_sees_added_modified_and_deleted_in_write_order() -> None:
    cluster, _ = builders.new_cluster()
    log: list[tuple[str, str, str]] = []
    cluster.watch("Node", _recorder(log))
    cluster.create(builders.node("n1"))
    cluster.create(builders.node("n2"))
    cluster.patch("Node", "n1", {"metadata": {"labels": {"a": "1"}}})
    cluster.delete("Node", "n2")
    cluster.create(builders.pod("p"))  # another kind: not delivered
    assert log == [
        ("ADDED", "Node", "n1"),
        ("ADDED", "Node", "n2"),
        ("MODIFIED", "Node", "n1"),
        ("DELETED", "Node", "n2"),
    ]


def test_a_deleted_event_carries_the_last_state_and_a_new_resource_version() -> None:
    cluster, _ = builders.new_cluster()
    seen: list[dict[str, Any]] = []
    cluster.watch("NodeClaim", lambda t, o: seen.append(o) if t == interface.DELETED else None)
    cluster.create({"kind": "NodeClaim", "metadata": {"name": "c", "finalizers": ["f"]}})
    cluster.delete("NodeClaim", "c")
    before = cluster.revision
    cluster.patch("NodeClaim", "c", {"metadata": {"finalizers": None}})
    (deleted,) = seen
    assert interface.is_terminating(deleted)
    assert int(deleted["metadata"]["resourceVersion"]) == before + 1


def test_a_no_op_update_notifies_nobody() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.node("n1"))
    log: list[tuple[str, str, str]] = []
    cluster.watch("Node", _recorder(log))
    cluster.update(cluster.get("Node", "n1"))
    assert log == []


def test_a_handler_that_writes_back_does_not_recurse_and_its_writes_come_after() -> None:
    cluster, _ = builders.new_cluster()
    log: list[tuple[str, str, str]] = []
    depth = [0, 0]  # current, max

    def labeller(event_type: str, obj: dict[str, Any]) -> None:
        depth[0] += 1
        depth[1] = max(depth)
        log.append((event_type, obj["metadata"]["name"], obj["metadata"]["resourceVersion"]))
        if event_type == "ADDED":
            cluster.patch("Node", obj["metadata"]["name"], {"metadata": {"labels": {"seen": "yes"}}})
        depth[0] -= 1

    other: list[tuple[str, str, str]] = []
    cluster.watch("Node", labeller)
    cluster.watch("Node", _recorder(other))
    cluster.create(builders.node("n1"))
    assert depth[1] == 1
    assert [(t, n) for t, n, _ in log] == [("ADDED", "n1"), ("MODIFIED", "n1")]
    assert other == [("ADDED", "Node", "n1"), ("MODIFIED", "Node", "n1")]
    assert cluster.get("Node", "n1")["metadata"]["labels"] == {"seen": "yes"}


def test_unsubscribe_stops_notifications() -> None:
    cluster, _ = builders.new_cluster()
    log: list[tuple[str, str, str]] = []
    stop = cluster.watch("Node", _recorder(log))
    cluster.create(builders.node("n1"))
    stop()
    cluster.create(builders.node("n2"))
    assert log == [("ADDED", "Node", "n1")]


def test_a_star_watch_sees_every_kind() -> None:
    cluster, _ = builders.new_cluster()
    log: list[tuple[str, str, str]] = []
    cluster.watch("*", _recorder(log))
    cluster.create(builders.node("n1"))
    cluster.create(builders.pod("p"))
    assert log == [("ADDED", "Node", "n1"), ("ADDED", "Pod", "p")]


def test_a_failing_handler_does_not_stop_delivery_and_its_error_is_raised_after() -> None:
    cluster, _ = builders.new_cluster()
    log: list[tuple[str, str, str]] = []

    def broken(event_type: str, obj: dict[str, Any]) -> None:
        raise RuntimeError("handler bug")

    cluster.watch("Node", broken)
    cluster.watch("Node", _recorder(log))
    with pytest.raises(RuntimeError, match="handler bug"):
        cluster.create(builders.node("n1"))
    assert log == [("ADDED", "Node", "n1")]
    assert cluster.get("Node", "n1")["metadata"]["name"] == "n1"


def test_garbage_collection_events_follow_the_owner_deletion() -> None:
    cluster, _ = builders.new_cluster()
    rs = cluster.create(builders.replicaset("web", 2))
    builders.owned_pods(cluster, rs, 2)
    log: list[tuple[str, str, str]] = []
    cluster.watch("*", _recorder(log))
    cluster.delete("ReplicaSet", "web", "default")
    assert log == [("DELETED", "ReplicaSet", "web"), ("DELETED", "Pod", "web-0"), ("DELETED", "Pod", "web-1")]
