"""karpy on the real control plane: scale-out through the real kube-scheduler, scale-down by emptiness
and consolidation, the NodeClaims' finalizers released last."""

from __future__ import annotations

from e2e import controller_process as cp
from realcluster import workloads as w
from realcluster.conftest import Scope, wait_until
from support import realcluster


def test_a_deployment_scaled_out_gets_kwok_nodes_and_running_pods_then_its_empty_nodes_go(
        real: realcluster.RealCluster, scope: Scope, controller: cp.Controller) -> None:
    ns = scope.namespace("rc-scale")
    scope.nodepool(w.nodepool("scale"))
    real.apply([w.deployment("web", ns, 6, cpu="1500m", pool="scale")])

    wait_until(lambda: w.running(real, ns, "app=web", 6), 120,
               lambda: f"6 Running pods:\n{controller.log()[-3000:]}")
    claims = w.pool_claims(real, "scale")
    nodes = w.pool_nodes(real, "scale")
    assert claims and len(nodes) == len(claims)
    for claim in claims:
        for kind in ("Launched", "Registered", "Initialized"):
            assert w.condition(claim, kind) == "True", (kind, claim["status"])
        assert "karpenter.sh/termination" in claim["metadata"]["finalizers"]
    bound = {p["spec"]["nodeName"] for p in w.pods(real, ns, "app=web")}
    assert bound <= {n["metadata"]["name"] for n in nodes}, "the real kube-scheduler bound pods to karpy's nodes"
    for node in nodes:
        assert w.condition(node, "Ready") == "True"
        assert node["spec"]["providerID"].startswith("kwok://")

    real.kubectl("scale", "deployment/web", "-n", ns, "--replicas", "0")
    wait_until(lambda: not w.pool_nodes(real, "scale") and not w.pool_claims(real, "scale"), 120,
               f"the empty nodes and their NodeClaims to go:\n{controller.log()[-3000:]}")
    assert controller.get("/readyz")[0] == 200
