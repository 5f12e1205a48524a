"""Interruption: act on the cloud's notices before the instance disappears.

Like Karpenter's interruption controller (which reads an SQS queue fed by EventBridge on AWS),
this controller polls a cloud provider that also implements
:class:`karpy.cloudprovider.interface.InterruptionQueue`. For each message it finds the NodeClaim
by provider ID and:

- ``SpotInterruption`` (two minutes' warning), ``ScheduledChange`` (maintenance) and a
  ``StateChange`` to stopping/stopped/shutting-down/terminated: records an event on the Node and
  NodeClaim (``SpotInterrupted``, ``InstanceUnhealthy``, ``InstanceStopping`` or
  ``InstanceTerminating``) and deletes the NodeClaim, so that the termination controller taints,
  drains through the Eviction API and the provisioner replaces the capacity at once;
- ``Rebalance``: records ``SpotRebalanceRecommendation`` only (Karpenter does not act on it).

Every message is acknowledged once handled, including messages for instances karpy does not
know (they are not ours to act on). A provider without a queue makes this controller a no-op. A
queue that reports its health (``queue_health()``, :class:`karpy.cloudprovider.interface.QueueHealth`)
has it exported on every pass: ``karpy_interruption_poller_alive``,
``karpy_interruption_malformed_messages`` and ``karpy_interruption_poller_restarts``.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from karpy import clock as clock_mod
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import runtime, state
from karpy.kube import errors as kube_errors
from karpy.kube import events
from karpy.kube import interface as kube_interface
from karpy.observability import metrics as metrics_mod

NAME = "interruption"
KEY = "queue"
INTERVAL = 1.0
log = logging.getLogger("karpy.controllers.interruption")

ACTIONS: dict[str, tuple[str, str]] = {
    "SpotInterruption": ("SpotInterrupted", "Spot interruption warning was triggered"),
    "ScheduledChange": ("InstanceUnhealthy", "An unhealthy warning was triggered for the instance"),
    "stopping": ("InstanceStopping", "Instance is stopping"),
    "stopped": ("InstanceStopping", "Instance is stopping"),
    "shutting-down": ("InstanceTerminating", "Instance is terminating"),
    "terminated": ("InstanceTerminating", "Instance is terminating"),
}

KINDS = {"SpotInterruption": "spot_interrupted", "ScheduledChange": "scheduled_change",
         "Rebalance": "rebalance_recommendation", "stopping": "instance_stopped", "stopped": "instance_stopped",
         "shutting-down": "instance_terminated", "terminated": "instance_terminated"}
"""Karpenter's message kinds (``messages.Kind``): the ``message_type`` and ``reason`` label values."""


def metric_kind(msg: cp_interface.InterruptionMessage) -> str:
    """Karpenter's kind of ``msg`` (a StateChange by its new state); ``no_op`` when it has none."""
    return KINDS.get(msg.detail if msg.kind == "StateChange" else msg.kind, "no_op")


class Interruption:
    """Consumes interruption messages and deletes the NodeClaims they concern."""

    def __init__(self, cluster: kube_interface.Cluster, cluster_state: state.ClusterState,
                 cloud: object, clock: clock_mod.Clock, recorder: events.EventRecorder,
                 metrics: metrics_mod.Metrics) -> None:
        self.cluster = cluster
        self.state = cluster_state
        self.queue: cp_interface.InterruptionQueue | None = (
            cloud if callable(getattr(cloud, "pending_interruptions", None)) else None)  # type: ignore[assignment]
        self.clock = clock
        self.recorder = recorder
        self.metrics = metrics
        self.handled: list[tuple[str, str, str]] = []
        """(kind, provider id, action) of every message handled, for reports and tests."""
        self._seen = (0, 0)
        """(malformed, restarts) of the queue already counted in the metrics."""

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [])

    def reconcile(self, key: str) -> float | None:
        if self.queue is None:
            return None
        self._report_health()
        for msg in list(self.queue.pending_interruptions()):
            try:
                self.metrics.interruption_received.labels(message_type=metric_kind(msg)).inc()
                self._handle(msg)
            except Exception:  # one bad message never stops the queue
                log.exception("interruption message %s for %s could not be handled", msg.id, msg.provider_id)
                continue
            self.queue.ack(msg)
            self.metrics.interruption_deleted.inc()
            self.metrics.interruption_queue_duration.observe(max(0.0, self.clock.now() - msg.time))
        return INTERVAL

    def _report_health(self) -> None:
        """The queue's own health (a queue that has :meth:`queue_health`) as metrics: the poller alive,
        malformed messages and poller restarts."""
        health_of = getattr(self.queue, "queue_health", None)
        health = health_of() if callable(health_of) else None
        if not isinstance(health, cp_interface.QueueHealth):
            return
        self.metrics.interruption_poller_alive.set(1.0 if health.alive else 0.0)
        if health.malformed > self._seen[0]:
            self.metrics.interruption_malformed.inc(health.malformed - self._seen[0])
        if health.restarts > self._seen[1]:
            self.metrics.interruption_poller_restarts.inc(health.restarts - self._seen[1])
        self._seen = (health.malformed, health.restarts)

    def _handle(self, msg: cp_interface.InterruptionMessage) -> None:
        claim_name = self.state.nodeclaim_name_for_provider_id(msg.provider_id)
        if claim_name is None:
            self.handled.append((msg.kind, msg.provider_id, "ignored"))
            return
        claim = self.state.raw("NodeClaim", claim_name)
        node_name = self.state.node_name_for_provider_id(msg.provider_id)
        node = self.state.raw("Node", node_name) if node_name else None
        if msg.kind == "Rebalance":
            self._event(claim, node, "SpotRebalanceRecommendation", "Spot rebalance recommendation was triggered")
            self.handled.append((msg.kind, msg.provider_id, "event"))
            return
        action = ACTIONS.get(msg.kind) if msg.kind != "StateChange" else ACTIONS.get(msg.detail)
        if action is None:
            self.handled.append((msg.kind, msg.provider_id, "ignored"))
            return
        reason, message = action
        self._event(claim, node, reason, message)
        if claim is not None and not kube_interface.is_terminating(claim):
            with contextlib.suppress(kube_errors.NotFound):
                self.cluster.delete("NodeClaim", claim_name)
                labels = kube_interface.labels_of(claim)
                self.metrics.nodeclaims_disrupted.labels(
                    metric_kind(msg), labels.get("karpenter.sh/nodepool", ""),
                    labels.get("karpenter.sh/capacity-type", "")).inc()
        self.handled.append((msg.kind, msg.provider_id, "deleted"))

    def _event(self, claim: dict[str, Any] | None, node: dict[str, Any] | None, reason: str, message: str) -> None:
        for obj in (node, claim):
            if obj is not None:
                self.recorder.warning(obj, reason, message)

