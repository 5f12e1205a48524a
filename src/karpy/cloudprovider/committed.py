"""Any cloud provider, priced under the customer's commitments: the controller's side of commitment-aware cost.

``karpy controller`` wraps its provider (AWS, Azure, KWOK) in :class:`CommittedProvider` when the
``commitments`` setting is given. Every call goes to the provider; two answers change:

* :meth:`CommittedProvider.get_instance_types` prices each offering at its *marginal* price under the
  commitments given what runs now (:meth:`karpy.cloudprovider.commitments.Ledger.marginal`), so the
  provisioner fills paid-for capacity first;
* :meth:`CommittedProvider.billed_price` (the :class:`karpy.cloudprovider.interface.Billing` capability)
  is what a running instance adds to the bill, so consolidation never trades covered capacity for paid.

What runs now is the provider's own :meth:`list` (its instances for this cluster: type, zone and
capacity type labels), priced at the provider's list prices; it is read again at most every
``refresh_seconds`` (30 s) of the injected clock and after every create or delete, so an API-backed
provider is not listed on every scheduling pass. The simulated cloud bills commitments itself
(:mod:`karpy.cloudprovider.fake.billing`) and is not wrapped.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels, nodeclaim, nodepool
from karpy.cloudprovider import commitments as commitments_mod
from karpy.cloudprovider import instancetype, interface

COVERED_FLOOR = 1e-4
"""Paid-for capacity is offered at this fraction of its list price rather than 0 (the packer divides by prices)."""


class CommittedProvider:
    """A :class:`interface.CloudProvider` and :class:`interface.Billing`; see the module docstring."""

    def __init__(self, provider: Any, commitments: commitments_mod.Commitments, clock: clock_mod.Clock, *,
                 refresh_seconds: float = 30.0) -> None:
        self.provider = provider
        self.commitments = commitments
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self.name = provider.name
        self._bill: commitments_mod.Bill | None = None
        self._ledger: commitments_mod.Ledger | None = None
        self._read_at = -1e300

    # ---------------------------------------------------------------------------- the contract

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        try:
            return self.provider.create(claim)  # type: ignore[no-any-return]
        finally:
            self._bill = None

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        try:
            self.provider.delete(claim)
        finally:
            self._bill = None

    def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        return self.provider.get(provider_id)  # type: ignore[no-any-return]

    def list(self) -> builtins.list[nodeclaim.NodeClaim]:
        return self.provider.list()  # type: ignore[no-any-return]

    def get_instance_types(self, pool: nodepool.NodePool | None) -> builtins.list[instancetype.InstanceType]:
        types: builtins.list[instancetype.InstanceType] = self.provider.get_instance_types(pool)
        bill, ledger = self._current()
        return [it.with_offerings(tuple(
            dataclasses.replace(o, price=max(ledger.marginal(bill, it.name, o.zone, o.capacity_type, o.price),
                                             o.price * COVERED_FLOOR))
            for o in it.offerings)) for it in types]

    def is_drifted(self, claim: nodeclaim.NodeClaim) -> str:
        return self.provider.is_drifted(claim)  # type: ignore[no-any-return]

    def repair_policies(self) -> builtins.list[interface.RepairPolicy]:
        return self.provider.repair_policies()  # type: ignore[no-any-return]

    def resolve_node_class(self, node_class: Mapping[str, Any]) -> dict[str, Any]:
        return self.provider.resolve_node_class(node_class)  # type: ignore[no-any-return]

    def billed_price(self, provider_id: str) -> float | None:
        bill, _ = self._current()
        return bill.billed.get(provider_id)

    def __getattr__(self, name: str) -> Any:  # interruption queue, hooks of the wrapped provider
        return getattr(self.provider, name)

    # ---------------------------------------------------------------------------------- billing

    def _current(self) -> tuple[commitments_mod.Bill, commitments_mod.Ledger]:
        now = self.clock.now()
        if self._bill is not None and self._ledger is not None and now - self._read_at < self.refresh_seconds:
            return self._bill, self._ledger
        types = self.provider.get_instance_types(None)
        prices = {(it.name, o.zone, o.capacity_type): o.price for it in types for o in it.offerings}
        on_demand = {it.name: min((o.price for o in it.offerings if o.capacity_type == labels.CAPACITY_TYPE_ON_DEMAND),
                                  default=0.0) for it in types}
        usage = []
        for claim in self.provider.list():
            lb = claim.metadata.labels
            itype, zone = lb.get(labels.INSTANCE_TYPE, ""), lb.get(labels.ZONE, "")
            ct = lb.get(labels.CAPACITY_TYPE, labels.CAPACITY_TYPE_ON_DEMAND)
            price = prices.get((itype, zone, ct), on_demand.get(itype, 0.0))
            usage.append(commitments_mod.Usage(claim.status.provider_id, itype, zone, ct, price))
        self._ledger = commitments_mod.Ledger(self.commitments, on_demand)
        self._bill = self._ledger.bill(usage)
        self._read_at = now
        return self._bill, self._ledger
