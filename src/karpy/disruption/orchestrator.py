"""The disruption command queue: pre-spin replacements, wait for them, then delete the candidates.

Karpenter v1's orchestration (``concepts/disruption``, "Disruption Controller", steps 3 to 6) for
commands the disruption controller has already validated
(:class:`karpy.disruption.consolidation.Command`). :meth:`Orchestrator.execute` starts one:

1. every candidate Node gets the ``karpenter.sh/disrupted:NoSchedule`` taint, so nothing new
   schedules there;
2. each replacement (:class:`karpy.provisioning.results.NewNodeClaim`) becomes a NodeClaim
   (:func:`karpy.controllers.nodeclaim_manifest.nodeclaim_manifest`), with Normal events
   ``DisruptionLaunching`` ("Launching NodeClaim: <Reason>") and ``DisruptionWaitingReadiness``
   ("Waiting on readiness to continue disruption") on it, counted in
   ``karpenter_nodeclaims_created_total{reason=<reason>}``;
3. the decision is counted in ``karpenter_voluntary_disruption_decisions_total{decision,
   reason, consolidation_type}``;
4. a command without replacements deletes its candidates at once.

:meth:`Orchestrator.reconcile` (call it every few seconds while :meth:`Orchestrator.busy`)
moves each queued command on: once every replacement is ``Initialized`` the candidate NodeClaims
are deleted (the termination controller drains them) with Normal ``DisruptionTerminating``
("Disrupting Node: <Method>/<Decision>", e.g. ``Consolidation/Replace``, ``Drift/Replace``,
``Empty/Delete``) on the Node and the NodeClaim, counted in
``karpenter_nodeclaims_disrupted_total{reason}``. If a replacement disappears (deleted, failed to
launch) or is not initialized within :data:`REPLACEMENT_TIMEOUT`, the other replacements are
deleted, the candidates untainted and the command dropped. A command whose candidates were deleted
stays queued until their NodeClaims are gone, so that its replacements are not mistaken for empty
nodes while the pods move over (:meth:`Orchestrator.protected_claims`).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as clock_mod
from karpy.api import errors as api_errors
from karpy.api import labels as wk
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import nodepool as nodepool_mod
from karpy.controllers import nodeclaim_manifest
from karpy.disruption import consolidation
from karpy.kube import errors as kube_errors
from karpy.kube import events, interface
from karpy.observability import logs
from karpy.observability import metrics as metrics_mod

log = logging.getLogger("karpy.disruption.orchestrator")

REPLACEMENT_TIMEOUT = 600.0
"""Seconds a replacement has to become Initialized before the command is abandoned."""
TERMINATION_TRACKING = 3600.0
"""Seconds a command whose candidates were deleted is kept, at most, waiting for them to go."""
POLL = 5.0
TAINT_ATTEMPTS = 5
"""Reads and writes of a node's taints before giving up when other writers keep changing it (409s)."""
DISRUPTED_TAINT = {"key": wk.TAINT_DISRUPTED, "effect": "NoSchedule"}

METHOD_NAMES = {
    consolidation.REASON_UNDERUTILIZED: "Consolidation",
    consolidation.REASON_EMPTY: "Empty",
    consolidation.REASON_DRIFTED: "Drift",
    consolidation.REASON_EXPIRED: "Expiration",
}

REASON_TERMINATING = "DisruptionTerminating"
REASON_LAUNCHING = "DisruptionLaunching"
REASON_WAITING = "DisruptionWaitingReadiness"

NodeClassHash = Callable[[nodepool_mod.NodePool], "tuple[str, str] | None"]


def snake(reason: str) -> str:
    """``Underutilized`` -> ``underutilized`` (metric label values)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", reason).lower()


def event_reason(reason: str, pool: nodepool_mod.NodePool) -> str:
    """The method an event names: an empty node of a ``WhenEmptyOrUnderutilized`` NodePool is
    reported as consolidation (``Consolidation/Delete``), as Karpenter reported it for
    ``WhenUnderutilized`` before v1 and as AKS Node Auto-Provisioning users see it; a
    ``WhenEmpty`` NodePool's empty node stays ``Empty/Delete``. Budgets still count it as Empty."""
    if reason == consolidation.REASON_EMPTY and \
            pool.disruption.consolidation_policy == nodepool_mod.WHEN_EMPTY_OR_UNDERUTILIZED:
        return consolidation.REASON_UNDERUTILIZED
    return reason


def terminating_message(reason: str, decision: str) -> str:
    """``Disrupting Node: Consolidation/Delete`` and the like."""
    return f"Disrupting Node: {METHOD_NAMES.get(reason, reason)}/{decision}"


@dataclass
class Entry:
    """One command in the queue."""

    command: consolidation.Command
    consolidation_type: str
    replacements: list[str]
    """Names of the NodeClaims created for the command's replacements."""
    started: float
    deadline: float
    candidates_deleted: bool = False
    deleted_at: float | None = None
    outcome: str = ""

    @property
    def candidate_names(self) -> list[str]:
        return [c.name for c in self.command.candidates]


@dataclass
class History:
    """What became of the commands (for tests, the simulator's report and the benchmark)."""

    executed: list[Entry] = field(default_factory=list)
    failed: list[tuple[Entry, str]] = field(default_factory=list)


class Orchestrator:
    """See the module docstring."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock, recorder: events.EventRecorder,
                 metrics: metrics_mod.Metrics | None = None, nodeclass_hash: NodeClassHash | None = None,
                 *, timeout: float = REPLACEMENT_TIMEOUT) -> None:
        self.cluster = cluster
        self.clock = clock
        self.recorder = recorder
        self.metrics = metrics
        self.nodeclass_hash = nodeclass_hash
        self.timeout = timeout
        self.entries: list[Entry] = []
        self.history = History()

    # --------------------------------------------------------------------------------- queries

    def busy(self) -> bool:
        """Something is queued (poll :meth:`reconcile`)."""
        return bool(self.entries)

    def waiting(self) -> bool:
        """A command is still waiting for its replacements (no new command should start)."""
        return any(not e.candidates_deleted for e in self.entries)

    def candidate_nodes(self) -> set[str]:
        return {name for e in self.entries for name in e.candidate_names}

    def protected_claims(self) -> set[str]:
        """Replacement NodeClaims of queued commands: not to be disrupted themselves yet."""
        return {name for e in self.entries for name in e.replacements}

    # -------------------------------------------------------------------------------- starting

    def execute(self, command: consolidation.Command, consolidation_type: str = "") -> Entry | None:
        """Taint, pre-spin and queue ``command``; ``None`` when it could not be started."""
        now = self.clock.now()
        entry = Entry(command, consolidation_type, [], now, now + self.timeout)
        tainted: list[str] = []
        for c in command.candidates:
            if not self._taint(c.name, add=True):
                log.info("disruption: node %s vanished; dropping the %s command", c.name, command.reason)
                self._untaint_all(tainted)
                return None
            tainted.append(c.name)
        for replacement in command.replacements:
            name = self._launch(replacement, command.reason)
            if name is None:
                self._abandon(entry, "a replacement NodeClaim could not be created", record=False)
                return None
            entry.replacements.append(name)
        if self.metrics is not None:
            self.metrics.disruption_decisions.labels(
                decision=command.method.lower(), reason=snake(command.reason),
                consolidation_type=consolidation_type).inc()
            for pool_name in sorted({c.nodepool.name for c in command.candidates}):
                self.metrics.disruption_decisions_by_nodepool.labels(
                    nodepool=pool_name, decision=command.method.lower(), reason=snake(command.reason),
                    consolidation_type=consolidation_type).inc()
        log.info("disrupting node(s)",
                 extra=logs.fields("disruption", **command_log_values(command, entry.replacements)))
        self.entries.append(entry)
        if not entry.replacements:
            self._delete_candidates(entry)
        return entry

    def _launch(self, replacement: Any, reason: str) -> str | None:
        try:
            pool_obj = self.cluster.get("NodePool", replacement.nodepool)
            pool = nodepool_mod.NodePool.from_manifest(pool_obj)
        except (kube_errors.KubeError, api_errors.ValidationError) as exc:
            log.warning("disruption: NodePool %s of a replacement is not readable: %s", replacement.nodepool, exc)
            return None
        hashed = self.nodeclass_hash(pool) if self.nodeclass_hash is not None else None
        try:
            created = self.cluster.create(nodeclaim_manifest.nodeclaim_manifest(replacement, pool, pool_obj, hashed))
        except kube_errors.KubeError as exc:
            log.warning("disruption: cannot create a replacement NodeClaim of NodePool %s: %s", pool.name, exc)
            return None
        if self.metrics is not None:
            self.metrics.nodeclaims_created.labels(snake(reason), pool.name, "false").inc()
        self.recorder.normal(created, REASON_LAUNCHING, f"Launching NodeClaim: {reason}")
        self.recorder.normal(created, REASON_WAITING, "Waiting on readiness to continue disruption")
        return interface.name_of(created)

    # ------------------------------------------------------------------------------- advancing

    def reconcile(self) -> float | None:
        """Move every queued command on; returns when to look again (``None`` when idle)."""
        now = self.clock.now()
        for entry in list(self.entries):
            if entry.candidates_deleted:
                self._forget_when_gone(entry, now)
                continue
            problem = self._replacement_problem(entry)
            if problem is None:
                self._delete_candidates(entry)
            elif problem != "":
                self._abandon(entry, problem)
            elif now >= entry.deadline:
                self._abandon(entry, f"replacements not initialized within {self.timeout:.0f}s")
        return POLL if self.entries else None

    def _replacement_problem(self, entry: Entry) -> str | None:
        """``None``: all initialized; ``""``: still waiting; else what went wrong."""
        waiting = False
        for name in entry.replacements:
            try:
                obj = self.cluster.get("NodeClaim", name)
            except kube_errors.NotFound:
                return f"replacement NodeClaim {name} was deleted"
            if interface.is_terminating(obj):
                return f"replacement NodeClaim {name} is being deleted"
            if not _condition_true(obj, nodeclaim_mod.INITIALIZED):
                waiting = True
        return "" if waiting else None

    def _delete_candidates(self, entry: Entry) -> None:
        cmd = entry.command
        for c in cmd.candidates:
            message = terminating_message(event_reason(cmd.reason, c.nodepool), cmd.method)
            try:
                claim_obj = self.cluster.get("NodeClaim", c.nodeclaim.name)
                self.cluster.delete("NodeClaim", c.nodeclaim.name)
            except kube_errors.NotFound:
                continue
            try:
                node_obj: dict[str, Any] | None = self.cluster.get("Node", c.name)
            except kube_errors.NotFound:
                node_obj = None
            if node_obj is not None:
                self.recorder.normal(node_obj, REASON_TERMINATING, message)
            self.recorder.normal(claim_obj, REASON_TERMINATING, message)
            if self.metrics is not None:
                self.metrics.nodeclaims_disrupted.labels(
                    reason=snake(cmd.reason), nodepool=c.nodepool.name,
                    capacity_type=c.nodeclaim.labels.get(wk.CAPACITY_TYPE, "")).inc()
        entry.candidates_deleted = True
        entry.deleted_at = self.clock.now()
        entry.outcome = "executed"
        self.history.executed.append(entry)
        log.info("disruption: deleting %s (%s/%s)", ", ".join(entry.candidate_names), cmd.reason, cmd.method)

    def _forget_when_gone(self, entry: Entry, now: float) -> None:
        for c in entry.command.candidates:
            try:
                self.cluster.get("NodeClaim", c.nodeclaim.name)
            except kube_errors.NotFound:
                continue
            if entry.deleted_at is not None and now - entry.deleted_at > TERMINATION_TRACKING:
                break
            return
        self.entries.remove(entry)

    def _abandon(self, entry: Entry, why: str, *, record: bool = True) -> None:
        for name in entry.replacements:
            with contextlib.suppress(kube_errors.NotFound):
                self.cluster.delete("NodeClaim", name)
        self._untaint_all(entry.candidate_names)
        if entry in self.entries:
            self.entries.remove(entry)
        entry.outcome = why
        if record:
            self.history.failed.append((entry, why))
        if self.metrics is not None:
            self.metrics.disruption_queue_failures.labels(
                decision=entry.command.method.lower(), reason=snake(entry.command.reason),
                consolidation_type=entry.consolidation_type).inc()
        log.warning("disruption: abandoning %s command for %s: %s; replacements deleted, candidates untainted",
                    entry.command.reason, ", ".join(entry.candidate_names), why)

    # ---------------------------------------------------------------------------------- taints

    def _untaint_all(self, names: list[str]) -> None:
        for name in names:
            self._taint(name, add=False)

    def _taint(self, node_name: str, *, add: bool) -> bool:
        """Add or remove the disrupted taint; False when the node is gone (or kept changing).

        The taint list is written whole, so the write carries the ``resourceVersion`` it was read at
        (Karpenter's optimistic lock): a taint another controller added meanwhile (the
        cloud-controller-manager's ``uninitialized``, a CNI's not-ready, node lifecycle) makes it a
        409, and the node is read again and the change made again on top of it."""
        for _ in range(TAINT_ATTEMPTS):
            try:
                obj = self.cluster.get("Node", node_name)
            except kube_errors.NotFound:
                return False
            taints = [dict(t) for t in ((obj.get("spec") or {}).get("taints") or [])]
            present = any(t.get("key") == wk.TAINT_DISRUPTED for t in taints)
            if add and present:
                return True
            if add:
                taints.append(dict(DISRUPTED_TAINT))
            elif present:
                taints = [t for t in taints if t.get("key") != wk.TAINT_DISRUPTED]
            else:
                return True
            patch = {"metadata": {"resourceVersion": obj["metadata"].get("resourceVersion")},
                     "spec": {"taints": taints}}
            try:
                self.cluster.patch("Node", node_name, patch)
            except kube_errors.NotFound:
                return False
            except kube_errors.Conflict:
                continue  # written meanwhile: read it again
            return True
        log.warning("disruption: node %s kept changing; its disrupted taint was not %s", node_name,
                    "added" if add else "removed")
        return False


def _condition_true(obj: dict[str, Any], type_: str) -> bool:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return bool(c.get("status") == "True")
    return False


def command_log_values(command: consolidation.Command, replacements: list[str]) -> dict[str, Any]:
    """The fields of Karpenter's "disrupting node(s)" line (``Command.LogValues``)."""
    disrupted = [{"Node": logs.ref(c.name), "NodeClaim": logs.ref(c.nodeclaim.name),
                  "instance-type": c.node.labels.get(wk.INSTANCE_TYPE, ""),
                  "capacity-type": c.node.labels.get(wk.CAPACITY_TYPE, "")} for c in command.candidates]
    replacing: list[dict[str, Any]] = []
    for r, name in zip(command.replacements, replacements, strict=False):
        spot = wk.CAPACITY_TYPE in r.requirements and r.requirements[wk.CAPACITY_TYPE].has(wk.CAPACITY_TYPE_SPOT)
        item: dict[str, Any] = {"NodeClaim": logs.ref(name), "capacity-type": "spot" if spot else "on-demand"}
        if len(command.replacements) == 1:
            item["instance-types"] = logs.pretty_slice(r.instance_type_names())
        replacing.append(item)
    return {"command": command.explanation, "decision": command.method.lower(), "reason": command.reason,
            "disrupted-node-count": len(disrupted), "replacement-node-count": len(command.replacements),
            "pod-count": sum(len([p for p in c.pods if not p.is_daemonset_pod]) for c in command.candidates),
            "disrupted-nodes": disrupted, "replacement-nodes": replacing}
