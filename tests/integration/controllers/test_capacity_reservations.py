"""Capacity reservations through karpy's controllers on the simulated cloud, in virtual time.

Expectations from Karpenter AWS: reserved offerings launched first and counted
(``reserved_capacity_resolver.go``, ``capacityreservation/types.go`` availability cache) and
``capacityreservation/expiration/controller.go`` (every minute, NodeClaims whose reservation is an
expiring capacity block are deleted; "initiating delete for capacity block expiration").
"""

from __future__ import annotations

import logging

import pytest

from karpy.api import capacityreservation as cr
from karpy.api import nodeclass
from karpy.cloudprovider.fake import reservations as fake_reservations

from . import builders as b

TYPE = "fake-it-0"
ZONE = "test-zone-1"


def _world(*reservations: cr.Reservation) -> b.World:
    w = b.make_world()
    w.cloud.reservations = fake_reservations.SimulatedReservations(reservations)
    # the test world's cloud looks no NodeClass up by default; reservations are selected by the EC2NodeClass
    w.cloud._node_classes = lambda name: nodeclass.EC2NodeClass.from_manifest(w.cluster.get("EC2NodeClass", name))
    nc = b.nodeclass_manifest()
    nc["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"team": "ml"}}]
    w.cluster.update(nc | {"metadata": w.cluster.get("EC2NodeClass", "default")["metadata"]})
    w.cluster.create(b.nodepool_manifest(requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [TYPE]}]))
    return w


def _res(rid: str, count: int, *, kind: str = cr.TYPE_DEFAULT, end: float | None = None) -> cr.Reservation:
    return cr.Reservation(id=rid, instance_type=TYPE, zone=ZONE, owner_id="123456789012", reservation_type=kind,
                          total=count, available=count, end_time=end, tags={"team": "ml"})


def _pods(w: b.World, n: int) -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"role": "one-per-node"}}}]}}
    for i in range(n):
        pod = b.pending_pod(f"p{i}", affinity=anti)
        pod["metadata"]["labels"]["role"] = "one-per-node"
        w.cluster.create(pod)


def test_two_slots_take_two_nodes_and_the_third_node_is_on_demand() -> None:
    w = _world(_res("cr-1", 2))
    _pods(w, 3)
    w.run_for(120.0)
    kinds = sorted(c["metadata"]["labels"]["karpenter.sh/capacity-type"] for c in w.nodeclaims())
    assert kinds == ["on-demand", "reserved", "reserved"]
    reserved = [c for c in w.nodeclaims() if c["metadata"]["labels"]["karpenter.sh/capacity-type"] == "reserved"]
    assert all(c["metadata"]["labels"][cr.LABEL_ID] == "cr-1" for c in reserved)
    assert all(c["metadata"]["labels"]["topology.kubernetes.io/zone"] == ZONE for c in reserved)
    assert w.cloud.reservations.availability.get("cr-1") == 0


def test_a_deleted_reserved_node_frees_its_slot_for_the_next_launch() -> None:
    w = _world(_res("cr-1", 1))
    _pods(w, 1)
    w.run_for(120.0)
    [claim] = w.nodeclaims()
    assert claim["metadata"]["labels"]["karpenter.sh/capacity-type"] == "reserved"
    w.cluster.delete("NodeClaim", claim["metadata"]["name"])
    w.run_for(300.0)  # its instance terminates; the still-pending pod gets a new NodeClaim, in the freed slot
    [again] = [c for c in w.nodeclaims() if c["metadata"]["name"] != claim["metadata"]["name"]]
    assert again["metadata"]["labels"]["karpenter.sh/capacity-type"] == "reserved"
    assert again["metadata"]["labels"][cr.LABEL_ID] == "cr-1"
    assert len(w.running_instances()) == 1


def test_an_expiring_capacity_block_nodeclaim_is_deleted_within_a_minute_with_karpenters_log_line(
        caplog: pytest.LogCaptureFixture) -> None:
    w0 = b.make_world()
    end = w0.clock.now() + 3 * 3600
    w = _world(_res("cr-blk", 1, kind=cr.TYPE_CAPACITY_BLOCK, end=end))
    _pods(w, 1)
    w.run_for(120.0)
    [claim] = w.nodeclaims()
    assert claim["metadata"]["labels"][cr.LABEL_TYPE] == "capacity-block"
    name = claim["metadata"]["name"]
    with caplog.at_level(logging.INFO, logger="karpy.controllers.reservation_expiration"):
        w.run_until(end - cr.EXPIRATION_PERIOD - 1)
        assert name in {c["metadata"]["name"] for c in w.nodeclaims()}
        w.run_until(end - cr.EXPIRATION_PERIOD + 61)
    assert name not in {c["metadata"]["name"] for c in w.nodeclaims()} or \
        w.cluster.get("NodeClaim", name)["metadata"].get("deletionTimestamp")
    assert any(r.getMessage() == "initiating delete for capacity block expiration" for r in caplog.records)
