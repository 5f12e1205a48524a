"""The spot share (``karpy.io/max-spot-percent``, karpy's own annotation, docs/spot-share.md) on the real
control plane: a Deployment of 10 replicas annotated 30 % in a NodePool that allows spot and on-demand gets
at most floor(30 % x 10) = 3 replicas on spot, although spot is cheaper for every replica.

kube-scheduler does not read the annotation: a replica karpy kept off spot may still bind to a spot node
with free room. The workload is shaped so that cannot happen and the assertion is on karpy's decisions:
one replica fills one node (1 CPU pods on the 2-CPU ``c-2x-amd64-linux``, the only type the pool allows),
so where pods land is where karpy launched for them. Consolidation (``WhenEmptyOrUnderutilized`` after
0s) would replace each on-demand node by a cheaper spot one; the share holds it back too."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from e2e import controller_process as cp
from realcluster import workloads as w
from realcluster.conftest import Scope, wait_until
from support import realcluster

POOL = "spotshare"
TYPE = "c-2x-amd64-linux"
CAPACITY_TYPE = "karpenter.sh/capacity-type"


def _pool() -> dict[str, Any]:
    pool = w.nodepool(POOL)
    reqs = pool["spec"]["template"]["spec"]["requirements"]
    reqs[0] = {"key": CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]}
    reqs.append({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [TYPE]})
    return pool


def _capacity_types(real: realcluster.RealCluster) -> Counter[str]:
    return Counter(c["metadata"]["labels"][CAPACITY_TYPE] for c in w.pool_claims(real, POOL)
                   if not c["metadata"].get("deletionTimestamp"))


def _pods_on_spot(real: realcluster.RealCluster, ns: str) -> int:
    spot = {n["metadata"]["name"] for n in w.pool_nodes(real, POOL) if n["metadata"]["labels"][CAPACITY_TYPE] == "spot"}
    return sum(1 for p in w.pods(real, ns, "app=api") if p["spec"].get("nodeName") in spot
               and not p["metadata"].get("deletionTimestamp"))


def test_a_deployment_annotated_30_percent_gets_at_most_3_of_10_replicas_on_spot(
        real: realcluster.RealCluster, scope: Scope, controller: cp.Controller) -> None:
    ns = scope.namespace("rc-spot")
    scope.nodepool(_pool())
    api = w.deployment("api", ns, 10, cpu="1", pool=POOL)
    api["metadata"]["annotations"] = {"karpy.io/max-spot-percent": "30"}
    real.apply([api])
    wait_until(lambda: w.running(real, ns, "app=api", 10), 150,
               lambda: f"10 Running replicas:\n{controller.log()[-3000:]}")
    launched = _capacity_types(real)
    # spot for the 3 replicas the share allows, on-demand for the others; kube-scheduler binds pods to whichever
    # node is Ready first, so a later run may see a pod it kept off spot on a spot node and launch one more
    # on-demand node (consolidated away once empty), never one more spot node
    assert launched["spot"] == 3 and launched["on-demand"] >= 7, launched
    assert _pods_on_spot(real, ns) == 3

    time.sleep(20)  # consolidation passes: replacing an on-demand node by spot would be cheaper
    assert _capacity_types(real)["spot"] <= 3
    assert _pods_on_spot(real, ns) <= 3
    assert w.running(real, ns, "app=api", 10)
    assert controller.get("/readyz")[0] == 200
