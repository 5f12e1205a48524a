"""ProviderBridge: any cloud provider's launches and terminations become simulated Nodes."""

from __future__ import annotations

import random

import pytest

from karpy.api import nodeclaim
from karpy.cloudprovider import errors
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.simulator import provider_bridge

from . import conftest


def _claim(name: str) -> nodeclaim.NodeClaim:
    manifest = conftest.nodeclaim(name)
    del manifest["spec"]["nodeClassRef"]
    manifest["spec"]["requirements"] = manifest["spec"]["requirements"][2:]
    return nodeclaim.NodeClaim.from_manifest(manifest)


def _bridge(w: conftest.World) -> tuple[provider_bridge.ProviderBridge, fake_provider.SimulatedCloud]:
    cloud = fake_provider.SimulatedCloud(w.clock, random.Random(3), catalog="aws")
    return provider_bridge.ProviderBridge(cloud, w.kubelet, clock=w.clock, sync_interval=30.0), cloud


def test_a_launch_through_the_bridge_registers_a_node_built_from_the_returned_nodeclaim() -> None:
    w = conftest.make_world(jitter=0.0)
    bridge, _ = _bridge(w)
    launched = bridge.create(_claim("default-a"))
    w.run_for(61)
    nodes = w.cluster.list("Node")
    assert [n["spec"]["providerID"] for n in nodes] == [launched.status.provider_id]
    lb = nodes[0]["metadata"]["labels"]
    assert lb["node.kubernetes.io/instance-type"] == launched.metadata.labels["node.kubernetes.io/instance-type"]
    assert lb["topology.kubernetes.io/zone"] == launched.metadata.labels["topology.kubernetes.io/zone"]
    assert bridge.launched == 1
    assert bridge.cost_per_hour() > 0


def test_a_delete_removes_the_node_and_a_second_delete_still_says_not_found() -> None:
    w = conftest.make_world(jitter=0.0)
    bridge, _ = _bridge(w)
    launched = bridge.create(_claim("default-b"))
    w.run_for(61)
    bridge.delete(launched)
    w.run_for(1)
    assert w.cluster.list("Node") == []
    with pytest.raises(errors.NodeClaimNotFoundError):
        bridge.delete(launched)
    assert bridge.terminated == 1
    assert bridge.cost_per_hour() == 0
    assert bridge.accrued_cost() > 0


def test_an_instance_the_cloud_terminates_on_its_own_loses_its_node_at_the_next_sync() -> None:
    w = conftest.make_world(jitter=0.0)
    bridge, cloud = _bridge(w)
    claim = _claim("default-c")
    launched = bridge.create(claim)
    w.run_for(61)
    assert len(w.cluster.list("Node")) == 1
    bridge.settle()  # starts the sync timer
    cloud.interrupt(launched.status.provider_id, "StateChange")
    w.run_for(31)
    bridge.settle()
    w.run_for(1)
    assert w.cluster.list("Node") == []
    assert bridge.terminated == 1


def test_interruption_queue_calls_are_delegated_to_the_provider() -> None:
    w = conftest.make_world(jitter=0.0)
    bridge, _ = _bridge(w)
    launched = bridge.create(_claim("default-d"))
    bridge.interrupt(launched.status.provider_id, "Rebalance")
    pending = bridge.pending_interruptions()
    assert [m.kind for m in pending] == ["Rebalance"]
    bridge.ack(pending[0])
    assert bridge.pending_interruptions() == []
