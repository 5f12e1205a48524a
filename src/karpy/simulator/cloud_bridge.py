"""The simulated cloud as karpy's controllers see it, connected to the simulated kubelet.

:class:`CloudBridge` wraps :class:`karpy.cloudprovider.fake.provider.SimulatedCloud` for
:class:`karpy.simulator.engine.Simulation`: it is karpy's :class:`~karpy.cloudprovider.interface.CloudProvider`
and ``InterruptionQueue``, and it tells the simulated kubelet about every launch (the instance registers as
a Node after the launch latency) and every termination, karpy's own and the cloud's (a spot reclaim).
A caller may rely on: every call reaches the cloud unchanged; ``launched`` / ``terminated`` count what the
kubelet was told.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from karpy.api import nodeclaim, nodepool
from karpy.cloudprovider import instancetype
from karpy.cloudprovider import interface as cp_interface
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.simulator import kubelet


class CloudBridge:
    """The :class:`SimulatedCloud` as karpy sees it, connected to the simulated kubelet.

    A :class:`karpy.cloudprovider.interface.CloudProvider` and ``InterruptionQueue``: every call
    goes to the cloud; a successful :meth:`create` schedules the Node registration with the
    kubelet, a :meth:`delete` (and any termination the cloud does on its own, e.g. a spot
    reclaim, noticed by :meth:`settle`) makes the kubelet remove the Node.
    """

    def __init__(self, cloud: fake_provider.SimulatedCloud, sim_kubelet: kubelet.SimulatedKubelet | None) -> None:
        """``sim_kubelet`` None: instances never become Nodes (controller tests add Nodes by hand)."""
        self.cloud = cloud
        self.kubelet = sim_kubelet
        self.name = cloud.name
        self.launched = 0
        self.terminated = 0
        self._live: set[str] = set()
        self._reclaims: list[float] = []
        self._dirty = False

    # CloudProvider
    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        launched = self.cloud.create(claim)
        pid = launched.status.provider_id
        inst = self.cloud.instance(pid) if pid else None
        if inst is not None and self.kubelet is not None:
            info = kubelet.InstanceInfo(
                provider_id=pid, instance_type=inst.instance_type, zone=inst.zone,
                capacity_type=inst.capacity_type, capacity=dict(inst.capacity),
                allocatable=dict(inst.allocatable), labels=dict(inst.labels), node_name=inst.hostname)
            self.kubelet.instance_launched(launched, info)  # no render-and-parse
            self._live.add(pid)
            self.launched += 1
        return launched

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        self.cloud.delete(claim)
        self._gone(claim.status.provider_id)

    def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        return self.cloud.get(provider_id)

    def list(self) -> builtins.list[nodeclaim.NodeClaim]:
        return self.cloud.list()

    def get_instance_types(self, pool: nodepool.NodePool | None) -> builtins.list[instancetype.InstanceType]:
        return self.cloud.get_instance_types(pool)

    def is_drifted(self, claim: nodeclaim.NodeClaim) -> str:
        return self.cloud.is_drifted(claim)

    def repair_policies(self) -> builtins.list[cp_interface.RepairPolicy]:
        return self.cloud.repair_policies()

    def resolve_node_class(self, node_class: Mapping[str, Any]) -> dict[str, Any]:
        return self.cloud.resolve_node_class(node_class)

    # InterruptionQueue
    def pending_interruptions(self) -> builtins.list[cp_interface.InterruptionMessage]:
        self.settle()
        return self.cloud.pending_interruptions()

    def ack(self, message: cp_interface.InterruptionMessage) -> None:
        self.cloud.ack(message)

    # world
    def interrupt(self, provider_id: str, kind: str) -> None:
        """Send an interruption notice (a scenario step); a spot reclaim follows two minutes later."""
        message = self.cloud.interrupt(provider_id, kind)
        self._dirty = True
        if kind == "SpotInterruption":
            self._reclaims.append(message.time + cp_interface.SPOT_INTERRUPTION_WARNING_SECONDS)
            self._reclaims.sort()

    def settle(self) -> None:
        """Let the cloud carry out due reclaims; the kubelet removes the Nodes of dead instances.

        Only the cloud's own terminations need finding here (karpy's go through :meth:`delete`):
        they follow an :meth:`interrupt`, so the instances are looked at only then.
        """
        now = self.cloud.clock.now()
        due = bool(self._reclaims) and self._reclaims[0] <= now
        if not (self._dirty or due):
            return
        self.cloud.settle()
        self._reclaims = [t for t in self._reclaims if t > now]
        self._dirty = False
        for pid in sorted(self._live):
            if self.cloud.instance(pid) is None:
                self._gone(pid)

    def adopted(self, provider_id: str) -> None:
        """An instance the cloud adopted (``karpy whatif``): its termination removes its Node too."""
        self._live.add(provider_id)

    def next_reclaim(self) -> float | None:
        """When the next spot reclaim the scenario caused happens (``None`` when none is due)."""
        return self._reclaims[0] if self._reclaims else None

    def _gone(self, provider_id: str) -> None:
        if provider_id in self._live:
            self._live.discard(provider_id)
            self.terminated += 1
            if self.kubelet is not None:
                self.kubelet.instance_terminated(provider_id)

    def cost_per_hour(self) -> float:
        return self.cloud.cost_per_hour()

    def __getattr__(self, name: str) -> Any:  # anything else a controller may use (hooks, stats)
        return getattr(self.cloud, name)
