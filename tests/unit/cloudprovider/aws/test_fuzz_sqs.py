"""Hypothesis fuzzing of the SQS interruption queue: every EventBridge body karpy reads, with wrong
types put into each of its fields (and bodies that are not JSON objects at all), is either turned
into notices or counted and deleted; ``receive`` never raises and nothing unparsed stays queued.
Bounded in CI; ``KARPY_FUZZ_EXAMPLES=5000`` for a longer local run."""

from __future__ import annotations

import copy
import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpy import clock
from karpy.cloudprovider.aws import interruption
from support import fuzzing

from .sqs_fake import FakeSession

EXAMPLES = int(os.environ.get("KARPY_FUZZ_EXAMPLES", "150"))
IID = "i-0123456789abcdef0"
STAMP = "2024-11-21T10:00:00Z"
BASES = [interruption.event(IID, kind, STAMP, detail) for kind, detail in
         (("SpotInterruption", ""), ("Rebalance", ""), ("ScheduledChange", ""), ("StateChange", "stopping"))]

JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=10**20, max_value=10**400),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
                         st.sampled_from(["i-", "i-1/2", IID, "aws.ec2", "aws.health", "scheduledChange", "EC2",
                                          interruption.HEALTH, interruption.SPOT_WARNING, "9999-99-99T99:99:99Z"]))
HOSTILE = st.recursive(JSON_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                             st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                       max_leaves=8)


@st.composite
def bodies(draw: st.DrawFn) -> str:
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return json.dumps(draw(HOSTILE))
    if choice == 1:
        depth = draw(st.integers(10, 50_000))
        return "[" * depth + "]" * depth
    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from([p for p in fuzzing.paths(doc) if p] or [("x",)]))
        parent = fuzzing.parent_of(doc, path)
        if draw(st.booleans()):
            parent[path[-1]] = draw(HOSTILE)
        elif isinstance(parent, dict):
            del parent[path[-1]]
    return json.dumps(doc)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(bodies(), min_size=1, max_size=4))
def test_any_body_becomes_notices_or_is_counted_and_deleted_and_receive_never_raises(texts: list[str]) -> None:
    sess = FakeSession()
    receipts = [sess.sqs.put(t) for t in texts]
    queue = interruption.SQSQueue(sess, "https://sqs/q", clock.VirtualClock(), wait_seconds=0)  # type: ignore[arg-type]
    pending = queue.pending_interruptions()
    for m in pending:
        assert m.provider_id == f"aws:///us-east-1a/{m.provider_id.rsplit('/', 1)[-1]}"
        assert interruption.INSTANCE_ID.fullmatch(m.provider_id.rsplit("/", 1)[-1])
    kept = set(sess.sqs.messages)
    assert len(kept) <= len(pending)  # what is still queued carries a notice
    assert queue.malformed <= len(receipts)
    for m in pending:
        queue.ack(m)
    assert sess.sqs.messages == {}
