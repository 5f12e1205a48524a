"""Karpenter v1.14's ``ConsolidationCandidate`` and ``ConsolidationRejected`` events through the disruption
controller on the simulated cluster. Expectations from ``disruption/events/events.go`` and ``types.go``
(``EmitCandidateEvents`` for every command computed, ``EmitRejectedEvents`` with
``getValidationFailureReason`` when validation fails: a candidate that changed is ``churn``), messages
``Consolidation candidate: <command> (savings: $x.xx)`` and ``Consolidation rejected: <command>, reason:
<reason> (savings: $x.xx)`` on the Node and the NodeClaim.
"""

from __future__ import annotations

from karpy.disruption import consolidation_events as ce
from karpy.disruption import observation

from .test_consolidation import NODECLASS, TWO_TYPES, Run, build, deployment, nodepool, scale


def test_a_command_dropped_at_validation_publishes_consolidation_candidate_then_rejected_with_reason_churn(
        ) -> None:
    pool = nodepool(TWO_TYPES, disruption_={"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                            "consolidateAfter": "30s"})
    run = Run(build([NODECLASS, pool, deployment("a", 3, "1000m"), deployment("b", 0, "1000m")],
                    [scale("2m", "b", 3), scale("5m", "a", 1), scale("5m", "b", 1)]))
    assert run.run_until(900, lambda r: r.ctrl.pending is not None)
    assert run.ctrl.pending is not None
    cmd = run.ctrl.pending.command
    node = cmd.candidates[0].name
    command = ce.for_node(cmd.names, len(cmd.replacements), node)
    assert f"Consolidation candidate: {command} (savings: ${cmd.savings_per_hour:.2f})" in \
        run.messages(ce.CANDIDATE) and run.messages(ce.CANDIDATE, "NodeClaim")
    assert run.messages(ce.REJECTED) == []
    run.sim.cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late", "namespace": "default"},
                            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "c"}]},
                            "status": {"phase": "Running"}})
    run.run_until(run.t + 16)
    rejected = f"Consolidation rejected: {command}, reason: churn (savings: ${cmd.savings_per_hour:.2f})"
    assert [m for m in run.messages(ce.REJECTED) if node in m] == [rejected]
    assert [m for m in run.messages(ce.REJECTED, "NodeClaim") if node in m] == [rejected]


def test_a_command_string_is_karpenters_string_for_node() -> None:
    assert ce.for_node(["a"], 0, "a") == "delete: [a]"
    assert ce.for_node(["a"], 1, "a") == "replace: [a] -> [1 replacement]"
    assert ce.for_node(["a"], 2, "a") == "replace: [a] -> [2 replacements]"
    assert ce.for_node(["a", "b", "c"], 0, "b") == "delete: [b] (part of 3-node consolidation)"
    assert ce.for_node(["a", "b"], 1, "a") == "replace: [a] (part of 2-node consolidation)"
    assert ce.rejected_message(["a"], 0, "a", "budget", 0.5) == (
        "Consolidation rejected: delete: [a], reason: budget (savings: $0.50)")


def test_an_event_with_the_same_dedupe_values_is_published_at_most_once_per_two_minutes() -> None:
    """Karpenter's recorder: one event per reason and dedupe values per ``defaultDedupeTimeout`` (2 min)."""
    observer = observation.Observer.__new__(observation.Observer)
    observer._published = {}
    key = (ce.CANDIDATE, "Node", "n1", "delete: [n1]")
    assert observer._fresh(key, 0.0)
    assert not observer._fresh(key, 119.0)
    assert observer._fresh((ce.CANDIDATE, "Node", "n2", "delete: [n2]"), 119.0)
    assert observer._fresh(key, 120.0)
