"""karpy's AWS provider and capacity reservations, against moto with the test world's EC2 reservations
(:mod:`.moto_reservations`): request bodies checked field by field.

Expectations from karpenter-provider-aws: ``pkg/providers/capacityreservation/types.go`` (the
DescribeCapacityReservations queries), ``pkg/controllers/nodeclass/capacityreservation.go`` (status and
``CapacityReservationsReady``), ``offering/reserved_capacity_resolver.go`` (price = on-demand / 10,000,000),
``pkg/providers/launchtemplate/types.go`` (``CapacityReservationSpecification``, capacity-block market
type, od/spot opting out of open ODCRs), ``pkg/providers/instance/types.go`` ``CreateFleetInputBuilder``
(``DefaultTargetCapacityType`` on-demand / capacity-block, no on-demand options for a block),
``pkg/providers/instance/instance.go`` (reserved first; a full reservation marked unavailable) and
``capacityreservation/expiration`` (a block expiring 40 minutes before its end).
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from karpy.api import capacityreservation as cr
from karpy.api import nodeclaim

from . import moto_reservations, moto_world
from .conftest import AWS, PRICES

pytestmark = pytest.mark.e2e

ODCR = "cr-0aaaaaaaaaaaaaaa1"
BLOCK = "cr-0bbbbbbbbbbbbbbb2"
OTHER = "cr-0ccccccccccccccc3"


def _world(aws: AWS, *, odcr_count: int = 1, block_end: datetime.datetime | None = None) -> \
        moto_reservations.CapacityReservations:
    end = block_end or datetime.datetime.fromtimestamp(aws.clock.now() + 6 * 3600, tz=datetime.UTC)
    table = [moto_reservations.reservation(ODCR, "m5.large", "us-east-1a", odcr_count, tags={"team": "ml"}),
             moto_reservations.reservation(BLOCK, "m5.xlarge", "us-east-1b", 1, kind="capacity-block", end=end),
             moto_reservations.reservation(OTHER, "c5.large", "us-east-1a", 5, match="open", tags={"team": "web"})]
    world = moto_reservations.CapacityReservations(aws.url, table)
    world.attach(aws.provider.session.ec2)
    return world


def _claim(name: str, types: list[str], capacity_types: list[str]) -> nodeclaim.NodeClaim:
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [
                     {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
                     {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity_types}],
                 "resources": {"requests": {"cpu": "1"}}}})


def _template_data(aws: AWS, request: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for config in request["LaunchTemplateConfigs"]:
        name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
        out.append(aws.ec2.describe_launch_template_versions(LaunchTemplateName=name, Versions=["$Latest"])[
            "LaunchTemplateVersions"][0]["LaunchTemplateData"])
    return out


def _node_class(aws: AWS) -> dict[str, Any]:
    return aws.node_class(capacityReservationSelectorTerms=[
        {"tags": {"team": "ml"}, "ownerID": "123456789012"}, {"id": BLOCK}])


def test_the_selector_terms_become_karpenters_describe_requests_and_the_status_lists_what_they_find(
        aws: AWS) -> None:
    world = _world(aws)
    obj = aws.node_class(capacityReservationSelectorTerms=[
        {"id": BLOCK},
        {"tags": {"team": "ml", "env": "*"}, "ownerID": "123456789012", "instanceMatchCriteria": "targeted"}])
    status = aws.provider.resolve_node_class(obj)
    assert world.describes[0] == {"Filters": [{"Name": "state", "Values": ["active"]}],
                                  "CapacityReservationIds": [BLOCK]}
    assert world.describes[1] == {"Filters": [
        {"Name": "state", "Values": ["active"]}, {"Name": "owner-id", "Values": ["123456789012"]},
        {"Name": "tag-key", "Values": ["env"]}, {"Name": "tag:team", "Values": ["ml"]},
        {"Name": "instance-match-criteria", "Values": ["targeted"]}], "MaxResults": 1000}
    assert [r["id"] for r in status["capacityReservations"]] == [BLOCK]  # no ODCR carries the env tag
    [block] = status["capacityReservations"]
    assert block == {"availabilityZone": "us-east-1b", "id": BLOCK, "instanceMatchCriteria": "targeted",
                     "instanceType": "m5.xlarge", "ownerID": "123456789012", "reservationType": "capacity-block",
                     "state": "active", "endTime": block["endTime"]}
    ready = {c["type"]: c["status"] for c in status["conditions"]}
    assert ready["CapacityReservationsReady"] == "True" and ready["Ready"] == "True"


def test_a_reserved_offering_is_priced_at_on_demand_over_ten_million_and_launched_first(aws: AWS) -> None:
    world = _world(aws)
    _node_class(aws)
    pool = aws.provider.get_instance_types(None)  # no NodePool: the catalog without reservations
    assert all(o.capacity_type != "reserved" for t in pool for o in t.offerings)
    launched = aws.provider.create(_claim("res-a", ["m5.large", "c5.large"], ["reserved", "on-demand"]))
    request = world.fleets[-1]
    assert request["TargetCapacitySpecification"] == {"TotalTargetCapacity": 1,
                                                      "DefaultTargetCapacityType": "on-demand"}
    assert request["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    overrides = [o for c in request["LaunchTemplateConfigs"] for o in c["Overrides"]]
    assert [(o["InstanceType"], o["SubnetId"]) for o in overrides] == [("m5.large", aws.account.subnets["us-east-1a"])]
    [data] = _template_data(aws, request)
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": ODCR}}
    assert "InstanceMarketOptions" not in data
    lb = launched.metadata.labels
    assert (lb["karpenter.sh/capacity-type"], lb[cr.LABEL_ID], lb[cr.LABEL_TYPE]) == ("reserved", ODCR, "default")
    assert (lb["topology.kubernetes.io/zone"], lb["node.kubernetes.io/instance-type"]) == ("us-east-1a", "m5.large")
    assert world.available(ODCR) == 0
    assert aws.provider.reservations.availability.get(ODCR) == 0  # counted down on launch


def test_a_full_reservation_is_not_offered_and_the_next_launch_is_on_demand_opting_out_of_open_odcrs(
        aws: AWS) -> None:
    world = _world(aws)
    _node_class(aws)
    aws.provider.create(_claim("res-a", ["m5.large"], ["reserved", "on-demand"]))
    second = aws.provider.create(_claim("res-b", ["m5.large"], ["reserved", "on-demand"]))
    assert second.metadata.labels["karpenter.sh/capacity-type"] == "on-demand"
    assert cr.LABEL_ID not in second.metadata.labels
    request = world.fleets[-1]
    assert request["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert all(d["CapacityReservationSpecification"] == {"CapacityReservationPreference": "none"}
               for d in _template_data(aws, request))


def test_when_ec2_finds_the_reservation_full_it_is_marked_unavailable_and_the_launch_falls_back(aws: AWS) -> None:
    world = _world(aws)
    _node_class(aws)
    aws.provider.resolver.resolve(aws.provider._node_class("default"))  # karpy counts one free slot
    world.table[ODCR]["AvailableInstanceCount"] = 0  # another cluster took it meanwhile
    launched = aws.provider.create(_claim("res-a", ["m5.large"], ["reserved", "on-demand"]))
    assert launched.metadata.labels["karpenter.sh/capacity-type"] == "on-demand"
    assert [f["TargetCapacitySpecification"]["DefaultTargetCapacityType"] for f in world.fleets] == \
        ["on-demand", "on-demand"]
    assert aws.provider.reservations.availability.get(ODCR) == 0


def test_a_capacity_block_launch_uses_the_capacity_block_market_and_expires_40_minutes_before_its_end(
        aws: AWS) -> None:
    end = datetime.datetime.fromtimestamp(aws.clock.now() + 2 * 3600, tz=datetime.UTC)
    world = _world(aws, block_end=end)
    _node_class(aws)
    launched = aws.provider.create(_claim("blk-a", ["m5.xlarge"], ["reserved"]))
    request = world.fleets[-1]
    assert request["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "capacity-block"
    assert "OnDemandOptions" not in request and "SpotOptions" not in request
    [data] = _template_data(aws, request)
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"] == {"CapacityReservationId": BLOCK}
    assert launched.metadata.labels[cr.LABEL_TYPE] == "capacity-block"
    assert aws.provider.expiring_reservations([BLOCK, ODCR]) == set()
    aws.clock.advance(2 * 3600 - cr.EXPIRATION_PERIOD)
    assert aws.provider.expiring_reservations([BLOCK, ODCR]) == {BLOCK}
    assert world.describes[-1] == {"CapacityReservationIds": sorted([BLOCK, ODCR])}


def test_terminating_a_reserved_instance_gives_its_slot_back(aws: AWS) -> None:
    world = _world(aws)
    _node_class(aws)
    launched = aws.provider.create(_claim("res-a", ["m5.large"], ["reserved", "on-demand"]))
    assert aws.provider.reservations.availability.get(ODCR) == 0
    aws.provider.delete(launched)
    assert aws.provider.reservations.availability.get(ODCR) == 1
    assert world.available(ODCR) == 1
    again = aws.provider.create(_claim("res-b", ["m5.large"], ["reserved", "on-demand"]))
    assert again.metadata.labels["karpenter.sh/capacity-type"] == "reserved"


def test_the_reserved_offering_carries_karpenters_tiny_price(aws: AWS) -> None:
    _world(aws)
    _node_class(aws)
    nc = aws.provider._node_class("default")
    types = {t.name: t for t in aws.provider._types(nc, aws.provider._resolved(nc))}
    [o] = [o for o in types["m5.large"].offerings if o.capacity_type == "reserved"]
    assert o.price == pytest.approx(PRICES["m5.large"] / 10_000_000)
    assert (o.zone, o.reservation_id, o.reservation_capacity, o.available) == ("us-east-1a", ODCR, 1, True)
    assert moto_world.REGION == "us-east-1"
