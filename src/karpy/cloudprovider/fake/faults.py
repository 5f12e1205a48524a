"""Fault injection around any :class:`karpy.cloudprovider.interface.CloudProvider` (and its
interruption queue), for chaos runs and tests.

:class:`FaultyCloud` delegates every call to the inner provider and, with the rates of a
:class:`CloudFaults`, fails it as a cloud API under stress does:

* any call may be throttled (a retryable :class:`errors.CloudProviderError` with reason
  ``RequestLimitExceeded``) or fail with a server error (retryable, reason ``InternalError``);
* a launch may succeed and lose its response (``create`` ran, the instance is running and tagged
  with the NodeClaim's name, the caller gets a retryable ``CreateError``), which is what launch
  idempotency must handle;
* a launch may discover insufficient capacity only when launching (the inner provider chose an
  offering; that instance is terminated at once and an :class:`errors.InsufficientCapacityError`
  names the offering, which the inner provider, when it can, also marks unavailable for
  ``ice_duration`` seconds);
* interruption messages may be lost (acknowledged behind the caller's back), duplicated (delivered
  twice) or reordered.

Every injected fault is counted in :attr:`FaultyCloud.injected`. Randomness comes from ``rng``.
Anything else (``settle``, ``interrupt``, statistics) is passed to the inner object.
"""

from __future__ import annotations

import builtins
import contextlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import labels, nodeclaim, nodepool
from karpy.cloudprovider import errors, instancetype
from karpy.cloudprovider import interface as cp_interface


@dataclass(frozen=True, slots=True)
class CloudFaults:
    """Rates (0..1, per call) of each cloud fault."""

    throttle: float = 0.0
    server_error: float = 0.0
    lost_launch: float = 0.0
    ice_at_launch: float = 0.0
    ice_duration: float = 180.0
    lost_interruption: float = 0.0
    duplicate_interruption: float = 0.0
    reorder_interruptions: float = 0.0

    @property
    def any(self) -> bool:
        return any((self.throttle, self.server_error, self.lost_launch, self.ice_at_launch, self.lost_interruption,
                    self.duplicate_interruption, self.reorder_interruptions))


class FaultyCloud:
    """See the module docstring."""

    def __init__(self, inner: Any, faults: CloudFaults, rng: random.Random, *,
                 on_launched: Callable[[nodeclaim.NodeClaim], None] | None = None) -> None:
        """``on_launched`` sees every launch that succeeded (also those whose response is then lost)."""
        self.inner = inner
        self.on_launched = on_launched
        self.faults = faults
        self.rng = rng
        self.injected: dict[str, int] = {}
        self.name: str = str(getattr(inner, "name", "fake"))

    def _count(self, name: str) -> None:
        self.injected[name] = self.injected.get(name, 0) + 1

    def _api(self, call: str) -> None:
        f = self.faults
        roll = self.rng.random()
        if roll < f.throttle:
            self._count("cloudThrottle")
            raise errors.CloudProviderError(f"injected fault: {call} throttled", reason="RequestLimitExceeded",
                                            retryable=True)
        if roll < f.throttle + f.server_error:
            self._count("cloudServerError")
            raise errors.CloudProviderError(f"injected fault: {call} failed with a server error",
                                            reason="InternalError", retryable=True)

    # ------------------------------------------------------------------------- the contract

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        self._api("create")
        launched: nodeclaim.NodeClaim = self.inner.create(claim)
        if self.faults.ice_at_launch and self.rng.random() < self.faults.ice_at_launch:
            self._count("iceAtLaunch")
            offering = (launched.labels.get(labels.INSTANCE_TYPE, ""), launched.labels.get(labels.ZONE, ""),
                        launched.labels.get(labels.CAPACITY_TYPE, ""))
            with contextlib.suppress(errors.CloudProviderError):
                self.inner.delete(launched)
            mark = getattr(self.inner, "mark_insufficient", None)
            clock = getattr(self.inner, "clock", None)
            if callable(mark) and clock is not None:
                mark(*offering, clock.now() + self.faults.ice_duration)
            raise errors.InsufficientCapacityError([offering])
        if self.on_launched is not None:
            self.on_launched(launched)
        if self.faults.lost_launch and self.rng.random() < self.faults.lost_launch:
            self._count("lostLaunchResponse")
            raise errors.CreateError("injected fault: the launch response was lost", reason="RequestTimeout",
                                     retryable=True)
        return launched

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        self._api("delete")
        self.inner.delete(claim)

    def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        self._api("get")
        out: nodeclaim.NodeClaim = self.inner.get(provider_id)
        return out

    def list(self) -> builtins.list[nodeclaim.NodeClaim]:
        self._api("list")
        out: builtins.list[nodeclaim.NodeClaim] = self.inner.list()
        return out

    def get_instance_types(self, pool: nodepool.NodePool | None) -> builtins.list[instancetype.InstanceType]:
        self._api("get_instance_types")
        out: builtins.list[instancetype.InstanceType] = self.inner.get_instance_types(pool)
        return out

    def is_drifted(self, claim: nodeclaim.NodeClaim) -> str:
        self._api("is_drifted")
        return str(self.inner.is_drifted(claim))

    def repair_policies(self) -> builtins.list[cp_interface.RepairPolicy]:
        out: builtins.list[cp_interface.RepairPolicy] = self.inner.repair_policies()
        return out

    def resolve_node_class(self, node_class: Mapping[str, Any]) -> dict[str, Any]:
        self._api("resolve_node_class")
        out: dict[str, Any] = self.inner.resolve_node_class(node_class)
        return out

    # ---------------------------------------------------------------------- interruption queue

    def pending_interruptions(self) -> builtins.list[cp_interface.InterruptionMessage]:
        self._api("receive_messages")
        messages: builtins.list[cp_interface.InterruptionMessage] = list(self.inner.pending_interruptions())
        out: builtins.list[cp_interface.InterruptionMessage] = []
        for m in messages:
            if self.faults.lost_interruption and self.rng.random() < self.faults.lost_interruption:
                self._count("lostInterruption")
                self.inner.ack(m)
                continue
            out.append(m)
            if self.faults.duplicate_interruption and self.rng.random() < self.faults.duplicate_interruption:
                self._count("duplicateInterruption")
                out.append(m)
        if len(out) > 1 and self.faults.reorder_interruptions and \
                self.rng.random() < self.faults.reorder_interruptions:
            self._count("reorderedInterruptions")
            self.rng.shuffle(out)
        return out

    def ack(self, message: cp_interface.InterruptionMessage) -> None:
        self.inner.ack(message)

    def __getattr__(self, name: str) -> Any:  # settle, interrupt, cost_per_hour... of the inner cloud
        return getattr(self.inner, name)
