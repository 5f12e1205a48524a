"""The SQS interruption queue against hostile messages and a failing receive: every message that
cannot be parsed is counted, logged and deleted; the poller survives any exception and says it is
alive (and the interruption controller exports that as metrics)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from karpy import clock
from karpy.cloudprovider import interface
from karpy.cloudprovider.aws import interruption
from karpy.controllers import interruption as interruption_controller
from karpy.kube import events, memory
from karpy.observability import metrics as metrics_mod

from .sqs_fake import FakeSession

URL = "https://sqs.us-east-1.amazonaws.com/1/q"
STAMP = "2024-11-21T10:00:00Z"


def _queue(sess: FakeSession, wait_seconds: int = 0) -> interruption.SQSQueue:
    return interruption.SQSQueue(sess, URL, clock.VirtualClock(), wait_seconds=wait_seconds,  # type: ignore[arg-type]
                                 backoff=(0.01, 0.02))


def _health(**detail: Any) -> str:
    return json.dumps({"source": "aws.health", "detail-type": interruption.HEALTH, "time": STAMP,
                       "detail": {"service": "EC2", "eventTypeCategory": "scheduledChange", **detail}})


POISON = [
    _health(affectedEntities=5),
    _health(affectedEntities="i-0123456789abcdef0"),
    _health(affectedEntities={"entityValue": "i-1"}),
    "[" * 100_000 + "]" * 100_000,
    json.dumps({"source": "aws.ec2", "detail-type": interruption.SPOT_WARNING, "detail": {"instance-id": 5}}),
    json.dumps({"source": "aws.ec2", "detail-type": interruption.REBALANCE, "detail": {"instance-id": ["i-1"]}}),
    json.dumps({"source": "aws.ec2", "detail-type": interruption.SPOT_WARNING,
                "detail": {"instance-id": "../../i-1"}}),
    json.dumps([1, 2]),
    json.dumps("text"),
    json.dumps({"source": ["aws.ec2"], "detail-type": {}, "detail": {}}),
    json.dumps({"source": "aws.ec2", "detail-type": interruption.REBALANCE, "detail": "x"}),
    "x" * (interruption.MAX_BODY + 1),
    "not json",
]


def test_every_message_that_cannot_be_parsed_is_counted_and_deleted_and_the_good_one_kept() -> None:
    sess = FakeSession()
    for body in POISON:
        sess.sqs.put(body)
    good = sess.sqs.put(json.dumps(interruption.event("i-0123456789abcdef0", "Rebalance", STAMP)))
    queue = _queue(sess)
    pending = [queue.pending_interruptions() for _ in range(3)][-1]  # ten messages per receive
    assert [(m.kind, m.provider_id) for m in pending] == [("Rebalance", "aws:///us-east-1a/i-0123456789abcdef0")]
    assert queue.malformed == len(POISON)
    assert list(sess.sqs.messages) == [good]
    assert queue.queue_health() == interface.QueueHealth(True, len(POISON), 0, None)


def test_a_non_string_instance_id_is_malformed_and_never_becomes_a_provider_id() -> None:
    sess = FakeSession()
    sess.sqs.put(json.dumps({"source": "aws.ec2", "detail-type": interruption.STATE_CHANGE,
                             "detail": {"instance-id": 12345, "state": "terminated"}}))
    queue = _queue(sess)
    assert queue.pending_interruptions() == []
    assert queue.malformed == 1 and sess.sqs.messages == {}


def test_a_message_without_a_receipt_handle_is_counted_and_skipped() -> None:
    sess = FakeSession()
    sess.sqs.messages["x"] = {"MessageId": "m-x", "Body": "{}"}
    queue = _queue(sess)
    assert queue.pending_interruptions() == [] and queue.malformed == 1


def _wait_for(predicate: Any, seconds: float = 10.0) -> bool:
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_the_poller_survives_any_exception_backs_off_and_receives_again() -> None:
    sess = FakeSession()
    sess.sqs.fail_next = [RuntimeError("boom"), KeyError("x"), RecursionError("deep")]
    sess.sqs.put(json.dumps(interruption.event("i-0123456789abcdef0", "SpotInterruption", STAMP)))
    queue = _queue(sess, wait_seconds=1)
    try:
        queue.pending_interruptions()
        assert _wait_for(lambda: bool(queue.pending_interruptions()))
        health = queue.queue_health()
        assert health.alive and health.restarts == 3 and health.last_receive is not None
    finally:
        queue.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_poller_thread_that_died_is_started_again_on_the_next_call() -> None:
    sess = FakeSession()
    sess.sqs.fail_next = [SystemExit(1)]  # not an Exception: the thread ends
    queue = _queue(sess, wait_seconds=1)
    try:
        queue.pending_interruptions()
        assert _wait_for(lambda: not queue.queue_health().alive)
        sess.sqs.put(json.dumps(interruption.event("i-0123456789abcdef0", "Rebalance", STAMP)))
        queue.pending_interruptions()
        assert _wait_for(lambda: bool(queue.pending_interruptions()))
        assert queue.queue_health().alive and queue.restarts == 1
    finally:
        queue.close()


class _Cloud:
    def __init__(self, queue: interruption.SQSQueue) -> None:
        self.queue = queue

    def pending_interruptions(self) -> list[interface.InterruptionMessage]:
        return self.queue.pending_interruptions()

    def ack(self, message: interface.InterruptionMessage) -> None:
        self.queue.ack(message)

    def queue_health(self) -> interface.QueueHealth:
        return self.queue.queue_health()


def test_the_interruption_controller_exports_the_poller_alive_and_the_malformed_count() -> None:
    from karpy.controllers import state

    sess = FakeSession()
    for body in POISON[:3]:
        sess.sqs.put(body)
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    metrics = metrics_mod.Metrics()
    ctl = interruption_controller.Interruption(cluster, state.ClusterState(cluster), _Cloud(_queue(sess)), vclock,
                                               events.EventRecorder(cluster, vclock), metrics)
    ctl.reconcile(interruption_controller.KEY)
    ctl.reconcile(interruption_controller.KEY)
    assert metrics.value("karpy_interruption_poller_alive") == 1.0
    sess.sqs.put(POISON[3])
    ctl.reconcile(interruption_controller.KEY)
    ctl.reconcile(interruption_controller.KEY)
    assert metrics.value("karpy_interruption_malformed_messages_total") == 4.0
