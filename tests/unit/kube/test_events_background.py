"""Events published through the background recorder: the caller never waits, the events still arrive in
order and aggregated, and a full queue drops (and counts) instead of blocking."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from karpy import clock
from karpy.kube import errors, events, events_background, memory

POD: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "p", "namespace": "default", "uid": "u1"}}


class SlowEvents(memory.InMemoryCluster):
    """Every Event create waits ``delay`` seconds, or until ``gate`` opens."""

    def __init__(self, delay: float = 0.0, gate: threading.Event | None = None) -> None:
        super().__init__(clock.WallClock())
        self.delay = delay
        self.gate = gate
        self.entered = threading.Event()

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("kind") == "Event":
            self.entered.set()
            if self.gate is not None:
                self.gate.wait(10)
            time.sleep(self.delay)
        return super().create(obj)


def pod(i: int) -> dict[str, Any]:
    return {**POD, "metadata": {**POD["metadata"], "name": f"p{i}", "uid": f"u{i}"}}


def test_twenty_events_whose_writes_take_200ms_are_published_without_waiting_and_all_arrive() -> None:
    cluster = SlowEvents(delay=0.2)
    recorder = events_background.BackgroundRecorder(cluster, clock.WallClock())
    started = time.monotonic()
    for i in range(20):
        queued = recorder.publish(pod(i), events.NORMAL, "Nominated", f"pod {i}")
        assert queued["reason"] == "Nominated"
    assert time.monotonic() - started < 0.5  # 20 writes of 200 ms would take 4 s
    assert recorder.close(10.0)
    written = cluster.list("Event", "default")
    assert sorted(e["message"] for e in written) == sorted(f"pod {i}" for i in range(20))
    assert (recorder.written, recorder.dropped, recorder.failed) == (20, 0, 0)


def test_a_full_queue_drops_and_counts_new_events_and_never_blocks() -> None:
    gate = threading.Event()
    cluster = SlowEvents(gate=gate)
    recorder = events_background.BackgroundRecorder(cluster, clock.WallClock(), capacity=2)
    recorder.publish(pod(0), events.NORMAL, "Nominated", "first")
    assert cluster.entered.wait(5)  # the event thread holds the first event in its write
    started = time.monotonic()
    for i in range(1, 10):
        recorder.publish(pod(i), events.NORMAL, "Nominated", f"pod {i}")
    assert time.monotonic() - started < 0.5
    assert recorder.dropped == 7  # two found room in the queue
    gate.set()
    assert recorder.close(10.0)
    assert len(cluster.list("Event", "default")) == 3
    (dropped,) = [m for m in recorder.collector().collect() if m.name == "karpy_events_dropped"]
    assert dropped.samples[0].value == 7


def test_repeats_are_aggregated_by_the_event_thread_and_the_last_count_is_written_on_close() -> None:
    cluster = memory.InMemoryCluster(clock.WallClock())
    recorder = events_background.BackgroundRecorder(cluster, clock.WallClock())
    for _ in range(3):
        recorder.publish(POD, events.WARNING, "FailedScheduling", "no node fits")
    assert recorder.close(5.0)
    (event,) = cluster.list("Event", "default")
    assert event["count"] == 3
    assert event["involvedObject"]["uid"] == "u1"


def test_an_event_the_api_refuses_is_counted_and_the_next_one_is_still_written() -> None:
    class Refusing(memory.InMemoryCluster):
        def create(self, obj: dict[str, Any]) -> dict[str, Any]:
            if obj.get("kind") == "Event" and obj["message"] == "bad":
                raise errors.Forbidden("events are forbidden")
            return super().create(obj)

    cluster = Refusing(clock.WallClock())
    recorder = events_background.BackgroundRecorder(cluster, clock.WallClock())
    recorder.publish(pod(1), events.NORMAL, "Nominated", "bad")
    recorder.publish(pod(2), events.NORMAL, "Nominated", "good")
    assert recorder.close(5.0)
    assert [e["message"] for e in cluster.list("Event", "default")] == ["good"]
    assert (recorder.failed, recorder.written) == (1, 1)


def test_a_bad_event_type_is_refused_at_once_on_the_callers_thread() -> None:
    recorder = events_background.BackgroundRecorder(memory.InMemoryCluster(clock.WallClock()), clock.WallClock())
    with pytest.raises(errors.Invalid, match="found 'Info'"):
        recorder.publish(POD, "Info", "Nominated", "x")
    assert recorder.close(1.0)


def test_an_event_is_stamped_with_the_time_it_was_published_not_written() -> None:
    gate = threading.Event()
    vclock = clock.VirtualClock()
    cluster = SlowEvents(gate=gate)
    recorder = events_background.BackgroundRecorder(cluster, vclock)
    published_at = vclock.now()
    recorder.publish(POD, events.NORMAL, "Nominated", "then")
    vclock.advance(60.0)  # the write happens a minute later
    gate.set()
    assert recorder.close(5.0)
    (event,) = cluster.list("Event", "default")
    assert event["firstTimestamp"] == clock.rfc3339(published_at)
