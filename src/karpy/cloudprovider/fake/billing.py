"""What the simulated cloud charges when the customer holds commitments (RIs, Savings Plans, a discount).

:class:`Billing` sits beside :class:`karpy.cloudprovider.fake.provider.SimulatedCloud` and bills its
running instances with a :class:`karpy.cloudprovider.commitments.Ledger`:

* :meth:`Billing.price_types` rewrites offering prices to their *marginal* price given what runs now
  (what one more instance would add to the bill), which is what the scheduler, the launch choice and
  consolidation then compare; instances keep their list price for the on-demand equivalent;
* :meth:`Billing.billed_price` is what one running instance adds to the bill (0 under an RI);
* :meth:`Billing.cost_per_hour` is what is actually paid per hour (RI fees and Savings Plan
  commitments included, used or not) and :meth:`Billing.accrued` integrates it over virtual time;
* :meth:`Billing.summary` gives on-demand equivalent, paid and utilisation now.

Without commitments nothing is rewritten and the cloud prices as before. Pure: no I/O; time comes
from the clock passed in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from karpy import clock as clock_mod
from karpy.cloudprovider import commitments as commitments_mod
from karpy.cloudprovider import instancetype
from karpy.cloudprovider.fake import capacity

LiveInstances = Callable[[], Sequence[capacity.Instance]]

COVERED_FLOOR = 1e-4
"""Capacity already paid for is offered at this fraction of its list price rather than at exactly 0: the
packer divides by prices, and ties between covered offerings still break towards the smaller type."""


class Billing:
    """Bills the simulated cloud's instances under commitments; see the module docstring."""

    def __init__(self, commitments: commitments_mod.Commitments, clock: clock_mod.Clock, live: LiveInstances,
                 on_demand_prices: Callable[[], dict[str, float]]) -> None:
        self.commitments = commitments
        self.clock = clock
        self._live = live
        self._prices = on_demand_prices
        self._ledger: commitments_mod.Ledger | None = None
        self._bill: commitments_mod.Bill | None = None
        self._last = clock.now()
        self._accrued = 0.0
        self.history: list[tuple[float, dict[str, Any]]] = []
        """``(time, summary)`` each time the bill changed: for utilisation over time."""

    def __bool__(self) -> bool:
        return bool(self.commitments)

    @property
    def ledger(self) -> commitments_mod.Ledger:
        if self._ledger is None:
            self._ledger = commitments_mod.Ledger(self.commitments, self._prices())
        return self._ledger

    def current(self) -> commitments_mod.Bill:
        if self._bill is None:
            usage = [commitments_mod.Usage(i.provider_id, i.instance_type, i.zone, i.capacity_type, i.price)
                     for i in self._live()]
            self._bill = self.ledger.bill(usage)
            self.history.append((self.clock.now(), self._bill.to_dict()))
        return self._bill

    def tick(self) -> None:
        """Accrue what was paid since the last tick (call before the set of instances changes)."""
        now = self.clock.now()
        if now > self._last:
            self._accrued += self.current().paid * (now - self._last) / 3600.0
        self._last = now

    def changed(self) -> None:
        """The set of running instances changed: the next question re-bills."""
        self._bill = None

    def price_types(self, types: Sequence[instancetype.InstanceType]) -> list[instancetype.InstanceType]:
        bill = self.current()
        ledger = self.ledger
        return [it.with_offerings(tuple(
            dataclasses.replace(o, price=max(ledger.marginal(bill, it.name, o.zone, o.capacity_type, o.price),
                                             o.price * COVERED_FLOOR))
            for o in it.offerings)) for it in types]

    def billed_price(self, provider_id: str) -> float | None:
        return self.current().billed.get(provider_id)

    def cost_per_hour(self) -> float:
        return self.current().paid

    def accrued(self) -> float:
        self.tick()
        return self._accrued

    def summary(self) -> dict[str, Any]:
        return self.current().to_dict()
