"""Reserved offerings and reservation availability, as Karpenter AWS builds and counts them.

Expectations from karpenter-provider-aws: ``pkg/providers/instancetype/offering/reserved_capacity_resolver.go``
(one reserved offering per reservation of the type; price = on-demand / 10,000,000; available only with
capacity left, in one of the type's zones and not expiring), ``pkg/providers/capacityreservation/types.go``
(the availability cache: a launch counts one down but never below zero, a termination one up, a failed
launch makes it zero), ``pkg/apis/v1/ec2nodeclass_status.go`` ``CapacityReservationFromEC2`` (a capacity
block is expiring 40 minutes before its end) and ``capacityreservation/types.go`` (the selector terms).
"""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import capacityreservation as cr
from karpy.api import errors as api_errors
from karpy.api import fields, nodeclass
from karpy.cloudprovider import instancetype, reservations

T0 = 1_800_000_000.0


def _type(name: str = "m5.large", zones: tuple[str, ...] = ("us-east-1a", "us-east-1b"),
          price: float = 0.096) -> instancetype.InstanceType:
    offers = tuple(instancetype.Offering(z, ct, price if ct == "on-demand" else price / 3)
                   for z in zones for ct in ("on-demand", "spot"))
    return instancetype.InstanceType(name, {}, {"cpu": 2000}, instancetype.Overhead(), offers)


def _res(rid: str = "cr-1", *, zone: str = "us-east-1a", kind: str = cr.TYPE_DEFAULT,
         end: float | None = None, **kw: object) -> cr.Reservation:
    return cr.Reservation(id=rid, instance_type="m5.large", zone=zone, owner_id="123456789012",
                          reservation_type=kind, total=2, available=2, end_time=end, **kw)  # type: ignore[arg-type]


def _avail(**counts: int) -> reservations.Availability:
    a = reservations.Availability()
    a.sync({k.replace("_", "-"): v for k, v in counts.items()})
    return a


def _reserved(t: instancetype.InstanceType) -> list[instancetype.Offering]:
    return [o for o in t.offerings if o.capacity_type == "reserved"]


def test_a_reservation_adds_one_reserved_offering_priced_at_on_demand_over_ten_million() -> None:
    [t] = reservations.with_reserved_offerings([_type()], [_res()], _avail(cr_1=2), T0)
    [o] = _reserved(t)
    assert o.price == pytest.approx(0.096 / 10_000_000)
    assert (o.zone, o.reservation_id, o.reservation_type, o.reservation_capacity, o.available) == \
        ("us-east-1a", "cr-1", "default", 2, True)
    assert len(t.offerings) == 5


def test_a_full_reservation_is_offered_but_unavailable() -> None:
    [t] = reservations.with_reserved_offerings([_type()], [_res()], _avail(cr_1=0), T0)
    assert [o.available for o in _reserved(t)] == [False]


def test_a_reservation_in_a_zone_the_type_is_not_offered_in_is_unavailable() -> None:
    [t] = reservations.with_reserved_offerings([_type(zones=("us-east-1b",))], [_res()], _avail(cr_1=2), T0)
    assert [o.available for o in _reserved(t)] == [False]


def test_an_expiring_capacity_block_is_unavailable_and_an_active_one_is_not() -> None:
    end = T0 + 3600
    block = _res(kind=cr.TYPE_CAPACITY_BLOCK, end=end)
    assert block.state(end - cr.EXPIRATION_PERIOD - 1) == cr.STATE_ACTIVE
    assert block.state(end - cr.EXPIRATION_PERIOD) == cr.STATE_EXPIRING
    assert _res(end=end).state(end) == cr.STATE_ACTIVE  # only capacity blocks expire this way
    [t] = reservations.with_reserved_offerings([_type()], [block], _avail(cr_1=1), end - 60)
    assert [o.available for o in _reserved(t)] == [False]


def test_other_types_are_left_alone() -> None:
    other = _type("c5.large")
    out = reservations.with_reserved_offerings([other], [_res()], _avail(cr_1=2), T0)
    assert out[0] is other


def test_availability_counts_down_on_launch_never_below_zero_up_on_termination_and_zero_when_full() -> None:
    a = _avail(cr_1=1)
    a.launched("cr-1")
    a.launched("cr-1")
    assert a.get("cr-1") == 0
    a.terminated("cr-1")
    assert a.get("cr-1") == 1
    a.unavailable(["cr-1"])
    assert a.get("cr-1") == 0
    a.terminated("cr-unknown")
    assert a.get("cr-unknown") == 0


def test_the_reserved_labels_name_the_reservation_and_its_type() -> None:
    o = instancetype.Offering("us-east-1a", "reserved", 0.0, reservation_id="cr-1", reservation_type="capacity-block")
    assert reservations.reserved_labels(o) == {cr.LABEL_ID: "cr-1", cr.LABEL_TYPE: "capacity-block"}
    assert reservations.reserved_labels(instancetype.Offering("us-east-1a", "on-demand", 0.1)) == {}


def test_selector_terms_match_by_id_alone_or_by_tags_owner_and_match_criteria_together() -> None:
    r = _res(tags={"team": "ml", "env": "prod"}, instance_match_criteria="open")
    assert r.matches(cr.Term(id="cr-1")) and not r.matches(cr.Term(id="cr-2"))
    assert r.matches(cr.Term(tags={"team": "ml"}))
    assert r.matches(cr.Term(tags={"env": "*"}))
    assert not r.matches(cr.Term(tags={"team": "web"}))
    assert r.matches(cr.Term(tags={"team": "ml"}, owner_id="123456789012", instance_match_criteria="open"))
    assert not r.matches(cr.Term(instance_match_criteria="targeted"))
    assert not r.matches(cr.Term(owner_id="999999999999", tags={"team": "ml"}))


def test_ended_reservations_are_not_selected() -> None:
    ended = _res("cr-2", end=T0 - 1)
    assert [r.id for r in cr.selected([_res(), ended], (cr.Term(tags={}),), T0)] == ["cr-1"]


def test_the_ec2nodeclass_reads_its_terms_and_they_do_not_change_its_drift_hash() -> None:
    base: dict[str, Any] = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                            "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r",
                     "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]}}
    with_terms = {**base, "spec": {**base["spec"], "capacityReservationSelectorTerms": [
        {"id": "cr-1"}, {"tags": {"team": "ml"}, "ownerID": "123456789012", "instanceMatchCriteria": "open"}]}}
    nc = nodeclass.EC2NodeClass.from_manifest(with_terms)
    assert nc.capacity_reservation_selector_terms == (
        cr.Term(id="cr-1"), cr.Term(tags={"team": "ml"}, owner_id="123456789012", instance_match_criteria="open"))
    assert nc.spec_dict()["capacityReservationSelectorTerms"][1] == {
        "instanceMatchCriteria": "open", "ownerID": "123456789012", "tags": {"team": "ml"}}
    assert nc.hash() == nodeclass.EC2NodeClass.from_manifest(base).hash()
    assert "capacityReservationSelectorTerms" not in nodeclass.EC2NodeClass.from_manifest(base).spec_dict()


def test_a_term_with_an_unknown_match_criteria_is_an_error_naming_the_field() -> None:
    with pytest.raises(api_errors.ValidationError, match="instanceMatchCriteria"):
        cr.Term.parse(fields.Fields({"instanceMatchCriteria": "closed"}, "EC2NodeClass default"))


def _req(key: str, op: str, *values: str) -> Any:
    from karpy.api import selectors
    return selectors.NodeSelectorRequirement(key, op, tuple(values))


def test_a_launch_honours_requirements_on_the_reservation_labels() -> None:
    """Karpenter's reserved offerings carry the reservation id and type as requirements: a NodeClaim asking
    for capacity blocks only matches their offerings (an on-demand offering lacks the label)."""
    from karpy.cloudprovider.fake import capacity
    block = _res("cr-2", kind=cr.TYPE_CAPACITY_BLOCK, end=T0 + 7200)
    types = reservations.with_reserved_offerings([_type()], [_res(), block], _avail(cr_1=1, cr_2=1), T0)
    defined = frozenset({"node.kubernetes.io/instance-type"})

    def offered(*reqs: Any) -> set[tuple[str, str]]:
        return {(c.offering.capacity_type, c.offering.reservation_id)
                for c in capacity.candidates(types, list(reqs), {}, "us-east-1", defined)}

    assert offered(_req(cr.LABEL_TYPE, "In", "capacity-block")) == {("reserved", "cr-2")}
    assert offered(_req(cr.LABEL_ID, "In", "cr-1")) == {("reserved", "cr-1")}
    assert ("on-demand", "") in offered(_req(cr.LABEL_TYPE, "NotIn", "capacity-block"))
    assert ("reserved", "cr-2") not in offered(_req(cr.LABEL_TYPE, "NotIn", "capacity-block"))
    assert offered() == {("on-demand", ""), ("spot", ""), ("reserved", "cr-1"), ("reserved", "cr-2")}
