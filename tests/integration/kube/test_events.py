"""EventRecorder: core/v1 Events over the cluster interface, aggregated like kubectl shows them."""

from __future__ import annotations

import collections
from typing import Any, cast

import pytest

from karpy.kube import errors, events

from . import builders


def test_publishing_creates_a_core_v1_event_about_the_involved_object() -> None:
    cluster, vclock = builders.new_cluster()
    pod = cluster.create(builders.pod("web-0"))
    vclock.advance(7)
    recorder = events.EventRecorder(cluster, vclock)
    event = recorder.publish(pod, "Warning", "FailedScheduling", "no nodepool fits")
    assert event["apiVersion"] == "v1"
    assert event["kind"] == "Event"
    assert event["metadata"]["namespace"] == "default"
    involved = event["involvedObject"]
    assert (involved["kind"], involved["name"], involved["namespace"]) == ("Pod", "web-0", "default")
    assert involved["uid"] == pod["metadata"]["uid"]
    assert involved["apiVersion"] == "v1"
    assert (event["type"], event["reason"], event["message"]) == (
        "Warning",
        "FailedScheduling",
        "no nodepool fits",
    )
    assert event["source"] == {"component": "karpenter"}
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-01-01T00:00:07Z"
    assert event["count"] == 1


def test_a_duplicate_event_increments_count_and_moves_last_timestamp() -> None:
    cluster, vclock = builders.new_cluster()
    node = cluster.create(builders.node("n1"))
    recorder = events.EventRecorder(cluster, vclock)
    recorder.normal(node, "Unconsolidatable", "pdb prevents disruption")
    vclock.advance(60)
    recorder.normal(node, "Unconsolidatable", "pdb prevents disruption")
    vclock.advance(60)
    recorder.normal(node, "Unconsolidatable", "pdb prevents disruption")
    (event,) = cluster.list("Event")
    assert event["count"] == 3
    assert event["firstTimestamp"] == "2026-01-01T00:00:00Z"
    assert event["lastTimestamp"] == "2026-01-01T00:02:00Z"
    assert event["metadata"]["namespace"] == "default"  # a cluster-scoped object's events


def test_a_different_message_or_reason_is_a_separate_event() -> None:
    cluster, vclock = builders.new_cluster()
    node = cluster.create(builders.node("n1"))
    recorder = events.EventRecorder(cluster, vclock)
    recorder.normal(node, "DisruptionBlocked", "a")
    recorder.normal(node, "DisruptionBlocked", "b")
    recorder.warning(node, "DisruptionBlocked", "a")
    assert len(cluster.list("Event")) == 3
    selector = "involvedObject.name=n1,type=Warning"
    assert len(cluster.list("Event", field_selector=selector)) == 1


def test_a_deleted_event_is_created_again_on_the_next_publish() -> None:
    cluster, vclock = builders.new_cluster()
    node = cluster.create(builders.node("n1"))
    recorder = events.EventRecorder(cluster, vclock)
    first = recorder.normal(node, "Launched", "ok")
    cluster.delete("Event", first["metadata"]["name"], "default")
    second = recorder.normal(node, "Launched", "ok")
    assert second["count"] == 1
    assert len(cluster.list("Event")) == 1


def test_an_unknown_event_type_is_invalid() -> None:
    cluster, vclock = builders.new_cluster()
    recorder = events.EventRecorder(cluster, vclock, component="karpy")
    with pytest.raises(errors.Invalid):
        recorder.publish(builders.node("n1"), "Info", "Reason", "message")


def test_a_recorder_remembers_only_the_most_recent_distinct_events_for_aggregation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "CACHE_SIZE", 2)
    cluster, vclock = builders.new_cluster()
    node = cluster.create(builders.node("n1"))
    recorder = events.EventRecorder(cluster, vclock)
    first = recorder.normal(node, "A", "one")
    vclock.advance(1)
    recorder.normal(node, "B", "two")
    vclock.advance(1)
    assert recorder.normal(node, "A", "one")["count"] == 2  # still remembered: aggregated (and most recent now)
    vclock.advance(1)
    recorder.normal(node, "C", "three")  # B is the least recently used: forgotten
    vclock.advance(1)
    again = recorder.normal(node, "B", "two")
    assert again["count"] == 1  # a fresh Event; A is now the least recently used and goes
    vclock.advance(1)
    assert recorder.normal(node, "C", "three")["count"] == 2
    vclock.advance(1)
    fresh = recorder.normal(node, "A", "one")
    assert fresh["count"] == 1 and fresh["metadata"]["name"] != first["metadata"]["name"]


def test_a_series_writes_one_event_per_object_version_and_counts_a_repeat_once() -> None:
    cluster, vclock = builders.new_cluster()
    pod = cluster.create(builders.pod("web-0"))
    recorder = events.EventRecorder(cluster, vclock, component="default-scheduler")
    first = recorder.series(pod, "Warning", "FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu.")
    assert first is not None and first["count"] == 1
    vclock.advance(1)
    again = recorder.series(pod, "Warning", "FailedScheduling", "0/2 nodes are available: 2 Insufficient cpu.")
    assert again is not None and again["metadata"]["name"] == first["metadata"]["name"] and again["count"] == 2
    assert again["message"] == first["message"]  # the series keeps the first note
    before = cluster.revision
    for _ in range(5):
        assert recorder.series(pod, "Warning", "FailedScheduling", "0/2 nodes are available: 2 Insufficient cpu.") \
            is None
    assert cluster.revision == before
    changed = cluster.patch_status("Pod", "web-0", {"status": {"phase": "Pending"}}, "default")
    fresh = recorder.series(changed, "Warning", "FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu.")
    assert fresh is not None and fresh["metadata"]["name"] != first["metadata"]["name"]
    assert len(cluster.list("Event", "default")) == 2


def test_a_series_is_remembered_for_every_object_until_six_minutes_after_its_last_occurrence() -> None:
    cluster, vclock = builders.new_cluster()
    recorder = events.EventRecorder(cluster, vclock, component="default-scheduler")
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default",
                                                             "uid": f"u{i}", "resourceVersion": "7"}}
            for i in range(events.CACHE_SIZE + 100)]
    for _ in range(3):
        for p in pods:
            recorder.series(p, "Warning", "FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu.")
    stored = cluster.list("Event", "default")
    assert len(stored) == len(pods)
    assert {e["count"] for e in stored} == {2}
    vclock.advance(events.SERIES_FINISH + 1)
    again = recorder.series(pods[0], "Warning", "FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu.")
    assert again is not None and again["count"] == 1
    assert len(cluster.list("Event", "default")) == len(pods) + 1


class _CountingCluster:
    """The in-memory cluster, counting the calls (each would be one API request)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: collections.Counter[str] = collections.Counter()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if not callable(found):
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return found(*args, **kwargs)

        return counted


def test_fifty_draining_nodes_repeating_their_event_cost_a_few_requests_a_second_not_forty() -> None:
    cluster, vclock = builders.new_cluster()
    nodes = [cluster.create(builders.node(f"n{i}")) for i in range(50)]
    counting = _CountingCluster(cluster)
    recorder = events.EventRecorder(cast(Any, counting), vclock)
    seconds = 600
    for _ in range(seconds // 5):  # every node fails to drain, and says so, every 5 s for 10 minutes
        for node in nodes:
            recorder.warning(node, "FailedDraining", "Failed to drain node, 1 pods are waiting to be evicted")
            recorder.normal(node, "DisruptionBlocked", "pdb prevents disruption")
        vclock.advance(5)
    rate = sum(counting.calls.values()) / seconds
    print(f"event requests: {rate:.2f}/s {dict(counting.calls)}")
    assert counting.calls["get"] == 0  # the recorder knows its counts
    assert rate < 4.0, f"{rate:.1f} requests/s ({dict(counting.calls)})"  # before: 40 requests/s (GET + PATCH)
    stored = {e["reason"]: e for e in cluster.list("Event") if e["involvedObject"]["name"] == "n0"}
    assert stored["FailedDraining"]["count"] >= 120 - 6  # within one flush interval of the truth
    assert recorder.flush() == 100
    assert {e["count"] for e in cluster.list("Event")} == {120}
