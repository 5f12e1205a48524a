"""Static capacity (``NodePool.spec.replicas``, ``FEATURE_GATES=StaticCapacity=true``) on the real control
plane: `karpy controller` keeps the replicas with no pod pending, follows ``kubectl scale nodepool``
(the CRD's scale subresource) up and down, writes ``status.nodes`` and launches nothing for pods into the
static pool. Expectations from Karpenter v1.14's ``pkg/controllers/static/provisioning/suite_test.go`` and
``static/deprovisioning/suite_test.go``; the API server enforces the CRD's CEL rules (only
``limits.nodes`` and no ``weight`` on a static NodePool)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import controller_process as cp
from realcluster import workloads as w
from realcluster.conftest import Scope, running_controller, wait_until
from support import realcluster


@pytest.fixture
def static_controller(real: realcluster.RealCluster, installed: Path, tmp_path: Path) -> Iterator[cp.Controller]:
    with running_controller(real, installed, tmp_path / "karpy.log", env={"FEATURE_GATES": "StaticCapacity=true"}) as c:
        yield c


@pytest.fixture
def static_scope(real: realcluster.RealCluster, static_controller: cp.Controller) -> Iterator[Scope]:
    s = Scope(real)
    yield s
    s.cleanup()


def _static_pool(name: str, replicas: int) -> dict[str, Any]:
    pool = w.nodepool(name)
    pool["spec"]["replicas"] = replicas
    pool["spec"]["limits"] = {"nodes": "4"}
    return pool


def _live(real: realcluster.RealCluster, pool: str) -> list[dict[str, Any]]:
    return [c for c in w.pool_claims(real, pool) if not c["metadata"].get("deletionTimestamp")]


def _initialized(real: realcluster.RealCluster, pool: str) -> int:
    """How many of ``pool``'s live NodeClaims are Initialized (KWOK makes their nodes Ready a moment after)."""
    return sum(1 for c in _live(real, pool) if w.condition(c, "Initialized") == "True")


def test_a_static_nodepool_keeps_its_replicas_and_follows_kubectl_scale(
        real: realcluster.RealCluster, static_scope: Scope, static_controller: cp.Controller) -> None:
    ns = static_scope.namespace("rc-static")
    static_scope.nodepool(_static_pool("warm", 2))
    wait_until(lambda: len(w.pool_nodes(real, "warm")) == 2 and _initialized(real, "warm") == 2, 120,
               lambda: f"2 static nodes with no pod, Initialized:\n{static_controller.log()[-3000:]}")
    wait_until(lambda: real.get_json("nodepool", "warm").get("status", {}).get("nodes") == 2, 60,
               "status.nodes = 2")

    real.kubectl("scale", "nodepool/warm", "--replicas", "3")
    wait_until(lambda: len(_live(real, "warm")) == 3 and len(w.pool_nodes(real, "warm")) == 3, 120,
               lambda: f"3 static nodes after the scale up:\n{static_controller.log()[-3000:]}")

    real.kubectl("scale", "nodepool/warm", "--replicas", "6")  # limits.nodes is 4
    wait_until(lambda: len(_live(real, "warm")) == 4, 120,
               lambda: f"4 static nodes (limits.nodes):\n{static_controller.log()[-3000:]}")

    real.apply([w.deployment("web", ns, 1, cpu="100m", pool="warm")])
    wait_until(lambda: w.running(real, ns, "app=web", 1), 120, "the pod running on a static node")
    real.kubectl("scale", "nodepool/warm", "--replicas", "1")
    wait_until(lambda: len(w.pool_nodes(real, "warm")) == 1 and len(w.pool_claims(real, "warm")) == 1, 180,
               lambda: f"1 static node after the scale down:\n{static_controller.log()[-3000:]}")
    (pod,) = w.pods(real, ns, "app=web")
    assert pod["spec"]["nodeName"] == w.pool_nodes(real, "warm")[0]["metadata"]["name"], \
        "the empty nodes went first: the pod's node stayed"

    real.kubectl("scale", "deployment/web", "-n", ns, "--replicas", "30")
    wait_until(lambda: len(w.pods(real, ns, "app=web")) == 30, 60, "30 pods")
    time.sleep(15)  # several provisioning batches (1 s idle, 3 s max): none may launch into the static pool
    assert len(w.pool_claims(real, "warm")) == 1
    assert static_controller.get("/readyz")[0] == 200


def test_the_api_server_refuses_what_the_crd_refuses_on_a_static_nodepool(
        real: realcluster.RealCluster, static_scope: Scope) -> None:
    pool = _static_pool("refused", 1)
    pool["spec"]["weight"] = 10
    out = real.kubectl("apply", "-f", "-", stdin=json.dumps(pool), check=False)
    assert out.returncode != 0
    assert "'weight' is not supported on static NodePools" in out.stderr
