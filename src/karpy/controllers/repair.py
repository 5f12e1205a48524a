"""Node auto-repair, as Karpenter's ``NodeRepair`` feature gate does it.

When ``Settings.feature_gate("NodeRepair")`` is on, a Node karpy launched whose condition matches
one of the cloud's :meth:`~karpy.cloudprovider.interface.CloudProvider.repair_policies` (e.g.
``Ready=False`` or ``Ready=Unknown``) for the policy's toleration is replaced: its NodeClaim is
deleted (the termination controller then drains the Node and terminates the instance, and the
provisioner launches capacity for the displaced pods). A caller may rely on:

* only Nodes with a NodeClaim are repaired, never a Node karpy did not launch;
* the toleration counts from the condition's ``lastTransitionTime``; the Node is looked at again
  when its toleration ends;
* no repair happens while more of a NodePool's nodes match a repair policy than
  :data:`MAX_UNHEALTHY_PERCENT` of them, rounded up, at any pool size (Karpenter's safety valve: a
  zonal outage is not fixed by replacing every node), and a Warning event ``NodeRepairBlocked``
  says so on the NodePool;
* a repair publishes a Warning event ``NodeRepair`` on the Node and counts
  ``karpenter_nodeclaims_disrupted_total{reason="unhealthy"}``;
* a repair is forceful, as Karpenter's health controller makes it: before the NodeClaim is deleted
  its ``karpenter.sh/nodeclaim-termination-timestamp`` annotation is set to now (unless it already
  holds an earlier time), so the termination controller deletes the node's pods outright instead of
  waiting for PodDisruptionBudgets or ``karpenter.sh/do-not-disrupt`` pods, which on a node that
  stopped reporting would never go.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels as wk
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import ownership, runtime, state
from karpy.kube import errors as kube_errors
from karpy.kube import events, interface
from karpy.observability import metrics as metrics_mod

log = logging.getLogger("karpy.controllers.repair")

NAME = "node.repair"
FEATURE_GATE = "NodeRepair"
MAX_UNHEALTHY_PERCENT = 20
REASON_REPAIR = "NodeRepair"
REASON_BLOCKED = "NodeRepairBlocked"


def allowed_unhealthy(nodes: int) -> int:
    """How many of ``nodes`` may be unhealthy with repair still going on: ``20%`` rounded up."""
    return (MAX_UNHEALTHY_PERCENT * nodes + 99) // 100


def _conditions(node: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in (node.get("status") or {}).get("conditions") or ()
            if isinstance(c, Mapping)}


class NodeRepair:
    """See the module docstring."""

    def __init__(self, cluster: interface.Cluster, cluster_state: state.ClusterState,
                 cloud: cp_interface.CloudProvider, clock: clock_mod.Clock, recorder: events.EventRecorder,
                 metrics: metrics_mod.Metrics) -> None:
        self.cluster = cluster
        self.state = cluster_state
        self.cloud = cloud
        self.clock = clock
        self.recorder = recorder
        self.metrics = metrics
        self.repaired: list[str] = []

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [("Node", self._map_node)])

    @staticmethod
    def _map_node(event: str, obj: dict[str, Any]) -> Iterable[str]:
        return () if event == interface.DELETED else (interface.name_of(obj),)

    def unhealthy_since(self, node: Mapping[str, Any]) -> tuple[float, cp_interface.RepairPolicy] | None:
        """When the Node's toleration under a matching policy ends, and that policy, if one matches."""
        conds = _conditions(node)
        best: tuple[float, cp_interface.RepairPolicy] | None = None
        for policy in self.cloud.repair_policies():
            c = conds.get(policy.condition_type)
            if c is None or c.get("status") != policy.condition_status:
                continue
            try:
                since = clock_mod.parse_rfc3339(str(c.get("lastTransitionTime") or ""))
            except ValueError:
                since = self.clock.now()
            end = since + policy.toleration_seconds
            if best is None or end < best[0]:
                best = (end, policy)
        return best

    def reconcile(self, name: str) -> float | None:
        node = self.state.raw("Node", name)
        if node is None or interface.is_terminating(node) or not ownership.launched_by_karpenter(node):
            return None
        claim = self.state.nodeclaim_for_node(name)
        if claim is None or claim.metadata.deletion_timestamp is not None:
            return None
        found = self.unhealthy_since(node)
        if found is None:
            return None
        end, policy = found
        now = self.clock.now()
        if now < end:
            return end - now
        pool = interface.labels_of(node).get(wk.NODEPOOL, "")
        if self._too_many_unhealthy(pool):
            self._event(self.state.raw("NodePool", pool), REASON_BLOCKED,
                        f"more than {MAX_UNHEALTHY_PERCENT}% of NodePool {pool}'s nodes are unhealthy; "
                        "not repairing")
            return 60.0
        log.warning("repair: node %s has had %s=%s for %.0fs; replacing it", name, policy.condition_type,
                    policy.condition_status, policy.toleration_seconds)
        self._event(node, REASON_REPAIR, f"Node {name} has had {policy.condition_type}="
                    f"{policy.condition_status} for {policy.toleration_seconds:g}s; replacing it")
        with contextlib.suppress(kube_errors.NotFound):
            self._expire_now(claim.name, claim.metadata.annotations.get(wk.NODECLAIM_TERMINATION_TIMESTAMP), now)
            self.cluster.delete("NodeClaim", claim.name)
        self.metrics.nodeclaims_disrupted.labels("unhealthy", pool, claim.labels.get(wk.CAPACITY_TYPE, "")).inc()
        self.metrics.nodeclaims_unhealthy_disrupted.labels(
            policy.condition_type, pool, claim.labels.get(wk.CAPACITY_TYPE, ""), claim.status.image_id).inc()
        self.repaired.append(name)
        return None

    def _expire_now(self, claim_name: str, stamp: str | None, now: float) -> None:
        """Set the claim's termination timestamp to ``now`` unless it already says an earlier time."""
        if stamp:
            with contextlib.suppress(ValueError):
                if clock_mod.parse_rfc3339(stamp) <= now:
                    return
        self.cluster.patch("NodeClaim", claim_name, {"metadata": {
            "annotations": {wk.NODECLAIM_TERMINATION_TIMESTAMP: clock_mod.rfc3339(now)}}})

    def _too_many_unhealthy(self, pool: str) -> bool:
        """More of ``pool``'s nodes (of the cluster's, for a NodeClaim without a NodePool) match a
        repair policy than :data:`MAX_UNHEALTHY_PERCENT` of them, rounded up (Karpenter's
        ``areNodesHealthy``: any pool size; a node counts as soon as its condition matches)."""
        nodes = [n for n in self.state.raws("Node") if not pool or interface.labels_of(n).get(wk.NODEPOOL) == pool]
        policies = self.cloud.repair_policies()
        bad = 0
        for n in nodes:
            conds = _conditions(n)
            if any((c := conds.get(p.condition_type)) is not None and c.get("status") == p.condition_status
                   for p in policies):
                bad += 1
        return bad > allowed_unhealthy(len(nodes))

    def _event(self, obj: Mapping[str, Any] | None, reason: str, message: str) -> None:
        if obj is None:
            return
        try:
            self.recorder.publish(dict(obj), events.WARNING, reason, message)
        except Exception as exc:  # an event that cannot be written must not stop repair
            log.warning("repair: cannot publish %s: %s", reason, exc)


def register(manager: runtime.Manager, cluster: interface.Cluster, cluster_state: state.ClusterState,
             cloud: cp_interface.CloudProvider, clock: clock_mod.Clock, recorder: events.EventRecorder,
             metrics: metrics_mod.Metrics) -> NodeRepair:
    repair = NodeRepair(cluster, cluster_state, cloud, clock, recorder, metrics)
    manager.register(repair.controller())
    for node in cluster_state.raws("Node"):
        manager.enqueue(NAME, interface.name_of(node))
    return repair
