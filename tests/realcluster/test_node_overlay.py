"""NodeOverlay on the real control plane: karpy's CRD served by the real kube-apiserver, `karpy controller`
(gate NodeOverlay on, as the chart's ServiceAccount) watching the overlay through the Kubernetes adapter,
writing its status, and launching the KWOK type the overlay makes cheapest.

Without the overlay the NodePool's cheapest type for a 1-CPU pod is c-2x-amd64-linux ($0.054/h on demand)
rather than m-2x-amd64-linux ($0.067/h); the overlay prices the m family at $0.001/h (Karpenter's docs:
``price`` overrides the price the scheduling simulation uses; its AWS provider then launches in overlaid-price
order, ``karpenter.sh/price-overlay-applied``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import controller_process as cp
from realcluster import workloads as w
from realcluster.conftest import Scope, running_controller, wait_until
from support import realcluster

POOL = "overlay"
OVERLAY = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "m-is-cheap"},
           "spec": {"weight": 10, "price": "0.001",
                    "requirements": [{"key": "karpenter.kwok.sh/instance-family", "operator": "In", "values": ["m"]}]}}


@pytest.fixture
def overlay_controller(real: realcluster.RealCluster, installed: Path, tmp_path: Path) -> Iterator[cp.Controller]:
    """`karpy controller` with the NodeOverlay gate on (Karpenter's default is off)."""
    with running_controller(real, installed, tmp_path / "karpy.log", env={"FEATURE_GATES": "NodeOverlay=true"},
                            crd="nodeoverlays.karpenter.sh") as c:
        yield c


def _pool() -> dict[str, Any]:
    pool = w.nodepool(POOL)
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "node.kubernetes.io/instance-type", "operator": "In",
         "values": ["c-2x-amd64-linux", "m-2x-amd64-linux"]})
    return pool


def _validation(real: realcluster.RealCluster) -> str | None:
    obj = real.get_json("nodeoverlay", "m-is-cheap")
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == "ValidationSucceeded":
            return str(c.get("status"))
    return None


def test_karpy_launches_the_type_a_nodeoverlay_makes_cheapest(real: realcluster.RealCluster,
                                                              overlay_controller: cp.Controller) -> None:
    scope = Scope(real)
    try:
        real.apply([OVERLAY])
        wait_until(lambda: _validation(real) == "True", 60,
                   lambda: f"the NodeOverlay's ValidationSucceeded condition:\n{overlay_controller.log()[-3000:]}")
        ns = scope.namespace("rc-overlay")
        scope.nodepool(_pool())
        real.apply([w.deployment("web", ns, 1, cpu="1", pool=POOL)])
        wait_until(lambda: w.running(real, ns, "app=web", 1), 120,
                   lambda: f"a Running pod:\n{overlay_controller.log()[-3000:]}")
        (claim,) = w.pool_claims(real, POOL)
        assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m-2x-amd64-linux"
        assert claim["metadata"]["annotations"]["karpenter.sh/price-overlay-applied"] == "true"
        (node,) = w.pool_nodes(real, POOL)
        assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m-2x-amd64-linux"
        ready = {c["type"]: c["status"] for c in real.get_json("nodeoverlay", "m-is-cheap")["status"]["conditions"]}
        assert ready == {"ValidationSucceeded": "True", "Ready": "True"}
    finally:
        scope.cleanup()
        real.kubectl("delete", "nodeoverlay", "m-is-cheap", "--ignore-not-found", check=False)
