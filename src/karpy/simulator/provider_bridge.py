"""A real cloud provider inside ``karpy simulate``: launches become simulated Nodes.

When a scenario points a cloud at a real (or emulated) endpoint, ``spec.cloud.endpointURL``, the
simulator runs that cloud's real :class:`karpy.cloudprovider.interface.CloudProvider` (boto3 for
AWS, the Azure SDK for Azure) while the cluster stays simulated. :class:`ProviderBridge` wraps any
provider so that the simulated kubelet hears about what the cloud did:

* :meth:`ProviderBridge.create` passes the NodeClaim to the provider and tells the kubelet about
  the launched instance, built from the returned NodeClaim alone (``status.providerID``, labels
  ``node.kubernetes.io/instance-type``, ``topology.kubernetes.io/zone``,
  ``karpenter.sh/capacity-type`` and the others, ``status.capacity`` / ``status.allocatable``):
  the kubelet registers a Node for it after the scenario's launch latency.
* :meth:`ProviderBridge.delete` terminates through the provider and has the kubelet remove the
  Node, also when the provider says the instance is already gone
  (:class:`karpy.cloudprovider.errors.NodeClaimNotFoundError`, which is re-raised as the contract
  says). Instances the cloud terminates on its own are found by :meth:`ProviderBridge.settle`,
  which compares the instances it launched with the provider's :meth:`list` at most every
  ``sync_interval`` seconds of the clock.
* Everything else (``get``, ``list``, ``get_instance_types``, ``is_drifted``, ``repair_policies``,
  ``resolve_node_class``) goes to the provider unchanged; the interruption queue
  (``pending_interruptions`` / ``ack``) is delegated when the provider has one and is empty
  otherwise. Any other attribute is looked up on the provider.

Costs: the bridge remembers each launched instance's hourly price (the offering's price in the
provider's :meth:`get_instance_types` at launch, 0 when unknown) for :meth:`cost_per_hour` and
:meth:`accrued_cost`, so the simulator's reports work with any provider.

The bridge adds no locking of its own around the provider (providers are thread-safe by
contract); its own bookkeeping is guarded by a lock so a threaded driver may use it too.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels, nodeclaim, nodepool
from karpy.cloudprovider import errors, instancetype, interface
from karpy.simulator import kubelet as kubelet_mod

log = logging.getLogger("karpy.simulator.provider_bridge")

DEFAULT_SYNC_INTERVAL = 30.0
"""Seconds between two comparisons of launched instances with the provider's ``list()``."""


class ProviderBridge:
    """Any :class:`interface.CloudProvider`, connected to the simulated kubelet (module docstring)."""

    def __init__(self, provider: interface.CloudProvider, kubelet: kubelet_mod.SimulatedKubelet | None, *,
                 clock: clock_mod.Clock | None = None, sync_interval: float = DEFAULT_SYNC_INTERVAL) -> None:
        """``kubelet`` None: instances never become Nodes. ``clock`` None: :meth:`settle` never lists."""
        self.provider = provider
        self.kubelet = kubelet
        self.clock = clock
        self.sync_interval = sync_interval
        self.name = provider.name
        self.launched = 0
        self.terminated = 0
        self._lock = threading.Lock()
        self._live: dict[str, tuple[float, float]] = {}
        """provider id -> (hourly price, launch time) of instances launched through the bridge."""
        self._accrued = 0.0
        self._next_sync: float | None = None

    # ------------------------------------------------------------------------ CloudProvider

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        launched = self.provider.create(claim)
        pid = launched.status.provider_id
        if not pid:
            return launched
        lb = launched.metadata.labels
        info = kubelet_mod.InstanceInfo(
            provider_id=pid, instance_type=lb.get(labels.INSTANCE_TYPE, ""), zone=lb.get(labels.ZONE, ""),
            capacity_type=lb.get(labels.CAPACITY_TYPE, ""), capacity=dict(launched.status.capacity),
            allocatable=dict(launched.status.allocatable), labels=dict(lb))
        price = self._price(info)
        now = self.clock.now() if self.clock is not None else 0.0
        with self._lock:
            self._live[pid] = (price, now)
            self.launched += 1
        if self.kubelet is not None:
            self.kubelet.instance_launched(launched, info)
        return launched

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        try:
            self.provider.delete(claim)
        except errors.NodeClaimNotFoundError:
            self._gone(claim.status.provider_id)
            raise
        self._gone(claim.status.provider_id)

    def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        return self.provider.get(provider_id)

    def list(self) -> builtins.list[nodeclaim.NodeClaim]:
        return self.provider.list()

    def get_instance_types(self, pool: nodepool.NodePool | None) -> builtins.list[instancetype.InstanceType]:
        return self.provider.get_instance_types(pool)

    def is_drifted(self, claim: nodeclaim.NodeClaim) -> str:
        return self.provider.is_drifted(claim)

    def repair_policies(self) -> builtins.list[interface.RepairPolicy]:
        return self.provider.repair_policies()

    def resolve_node_class(self, node_class: Mapping[str, Any]) -> dict[str, Any]:
        return self.provider.resolve_node_class(node_class)

    # ----------------------------------------------------------------------- InterruptionQueue

    def pending_interruptions(self) -> builtins.list[interface.InterruptionMessage]:
        pending = getattr(self.provider, "pending_interruptions", None)
        return list(pending()) if callable(pending) else []

    def ack(self, message: interface.InterruptionMessage) -> None:
        ack = getattr(self.provider, "ack", None)
        if callable(ack):
            ack(message)

    # ------------------------------------------------------------------------ the simulator

    def interrupt(self, provider_id: str, kind: str) -> None:
        """Have the provider send an interruption notice (scenario step); ``ValueError`` when it cannot."""
        send = getattr(self.provider, "interrupt", None)
        if not callable(send):
            raise ValueError(f"the {self.name} provider cannot send interruption notices")
        send(provider_id, kind)

    def settle(self) -> None:
        """Every ``sync_interval``: Nodes of instances the cloud terminated on its own are removed."""
        if self.clock is None:
            return
        now = self.clock.now()
        if self._next_sync is None:
            self._next_sync = now + self.sync_interval
            return
        if now < self._next_sync:
            return
        self._next_sync = now + self.sync_interval
        with self._lock:
            known = set(self._live)
        if not known:
            return
        try:
            alive = {c.status.provider_id for c in self.provider.list()}
        except errors.CloudProviderError as exc:
            log.warning("could not list instances to find terminated ones: %s", exc)
            return
        for pid in sorted(known - alive):
            self._gone(pid)

    def next_reclaim(self) -> float | None:
        """The simulator's next cloud event: none is scheduled by a real provider."""
        return None

    def cost_per_hour(self) -> float:
        with self._lock:
            return sum(price for price, _ in self._live.values())

    def accrued_cost(self) -> float:
        now = self.clock.now() if self.clock is not None else 0.0
        with self._lock:
            running = sum(price * max(0.0, now - start) / 3600.0 for price, start in self._live.values())
            return self._accrued + running

    def __getattr__(self, name: str) -> Any:  # hooks and stats of the provider
        if name == "provider":
            raise AttributeError(name)
        return getattr(self.provider, name)

    # ------------------------------------------------------------------------------ internals

    def _gone(self, provider_id: str) -> None:
        if not provider_id:
            return
        now = self.clock.now() if self.clock is not None else 0.0
        with self._lock:
            entry = self._live.pop(provider_id, None)
            if entry is None:
                return
            price, start = entry
            self._accrued += price * max(0.0, now - start) / 3600.0
            self.terminated += 1
        if self.kubelet is not None:
            self.kubelet.instance_terminated(provider_id)

    def _price(self, info: kubelet_mod.InstanceInfo) -> float:
        try:
            types = self.provider.get_instance_types(None)
        except errors.CloudProviderError:
            return 0.0
        for it in types:
            if it.name != info.instance_type:
                continue
            for o in it.offerings:
                if o.zone == info.zone and o.capacity_type == info.capacity_type:
                    return o.price
        return 0.0
