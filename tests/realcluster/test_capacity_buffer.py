"""CapacityBuffers (``autoscaling.x-k8s.io/v1beta1``, ``FEATURE_GATES=CapacityBuffer=true``) on the real
control plane: the CRD installed from karpy's CRD set and served by the real kube-apiserver, `karpy controller`
launching room for the buffer's chunks that stays free (consolidation leaves it), writing the buffer's
``status.replicas`` and conditions there, and real pods bound by the real kube-scheduler onto that room
without a new launch; then karpy launches the room again (docs/capacity-buffers.md; expectations from
Karpenter v1.14's ``pkg/controllers/provisioning/buffers.go`` and ``capacitybuffer`` controller).

One pod fills one node (1 CPU pods on the 2-CPU ``c-2x-amd64-linux``, the only type the pool allows), so
nodes count pods: 2 for the Deployment, 2 for the buffer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import controller_process as cp
from realcluster import workloads as w
from realcluster.conftest import Scope, running_controller, wait_until
from support import realcluster

POOL = "buffer"
TYPE = "c-2x-amd64-linux"


@pytest.fixture
def buffer_controller(real: realcluster.RealCluster, installed: Path, tmp_path: Path) -> Iterator[cp.Controller]:
    with running_controller(real, installed, tmp_path / "karpy.log", env={"FEATURE_GATES": "CapacityBuffer=true"},
                            crd="capacitybuffers.autoscaling.x-k8s.io") as c:
        yield c


def _pool() -> dict[str, Any]:
    pool = w.nodepool(POOL)  # WhenEmptyOrUnderutilized after 0s: free room would go at once without the buffer
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [TYPE]})
    return pool


def _buffer(ns: str) -> dict[str, Any]:
    return {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": "web-headroom", "namespace": ns},
            "spec": {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"}, "replicas": 2}}


def _conditions(real: realcluster.RealCluster, ns: str) -> dict[str, tuple[str, str]]:
    status = real.get_json("capacitybuffer", "web-headroom", "-n", ns).get("status") or {}
    return {c["type"]: (c["status"], c.get("reason", "")) for c in status.get("conditions") or ()}


def _live_claims(real: realcluster.RealCluster) -> set[str]:
    return {c["metadata"]["name"] for c in w.pool_claims(real, POOL) if not c["metadata"].get("deletionTimestamp")}


def test_a_capacity_buffer_keeps_free_room_that_real_pods_then_start_on_without_a_launch(
        real: realcluster.RealCluster, buffer_controller: cp.Controller) -> None:
    scope = Scope(real)
    try:
        ns = scope.namespace("rc-buffer")
        scope.nodepool(_pool())
        real.apply([w.deployment("web", ns, 2, cpu="1", pool=POOL), _buffer(ns)])
        wait_until(lambda: w.running(real, ns, "app=web", 2), 120,
                   lambda: f"the Deployment's 2 pods Running:\n{buffer_controller.log()[-3000:]}")
        wait_until(lambda: len(_live_claims(real)) == 4 and len(w.pool_nodes(real, POOL)) == 4, 120,
                   lambda: f"4 nodes, 2 of them room for the buffer:\n{buffer_controller.log()[-3000:]}")
        wait_until(lambda: _conditions(real, ns).get("Provisioning") == ("True", "FitsExistingCapacity"), 90,
                   lambda: f"the buffer's Provisioning condition: {_conditions(real, ns)}")
        status = real.get_json("capacitybuffer", "web-headroom", "-n", ns)["status"]
        assert status["replicas"] == 2
        assert _conditions(real, ns)["ReadyForProvisioning"] == ("True", "Resolved")

        room = _live_claims(real)
        time.sleep(15)  # several disruption passes with consolidateAfter 0s: the free room is not consolidated
        assert _live_claims(real) == room, "the buffer's free nodes were disrupted"

        real.kubectl("scale", "deployment/web", "-n", ns, "--replicas", "4")
        scaled = time.monotonic()
        wait_until(lambda: w.running(real, ns, "app=web", 4), 60, "the 2 new pods Running")
        started = time.monotonic() - scaled
        on = {p["spec"]["nodeName"] for p in w.pods(real, ns, "app=web")}
        assert on <= room, f"a pod waited for a new node: {sorted(on - room)} not in the buffer's room {sorted(room)}"
        assert len(on) == 4
        assert started < 30, f"the new pods took {started:.0f}s to run on free room"

        wait_until(lambda: len(_live_claims(real)) == 6, 120,
                   lambda: f"room for the buffer's 2 chunks launched again:\n{buffer_controller.log()[-3000:]}")
        wait_until(lambda: _conditions(real, ns).get("Provisioning") == ("True", "FitsExistingCapacity"), 90,
                   lambda: f"the buffer's Provisioning condition after the relaunch: {_conditions(real, ns)}")
        assert buffer_controller.get("/readyz")[0] == 200
    finally:
        real.kubectl("delete", "capacitybuffer", "--all", "-n", "rc-buffer", "--ignore-not-found", check=False)
        scope.cleanup()
