"""Commitments billed as AWS bills them: RIs, then Savings Plans, then list price less the flat discount."""

from __future__ import annotations

import pytest

from karpy.api import errors
from karpy.cloudprovider import commitments as cm

PRICES = {"m5.xlarge": 0.192, "m5.large": 0.096, "c5.xlarge": 0.17}


def usage(i: int, itype: str = "m5.xlarge", zone: str = "us-east-1a", ct: str = "on-demand") -> cm.Usage:
    price = PRICES[itype] if ct == "on-demand" else PRICES[itype] / 3
    return cm.Usage(f"i-{i:03d}", itype, zone, ct, price)


def test_reserved_instances_cover_matching_on_demand_instances_and_cost_their_fee_used_or_not() -> None:
    ledger = cm.Ledger(cm.parse({"reservedInstances": [{"instanceType": "m5.xlarge", "count": 2}]}), PRICES)
    bill = ledger.bill([usage(1), usage(2), usage(3), usage(4, "m5.large")])
    assert [bill.covered_by[f"i-{i:03d}"] for i in (1, 2, 3, 4)] == ["RI", "RI", "", ""]
    assert bill.billed["i-003"] == pytest.approx(0.192) and bill.billed["i-001"] == 0.0
    assert bill.paid == pytest.approx(2 * 0.6 * 0.192 + 0.192 + 0.096)
    assert bill.on_demand_equivalent == pytest.approx(3 * 0.192 + 0.096)
    assert bill.ri_utilization == 1.0
    idle = ledger.bill([])
    assert idle.paid == pytest.approx(2 * 0.6 * 0.192) and idle.ri_utilization == 0.0


def test_a_zonal_ri_covers_only_its_zone_and_spot_is_never_covered() -> None:
    ledger = cm.Ledger(cm.parse({"reservedInstances": [{"instanceType": "m5.xlarge", "count": 1,
                                                        "zone": "us-east-1b"}]}), PRICES)
    bill = ledger.bill([usage(1, zone="us-east-1a"), usage(2, ct="spot", zone="us-east-1b")])
    assert bill.covered_by == {"i-001": "", "i-002": ""}
    assert ledger.marginal(bill, "m5.xlarge", "us-east-1b", "on-demand", 0.192) == 0.0
    assert ledger.marginal(bill, "m5.xlarge", "us-east-1a", "on-demand", 0.192) == pytest.approx(0.192)


def test_a_savings_plan_covers_usage_at_its_discount_up_to_its_commitment_then_list_price() -> None:
    plan = {"savingsPlans": [{"type": "Compute", "commitmentPerHour": 0.2, "discount": 0.5}]}
    ledger = cm.Ledger(cm.parse(plan), PRICES)
    bill = ledger.bill([usage(1), usage(2), usage(3)])  # 0.096 each at the discount: 0.2 covers 2.08 of them
    assert bill.covered_by["i-001"] == "SavingsPlan" and bill.covered_by["i-002"] == "SavingsPlan"
    assert bill.covered_by["i-003"] == "SavingsPlan (partly)"
    assert bill.billed["i-003"] == pytest.approx(0.192 - 0.008 / 0.5)
    assert bill.sp_utilization == pytest.approx(1.0)
    assert bill.paid == pytest.approx(0.2 + bill.billed["i-003"])
    assert ledger.marginal(bill, "m5.large", "us-east-1a", "on-demand", 0.096) == pytest.approx(0.096)


def test_an_ec2_instance_plan_covers_only_its_family_and_applies_before_a_compute_plan() -> None:
    parsed = cm.parse({"savingsPlans": [{"type": "Compute", "commitmentPerHour": 1, "discount": 0.2},
                                        {"type": "EC2Instance", "family": "c5", "commitmentPerHour": 1,
                                         "discount": 0.4}]})
    assert [p.type for p in parsed.savings_plans] == ["EC2Instance", "Compute"]
    bill = cm.Ledger(parsed, PRICES).bill([usage(1, "c5.xlarge"), usage(2, "m5.xlarge")])
    assert bill.sp_used == pytest.approx(0.17 * 0.6 + 0.192 * 0.8)


def test_a_flat_discount_applies_to_what_is_billed_at_list_price_spot_included() -> None:
    ledger = cm.Ledger(cm.parse({"discount": 0.1}), PRICES)
    bill = ledger.bill([usage(1), usage(2, ct="spot")])
    assert bill.billed["i-001"] == pytest.approx(0.192 * 0.9)
    assert bill.billed["i-002"] == pytest.approx(0.064 * 0.9)


@pytest.mark.parametrize(("data", "path"), [
    ({"reservedInstances": [{"instanceType": "m5.xlarge", "count": 0}]}, "reservedInstances[0].count"),
    ({"savingsPlans": [{"type": "EC2Instance", "commitmentPerHour": 1, "discount": 0.3}]}, "savingsPlans[0].family"),
    ({"savingsPlans": [{"type": "Compute", "commitmentPerHour": 1, "discount": 1.5}]}, "savingsPlans[0].discount"),
    ({"discount": float("nan")}, "discount"),
    ({"reservedInstance": []}, "reservedInstance"),
])
def test_bad_commitments_are_errors_naming_the_field(data: dict[str, object], path: str) -> None:
    with pytest.raises(errors.ValidationError) as err:
        cm.parse(data)
    assert path in str(err.value)
