"""Karpenter v1.14's consolidation events (``disruption/events/events.go``, ``types.go``), same reasons and
messages so users' greps work:

* ``ConsolidationCandidate`` on the Node and NodeClaim of every candidate of every consolidation command
  computed (before the ``Balanced`` score, so a refused move has one too): ``Consolidation candidate:
  <command> (savings: $<per hour>)``;
* ``ConsolidationRejected`` on each candidate of a queued command that failed its validation:
  ``Consolidation rejected: <command>, reason: <budget|scheduling|churn> (savings: $<per hour>)``;
* ``ConsolidationApproved`` for a move a ``Balanced`` NodePool approved (:mod:`karpy.disruption.balanced`).

Each is deduplicated as Karpenter's recorder does (two minutes per node and command;
``ConsolidationApproved`` per node whatever its message). ``<command>`` is Karpenter's
``Command.StringForNode``: ``delete: [node]`` or ``replace: [node] -> [1 replacement]`` for one node,
``delete: [node] (part of 3-node consolidation)`` for each node of several.
"""

from __future__ import annotations

from collections.abc import Sequence

from karpy.disruption import balanced, consolidation, observation

CANDIDATE = "ConsolidationCandidate"
REJECTED = "ConsolidationRejected"


def for_node(names: Sequence[str], replacements: int, node: str) -> str:
    """Karpenter's ``StringForNode`` of a command removing ``names`` with ``replacements`` new nodes."""
    decision = "replace" if replacements else "delete"
    if len(names) > 1:
        return f"{decision}: [{node}] (part of {len(names)}-node consolidation)"
    if replacements:
        return f"{decision}: [{node}] -> [{replacements} {'replacement' if replacements == 1 else 'replacements'}]"
    return f"{decision}: [{node}]"


def candidate_message(names: Sequence[str], replacements: int, node: str, savings: float) -> str:
    return f"Consolidation candidate: {for_node(names, replacements, node)} (savings: ${savings:.2f})"


def rejected_message(names: Sequence[str], replacements: int, node: str, reason: str, savings: float) -> str:
    return f"Consolidation rejected: {for_node(names, replacements, node)}, reason: {reason} (savings: ${savings:.2f})"


def publish_candidates(observer: observation.Observer, obs: observation.Observation,
                       moves: Sequence[balanced.Move]) -> None:
    """``ConsolidationCandidate`` for every candidate of every move computed."""
    for m in moves:
        for c in m.candidates:
            command = for_node(m.names, m.replacements, c.name)
            observer.on_node(obs, c.name, CANDIDATE, candidate_message(m.names, m.replacements, c.name, m.savings),
                             (command,))


def publish_rejected(observer: observation.Observer, obs: observation.Observation, cmd: consolidation.Command,
                     reason: str) -> None:
    """``ConsolidationRejected`` for every candidate of ``cmd``, which failed validation for ``reason``."""
    for name in cmd.names:
        command = for_node(cmd.names, len(cmd.replacements), name)
        observer.on_node(obs, name, REJECTED,
                         rejected_message(cmd.names, len(cmd.replacements), name, reason, cmd.savings_per_hour),
                         (command, reason))
