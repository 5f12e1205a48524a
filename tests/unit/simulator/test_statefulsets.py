"""The simulated StatefulSet controller: ordinal pods, one PVC per claim template and ordinal, kept when
scaled down; a deleted ordinal comes back (what the volume attach-limit scenarios rely on)."""

from __future__ import annotations

from typing import Any

from karpy import clock
from karpy.controllers import runtime
from karpy.kube import memory
from karpy.simulator import statefulsets


def _world(replicas: int) -> tuple[memory.InMemoryCluster, runtime.Manager]:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    manager = runtime.Manager(cluster, vclock)
    statefulsets.StatefulSetController(cluster).register(manager)
    cluster.create({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
                    "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "db"}},
                             "template": {"metadata": {"labels": {"app": "db"}},
                                          "spec": {"containers": [{"name": "db", "image": "pg"}]}},
                             "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                                       "spec": {"storageClassName": "gp3"}}]}})
    manager.run_due()
    return cluster, manager


def _names(cluster: memory.InMemoryCluster, kind: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in cluster.list(kind, "default")
                  if not o["metadata"].get("deletionTimestamp"))


def _pod(cluster: memory.InMemoryCluster, name: str) -> dict[str, Any]:
    return cluster.get("Pod", name, "default")


def test_each_ordinal_gets_its_pod_and_its_claim_mounted_by_the_template_name() -> None:
    cluster, _ = _world(3)
    assert _names(cluster, "Pod") == ["db-0", "db-1", "db-2"]
    assert _names(cluster, "PersistentVolumeClaim") == ["data-db-0", "data-db-1", "data-db-2"]
    p = _pod(cluster, "db-1")
    assert p["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}}]
    assert p["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "db-1"


def test_scaling_down_deletes_the_highest_ordinals_and_keeps_their_claims() -> None:
    cluster, manager = _world(3)
    cluster.patch("StatefulSet", "db", {"spec": {"replicas": 1}}, "default")
    manager.run_due()
    assert _names(cluster, "Pod") == ["db-0"]
    assert _names(cluster, "PersistentVolumeClaim") == ["data-db-0", "data-db-1", "data-db-2"]


def test_a_deleted_ordinal_is_created_again_with_the_same_claim() -> None:
    cluster, manager = _world(2)
    cluster.delete("Pod", "db-0", "default")
    manager.run_due()
    assert _names(cluster, "Pod") == ["db-0", "db-1"]
    assert _pod(cluster, "db-0")["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "data-db-0"
