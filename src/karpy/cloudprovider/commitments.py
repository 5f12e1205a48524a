"""Commitments: Reserved Instances, Savings Plans and a negotiated discount, and what they make things cost.

Karpenter prices every offering at its list price and so ignores what a customer has already paid for
(an open request on its AWS provider; the migration field report notes it). karpy reads commitments as
data (:func:`parse`, from a scenario's ``spec.cloud.commitments`` or the controller's settings)::

    reservedInstances: [{instanceType: m5.xlarge, count: 10, zone: us-east-1a}]   # zone: omit = regional
    savingsPlans:
    - {type: Compute, commitmentPerHour: 2.5, discount: 0.28}
    - {type: EC2Instance, family: m5, commitmentPerHour: 1.0, discount: 0.40}
    discount: 0.05             # a flat negotiated discount (an EDP) on whatever is billed at list price

and :class:`Ledger` bills a set of running instances the way AWS does, in AWS's order: a Reserved
Instance covers one running on-demand instance of its type (zonal RIs in their zone first, then
regional ones anywhere in the region); EC2 Instance Savings Plans, then Compute Savings Plans, cover
the rest of on-demand usage at their discount until their hourly commitment is used up; what is left
pays the list price less the flat discount (spot pays its spot price less the flat discount).

* :meth:`Ledger.bill` gives each instance's billed $/h and the totals: on-demand equivalent (list
  prices), what is actually paid (RI fees for every RI, used or not, plus Savings Plan commitments,
  plus uncovered usage) and the utilisation of RIs and Savings Plans.
* :meth:`Ledger.marginal` is the price of one more instance of an offering given what runs now:
  ``0`` while a matching RI is unused, the uncovered part of its discounted price while a Savings Plan
  has commitment left, else the list price less the flat discount. Provisioning and consolidation use
  it, so pods fill capacity that is already paid for before anything is bought, and a node under a
  commitment is never "replaced by something cheaper" that is in fact paid on top.

An RI's own fee is ``hourlyPrice`` when given, else 60 % of the on-demand price of its type (a typical
one-year no-upfront standard RI). Pure: no I/O; ``parse`` raises only
:class:`karpy.api.errors.ValidationError` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import errors, fields

OBJECT = "commitments"
DEFAULT_RI_FEE_FRACTION = 0.6
SP_TYPES = ("Compute", "EC2Instance")


@dataclass(frozen=True, slots=True)
class ReservedInstance:
    instance_type: str
    count: int
    zone: str | None = None
    hourly_price: float | None = None


@dataclass(frozen=True, slots=True)
class SavingsPlan:
    type: str
    commitment_per_hour: float
    discount: float
    family: str | None = None

    def covers(self, instance_type: str) -> bool:
        return self.type == "Compute" or instance_type.split(".", 1)[0] == self.family


@dataclass(frozen=True, slots=True)
class Commitments:
    reserved_instances: tuple[ReservedInstance, ...] = ()
    savings_plans: tuple[SavingsPlan, ...] = ()
    discount: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.reserved_instances or self.savings_plans or self.discount)


NONE = Commitments()


def parse(data: Any, obj: str = OBJECT) -> Commitments:
    """Commitments from their mapping form (see the module docstring); ``None`` gives no commitments."""
    if data is None:
        return NONE
    f = fields.Fields(data, obj)
    problems: list[errors.FieldError] = []
    for key in f.data:
        if key not in ("reservedInstances", "savingsPlans", "discount"):
            problems.append(errors.FieldError(obj, str(key), "reservedInstances, savingsPlans or discount", key))
    ris: list[ReservedInstance] = []
    for item in f.items("reservedInstances"):
        try:
            count = item.int("count", 1)
            if count is None or count < 1:
                raise item.fail("count", "a count of at least 1", item.raw("count"))
            ris.append(ReservedInstance(instance_type=item.req_str("instanceType"), count=count,
                                        zone=item.str("zone"), hourly_price=_fraction(item, "hourlyPrice", None)))
        except errors.ValidationError as exc:
            problems.extend(exc.errors)
    sps: list[SavingsPlan] = []
    for item in f.items("savingsPlans"):
        try:
            kind = item.req_str("type")
            if kind not in SP_TYPES:
                raise item.fail("type", "Compute or EC2Instance", kind)
            family = item.str("family")
            if kind == "EC2Instance" and not family:
                raise item.fail("family", "the instance family an EC2 Instance Savings Plan covers (e.g. m5)", None)
            commitment = _fraction(item, "commitmentPerHour", None)
            if commitment is None:
                raise item.fail("commitmentPerHour", "dollars per hour", None)
            discount = _fraction(item, "discount", None, upper=0.99)
            if discount is None:
                raise item.fail("discount", "a fraction such as 0.28", None)
            sps.append(SavingsPlan(type=kind, family=family, commitment_per_hour=commitment, discount=discount))
        except errors.ValidationError as exc:
            problems.extend(exc.errors)
    try:
        flat = _fraction(f, "discount", 0.0, upper=0.99) or 0.0
    except errors.ValidationError as exc:
        problems.extend(exc.errors)
        flat = 0.0
    if problems:
        raise errors.ValidationError(problems)
    # EC2 Instance plans apply before Compute plans, higher discounts first (as AWS applies them)
    sps.sort(key=lambda p: (p.type != "EC2Instance", -p.discount))
    return Commitments(tuple(ris), tuple(sps), flat)


def _fraction(f: fields.Fields, key: str, default: float | None, *, upper: float | None = None) -> float | None:
    raw = f.raw(key)
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or raw < 0 \
            or (upper is not None and raw > upper):
        expected = f"a number from 0 to {upper}" if upper is not None else "a non-negative number"
        raise f.fail(key, expected, raw)
    return float(raw)


@dataclass(frozen=True, slots=True)
class Usage:
    """One running instance as the bill sees it."""

    id: str
    instance_type: str
    zone: str
    capacity_type: str
    list_price: float
    """Its offering's price per hour (on-demand list price, or the spot price)."""


@dataclass(slots=True)
class Bill:
    billed: dict[str, float] = field(default_factory=dict)
    """Instance id -> $/h it adds on top of the commitments' fixed fees."""
    covered_by: dict[str, str] = field(default_factory=dict)
    """Instance id -> ``"RI"``, ``"SavingsPlan"``, ``"SavingsPlan (partly)"`` or ``""``."""
    on_demand_equivalent: float = 0.0
    paid: float = 0.0
    ri_used: int = 0
    ri_total: int = 0
    sp_used: float = 0.0
    sp_total: float = 0.0
    ri_left: dict[tuple[str, str | None], int] = field(default_factory=dict)
    sp_left: list[float] = field(default_factory=list)

    @property
    def ri_utilization(self) -> float:
        return self.ri_used / self.ri_total if self.ri_total else 0.0

    @property
    def sp_utilization(self) -> float:
        return self.sp_used / self.sp_total if self.sp_total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"onDemandEquivalent": round(self.on_demand_equivalent, 6), "paid": round(self.paid, 6),
                "reservedInstanceUtilization": round(self.ri_utilization, 4),
                "savingsPlanUtilization": round(self.sp_utilization, 4)}


class Ledger:
    """Bills usage under :class:`Commitments`; see the module docstring."""

    def __init__(self, commitments: Commitments, on_demand_prices: Mapping[str, float]) -> None:
        """``on_demand_prices``: instance type -> on-demand $/h (for RI fees that give no hourlyPrice)."""
        self.commitments = commitments
        self.prices = dict(on_demand_prices)

    def ri_fee(self, ri: ReservedInstance) -> float:
        if ri.hourly_price is not None:
            return ri.hourly_price
        return DEFAULT_RI_FEE_FRACTION * self.prices.get(ri.instance_type, 0.0)

    def bill(self, usage: Sequence[Usage]) -> Bill:
        c = self.commitments
        out = Bill()
        out.ri_left = {}
        for ri in c.reserved_instances:
            key = (ri.instance_type, ri.zone)
            out.ri_left[key] = out.ri_left.get(key, 0) + ri.count
            out.ri_total += ri.count
        out.sp_left = [p.commitment_per_hour for p in c.savings_plans]
        out.sp_total = sum(out.sp_left)
        fixed = sum(self.ri_fee(ri) * ri.count for ri in c.reserved_instances) + out.sp_total
        ordered = sorted(usage, key=lambda u: u.id)
        rest: list[Usage] = []
        for u in ordered:  # zonal RIs first, then regional
            out.on_demand_equivalent += u.list_price
            if u.capacity_type == "on-demand" and self._take_ri(out, u):
                out.billed[u.id] = 0.0
                out.covered_by[u.id] = "RI"
                out.ri_used += 1
            else:
                rest.append(u)
        for u in rest:
            billed, how = self._charge(out, u)
            out.billed[u.id] = billed
            out.covered_by[u.id] = how
        out.paid = fixed + sum(out.billed.values())
        return out

    def marginal(self, bill: Bill, instance_type: str, zone: str, capacity_type: str, list_price: float) -> float:
        """$/h one more instance of this offering would add to ``bill`` (which is not changed)."""
        if capacity_type == "on-demand":
            if bill.ri_left.get((instance_type, zone), 0) > 0 or bill.ri_left.get((instance_type, None), 0) > 0:
                return 0.0
            probe = Bill(ri_left={}, sp_left=list(bill.sp_left))
            return self._charge(probe, Usage("", instance_type, zone, capacity_type, list_price))[0]
        return list_price * (1.0 - self.commitments.discount)

    @staticmethod
    def _take_ri(out: Bill, u: Usage) -> bool:
        for key in ((u.instance_type, u.zone), (u.instance_type, None)):
            if out.ri_left.get(key, 0) > 0:
                out.ri_left[key] -= 1
                return True
        return False

    def _charge(self, out: Bill, u: Usage) -> tuple[float, str]:
        flat = 1.0 - self.commitments.discount
        if u.capacity_type != "on-demand":
            return u.list_price * flat, ""
        remaining = u.list_price  # of list price not yet covered
        how = ""
        for i, plan in enumerate(self.commitments.savings_plans):
            if remaining <= 0 or out.sp_left[i] <= 0 or not plan.covers(u.instance_type):
                continue
            discounted = remaining * (1.0 - plan.discount)
            take = min(out.sp_left[i], discounted)
            out.sp_left[i] -= take
            out.sp_used += take
            remaining -= take / (1.0 - plan.discount)
            how = "SavingsPlan" if remaining <= 1e-12 else "SavingsPlan (partly)"
        return max(0.0, remaining) * flat, how
