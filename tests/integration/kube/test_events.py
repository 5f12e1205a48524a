"""EventRecorder: core/v1 Events over the cluster interface, aggregated like kubectl shows them."""

from __future__ import annotations

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
