"""Capacity reservations in the simulated cloud, through every karpy controller, in virtual time.

Expectations from Karpenter's docs (karpenter.sh/docs/tasks/odcrs: reserved offerings are prioritized,
the node labels, capacity blocks are drained before they end) and Karpenter AWS's code and tests:
``reserved_capacity_resolver.go`` (price = on-demand / 10,000,000, available while the reservation has
room), ``capacityreservation/expiration`` (NodeClaims of a capacity block deleted once it is expiring,
40 minutes before its end, ``CapacityReservationFromEC2``), ``nodeclass/capacityreservation.go``
(``status.capacityReservations`` and ``CapacityReservationsReady``).
"""

from __future__ import annotations

import functools
import pathlib
from typing import Any

import pytest

from karpy.api import capacityreservation as cr
from karpy.api import errors as api_errors
from karpy.simulator import engine, scenario

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "capacity-reservation.yaml"
ODCR = "cr-0a1b2c3d4e5f60001"
BLOCK = "cr-0a1b2c3d4e5f60002"


@functools.cache
def _run(text: str | None = None) -> tuple[engine.Simulation, engine.Result]:
    scn = scenario.load(EXAMPLE) if text is None else scenario.load_text(text)
    sim = engine.Simulation(scn)
    return sim, sim.run()


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("labels") or {})


def test_the_reservations_are_filled_first_and_the_rest_is_on_demand() -> None:
    sim, _ = _run()
    launched = sorted(sim.cloud.instances(), key=lambda i: i.launch_time)
    first = [i for i in launched if i.launch_time == launched[0].launch_time]
    reserved = [i for i in first if i.capacity_type == "reserved"]
    assert {i.labels[cr.LABEL_ID] for i in reserved} == {ODCR, BLOCK}
    assert sum(1 for i in reserved if i.labels[cr.LABEL_ID] == ODCR) == 2  # its whole count, no more
    assert sum(1 for i in reserved if i.labels[cr.LABEL_ID] == BLOCK) == 1
    assert [i.capacity_type for i in first if i not in reserved] == ["on-demand"]
    block = next(i for i in reserved if i.labels[cr.LABEL_ID] == BLOCK)
    assert block.labels[cr.LABEL_TYPE] == "capacity-block"
    assert all(i.labels[cr.LABEL_TYPE] == "default" for i in reserved if i is not block)
    assert all(i.price < 1e-6 for i in reserved)  # on-demand / 10,000,000


def test_the_capacity_block_nodeclaim_is_deleted_40_minutes_before_its_end_and_its_pods_move() -> None:
    sim, result = _run()
    block = next(i for i in sim.cloud.instances() if i.labels.get(cr.LABEL_ID) == BLOCK)
    assert block.terminated_at is not None
    ends = result.start + 2 * 3600
    assert ends - cr.EXPIRATION_PERIOD <= block.terminated_at < ends - 30 * 60  # before EC2 would reclaim it
    assert all(p["status"].get("phase") == "Running" for p in result.objects["pods"])
    assert block.nodeclaim_name not in {c["metadata"]["name"] for c in result.objects["nodeclaims"]}


def test_the_odcr_nodes_stay_and_their_nodeclaims_carry_the_labels() -> None:
    _, result = _run()
    reserved = [c for c in result.objects["nodeclaims"] if _labels(c).get("karpenter.sh/capacity-type") == "reserved"]
    assert len(reserved) == 2
    assert {_labels(c)[cr.LABEL_ID] for c in reserved} == {ODCR}


def test_the_ec2nodeclass_status_lists_both_reservations_and_drops_the_block_once_ended() -> None:
    sim, _ = _run(EXAMPLE.read_text(encoding="utf-8").replace("until: 2h", "until: 90m"))
    status = sim.cluster.get("EC2NodeClass", "default")["status"]
    found = {r["id"]: r for r in status["capacityReservations"]}
    assert set(found) == {ODCR, BLOCK}
    assert found[ODCR] == {"availabilityZone": "us-east-1a", "id": ODCR, "instanceMatchCriteria": "targeted",
                           "instanceType": "m5.xlarge", "ownerID": "123456789012", "reservationType": "default",
                           "state": "active"}
    assert found[BLOCK]["reservationType"] == "capacity-block"
    assert found[BLOCK]["state"] == "expiring"  # at 90m: inside the block's last 40 minutes
    assert "endTime" in found[BLOCK]
    assert any(c["type"] == "CapacityReservationsReady" and c["status"] == "True" for c in status["conditions"])
    ended, _ = _run()  # at 2h the block has ended: EC2 no longer lists it
    ids = [r["id"] for r in ended.cluster.get("EC2NodeClass", "default")["status"]["capacityReservations"]]
    assert ids == [ODCR]


def _without_gate(text: str) -> str:
    return text.replace("    clusterName: odcr-demo\n", "    clusterName: odcr-demo\n"
                        "    featureGates: {ReservedCapacity: false}\n")


def test_with_the_reserved_capacity_gate_off_nothing_is_reserved() -> None:
    text = _without_gate(EXAMPLE.read_text(encoding="utf-8"))
    assert "ReservedCapacity: false" in text
    sim, _ = _run(text)
    assert {i.capacity_type for i in sim.cloud.instances()} == {"on-demand"}
    assert "capacityReservations" not in (sim.cluster.get("EC2NodeClass", "default").get("status") or {})


def test_a_nodepool_without_reserved_in_its_capacity_types_never_uses_the_reservations() -> None:
    text = EXAMPLE.read_text(encoding="utf-8").replace("values: [reserved, on-demand]", "values: [on-demand]")
    sim, _ = _run(text)
    assert {i.capacity_type for i in sim.cloud.instances()} == {"on-demand"}


@pytest.mark.parametrize(("entry", "field"), [
    ("{id: bad, instanceType: m5.large, zone: us-east-1a, count: 1}", "id"),
    ("{id: cr-1, instanceType: m5.large, zone: us-east-1a, count: 1, type: capacity-block}", "endAfter"),
    ("{id: cr-1, instanceType: m5.large, zone: us-east-1a, count: 1, type: weekly}", "type"),
    ("{id: cr-1, instanceType: m5.large, zone: us-east-1a}", "count"),
])
def test_a_bad_reservation_in_the_scenario_is_an_error_naming_the_field(entry: str, field: str) -> None:
    text = f"""
apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {{name: bad}}
spec:
  cloud:
    provider: aws
    region: us-east-1
    capacityReservations: [{entry}]
"""
    with pytest.raises(api_errors.ValidationError, match=f"capacityReservations\\[0\\].{field}"):
        scenario.load_text(text)
