"""Capacity-reservation slots are counted down within one scheduling run (issue 23's partial item 4):
two NodeClaims of one batch are never both priced into a reservation's last slot."""

from __future__ import annotations

import dataclasses

from karpy.api import labels as wk
from karpy.cloudprovider import instancetype
from karpy.provisioning import reservation_slots, results

from . import builders as b

RID = "cr-0123456789abcdef0"


def _reserved_type(slots: int) -> instancetype.InstanceType:
    t = b.make_type("m5.xlarge", cpu=4, memory_gi=16, price=0.2, zones=("zone-a",),
                    capacity_types=(wk.CAPACITY_TYPE_ON_DEMAND,))
    reserved = instancetype.Offering("zone-a", wk.CAPACITY_TYPE_RESERVED, 0.2 / 10_000_000, reservation_id=RID,
                                     reservation_type="default", reservation_capacity=slots)
    return dataclasses.replace(t, offerings=(*t.offerings, reserved))


def _batch(slots: int, pods: int) -> list[results.NewNodeClaim]:
    pool = b.make_nodepool(requirements=[b.requirement(wk.CAPACITY_TYPE, "In", "on-demand", "reserved")])
    others = b.make_type("m5.2xlarge", cpu=8, memory_gi=32, price=0.3, zones=("zone-a",))
    # one pod per node: each pod takes 3 of the 4 cpus
    res = b.solve(b.make_pods("big", pods, cpu="3"), nodepools=[pool], types=[_reserved_type(slots), others])
    return res.new_claims


def test_two_claims_of_one_batch_do_not_both_take_the_last_reserved_slot() -> None:
    first, second = _batch(slots=1, pods=2)
    assert first.price < 1e-6  # the reservation's slot
    assert second.price == 0.2  # on-demand: the slot is taken
    ct = second.requirements.get(wk.CAPACITY_TYPE)
    assert ct is not None and not ct.has(wk.CAPACITY_TYPE_RESERVED) and ct.has(wk.CAPACITY_TYPE_ON_DEMAND)
    first_ct = first.requirements.get(wk.CAPACITY_TYPE)
    assert first_ct is not None and first_ct.has(wk.CAPACITY_TYPE_RESERVED)


def test_a_reservation_with_three_slots_prices_three_claims_reserved_and_the_fourth_on_demand() -> None:
    claims = _batch(slots=3, pods=4)
    assert [c.price < 1e-6 for c in claims] == [True, True, True, False]


def test_claims_without_reserved_offerings_are_the_same_objects() -> None:
    res = b.solve(b.make_pods("p", 2, cpu="3"), types=b.small_catalog())
    assert reservation_slots.count_down(res.new_claims) == res.new_claims
    assert all(x is y for x, y in zip(reservation_slots.count_down(res.new_claims), res.new_claims, strict=True))
