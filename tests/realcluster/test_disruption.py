"""Disruption on the real control plane: drift, expiration, PodDisruptionBudgets whose status
kube-controller-manager keeps, do-not-disrupt, all through the real Eviction API."""

from __future__ import annotations

import json
import time

from e2e import controller_process as cp
from realcluster import workloads as w
from realcluster.conftest import Scope, wait_until
from support import realcluster


def _names(nodes: list[dict[str, object]]) -> set[str]:
    return {str(n["metadata"]["name"]) for n in nodes}  # type: ignore[index]


def _start(real: realcluster.RealCluster, scope: Scope, ns: str, pool: str, replicas: int,
           controller: cp.Controller, **pool_args: object) -> set[str]:
    scope.nodepool(w.nodepool(pool, policy="WhenEmpty", consolidate_after="Never", **pool_args))  # type: ignore[arg-type]
    real.apply([w.deployment("app", ns, replicas, cpu="1", pool=pool)])
    wait_until(lambda: w.running(real, ns, "app=app", replicas), 120,
               lambda: f"Running pods:\n{controller.log()[-3000:]}")
    return _names(w.pool_nodes(real, pool))


def _drift(real: realcluster.RealCluster, pool: str, version: str) -> None:
    patch = {"spec": {"template": {"metadata": {"labels": {"rc/version": version}}}}}
    real.kubectl("patch", "nodepool", pool, "--type", "merge", "-p", json.dumps(patch))


def _replaced(real: realcluster.RealCluster, ns: str, pool: str, old: set[str], replicas: int) -> bool:
    nodes = w.pool_nodes(real, pool)
    return (bool(nodes) and not (_names(nodes) & old) and w.running(real, ns, "app=app", replicas)
            and all(n["metadata"]["labels"].get("rc/version") for n in nodes))


def test_a_nodepool_template_change_drifts_and_replaces_every_node(
        real: realcluster.RealCluster, scope: Scope, controller: cp.Controller) -> None:
    ns = scope.namespace("rc-drift")
    old = _start(real, scope, ns, "drift", 3, controller)
    _drift(real, "drift", "2")
    wait_until(lambda: _replaced(real, ns, "drift", old, 3), 180,
               f"drifted nodes replaced:\n{controller.log()[-4000:]}")


def test_a_pdb_with_max_unavailable_zero_blocks_the_drain_until_it_is_relaxed(
        real: realcluster.RealCluster, scope: Scope, controller: cp.Controller) -> None:
    ns = scope.namespace("rc-pdb")
    real.apply([w.pdb("app", ns, {"app": "app"}, 0)])
    old = _start(real, scope, ns, "pdb", 2, controller)
    # kube-controller-manager's disruption controller keeps the budget's status.
    wait_until(lambda: real.get_json("pdb", "app", "-n", ns).get("status", {}).get("expectedPods") == 2, 60,
               "the PDB's status from kube-controller-manager")
    _drift(real, "pdb", "2")
    time.sleep(20)
    assert _names(w.pool_nodes(real, "pdb")) >= old, "a node was removed although its pods could not be evicted"
    pods = w.pods(real, ns, "app=app")
    assert len(pods) == 2 and not any(p["metadata"].get("deletionTimestamp") for p in pods), "a pod was evicted"
    assert controller.get("/readyz")[0] == 200

    real.apply([w.pdb("app", ns, {"app": "app"}, 1)])
    wait_until(lambda: _replaced(real, ns, "pdb", old, 2), 180,
               f"nodes replaced once the budget allows:\n{controller.log()[-4000:]}")


def test_a_do_not_disrupt_pod_holds_its_node_against_drift(
        real: realcluster.RealCluster, scope: Scope, controller: cp.Controller) -> None:
    ns = scope.namespace("rc-dnd")
    scope.nodepool(w.nodepool("dnd", policy="WhenEmpty", consolidate_after="Never"))
    real.apply([w.deployment("app", ns, 1, cpu="1", pool="dnd",
                             annotations={"karpenter.sh/do-not-disrupt": "true"})])
    wait_until(lambda: w.running(real, ns, "app=app", 1), 120,
               lambda: f"Running pod:\n{controller.log()[-3000:]}")
    old = _names(w.pool_nodes(real, "dnd"))
    _drift(real, "dnd", "2")
    time.sleep(15)
    assert _names(w.pool_nodes(real, "dnd")) >= old
    assert w.running(real, ns, "app=app", 1)


def test_expired_nodes_are_replaced(real: realcluster.RealCluster, scope: Scope, controller: cp.Controller) -> None:
    ns = scope.namespace("rc-expire")
    old = _start(real, scope, ns, "expire", 2, controller, expire_after="45s")
    wait_until(lambda: _names(w.pool_nodes(real, "expire")).isdisjoint(old) and w.running(real, ns, "app=app", 2)
               and bool(w.pool_nodes(real, "expire")), 180,
               lambda: f"expired nodes replaced:\n{controller.log()[-4000:]}")
