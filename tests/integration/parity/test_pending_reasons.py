"""Issue 12 item 11: why a pod waits, in karpy's words, with its square brackets.

The table's PODS NOT RUNNING shows karpy's per-NodePool explanation of a pending pod (as
``kubectl describe pod`` would show Karpenter's FailedScheduling event) instead of the
kube-scheduler's generic ``0/N nodes are available``, and nothing in a message is taken for rich
markup: ``needs In [s390x]`` prints as it is.
"""

from __future__ import annotations

import io

from karpy.simulator import engine, output

from . import scenarios as sc


def _run() -> engine.Result:
    s390x = sc.deployment("mainframe", 1, pod_spec="nodeSelector: {kubernetes.io/arch: s390x}")
    return sc.run(sc.docs(sc.nodepool(), sc.deployment("web", 1), s390x), until="2m")


def _table(result: engine.Result) -> str:
    buf = io.StringIO()
    output.render_table(result, buf, width=400)
    return buf.getvalue()


def test_a_pending_pod_shows_karpys_explanation_with_its_brackets() -> None:
    result = _run()
    (pending,) = sc.pending(result, "mainframe-")
    event = next(e for e in sc.events(result, "FailedScheduling")
                 if e.get("source") == "karpenter" and e["involvedObject"]["name"] == pending["metadata"]["name"])
    assert "[s390x]" in event["message"]
    text = _table(result)
    row = next(line for line in text.splitlines() if pending["metadata"]["name"] in line and "Pending" in line)
    assert 'NodePool "default"' in row
    assert "In [s390x]" in row
    assert "nodes are available" not in row
    assert event["message"].removeprefix("Failed to schedule pod, ") in row


def test_event_messages_keep_square_brackets_in_the_events_table() -> None:
    text = _table(_run())
    events = [line for line in text.splitlines() if "FailedScheduling" in line]
    assert events and all("[s390x]" in line for line in events)


def test_the_explanation_prefers_karpys_latest_word() -> None:
    evs = [
        {"source": "karpenter", "reason": "FailedScheduling", "time": "2026-01-01T00:00:01Z",
         "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
         "message": "Failed to schedule pod, NodePool \"a\": [old]"},
        {"source": "karpenter", "reason": "Nominated", "time": "2026-01-01T00:00:05Z",
         "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
         "message": "Pod should schedule on: nodeclaim/a-x"},
        {"source": "default-scheduler", "reason": "FailedScheduling", "time": "2026-01-01T00:00:09Z",
         "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"}, "message": "0/1 nodes"},
    ]
    assert output.pending_explanations(evs) == {("default", "p"): "Pod should schedule on: nodeclaim/a-x"}
    assert output.pending_explanations(evs[:1]) == {("default", "p"): 'NodePool "a": [old]'}
