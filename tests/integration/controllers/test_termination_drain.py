"""Termination as Karpenter drains (``pkg/controllers/node/termination``): groups wait for the previous
group to be gone, evictions carry the pod's uid, expiring pods are deleted with the grace that is left,
and the instance waits (bounded) for the node's VolumeAttachments, with the NodeClaim conditions
``Drained``, ``VolumesDetached`` and ``InstanceTerminating`` on the way (issue 19, issue 21 2.1 and 2.9)."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.controllers import volume_detachment
from karpy.kube import errors, interface

from . import builders as b


def _world_with_node(**pool: Any) -> tuple[b.World, str, str]:
    w = b.make_world(launch_latency=30.0)
    w.cluster.create(b.nodepool_manifest(**pool))
    w.cluster.create(b.pending_pod("seed", cpu="100m"))
    w.at(40.0)
    (claim,) = w.nodeclaims()
    w.cluster.delete("Pod", "seed", "default")
    return w, interface.name_of(claim), claim["status"]["nodeName"]


def _gone(w: b.World, kind: str, name: str, namespace: str = "") -> bool:
    try:
        w.cluster.get(kind, name, namespace)
    except errors.NotFound:
        return True
    return False


def _attachment(node: str, pv: str = "pv-1") -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": f"csi-{pv}"},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node, "source": {"persistentVolumeName": pv}},
            "status": {"attached": True}}


def _conditions_seen(w: b.World) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}

    def on_claim(_event: str, obj: dict[str, Any]) -> None:
        for c in (obj.get("status") or {}).get("conditions") or ():
            seen.setdefault(str(c.get("type")), set()).add(f"{c.get('status')}/{c.get('reason')}")

    w.cluster.watch("NodeClaim", on_claim)
    return seen


def test_the_daemonset_group_waits_until_the_terminating_pods_of_the_first_group_are_gone() -> None:
    """``DrainReconciler.drain``: groups hold terminating pods too, so the next group starts only when
    the previous one is fully deleted."""
    w, claim, node = _world_with_node()
    w.cluster.graceful_pods = True
    w.cluster.create(b.running_pod("app", node, terminationGracePeriodSeconds=20))
    w.cluster.create(b.running_pod("logs-ds", node, owner=b.daemonset_owner("logs")))
    w.cluster.delete("NodeClaim", claim)
    w.run_for(2.0)
    assert w.karpy.termination.evictions == ["default/app"]
    assert interface.is_terminating(w.cluster.get("Pod", "app", "default"))
    w.run_for(30.0)
    assert _gone(w, "Pod", "app", "default")
    assert w.karpy.termination.evictions == ["default/app", "default/logs-ds"]


def test_an_eviction_carries_the_pods_uid_and_a_pod_replaced_under_its_name_is_not_the_one_evicted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``eviction.go``: the Eviction has ``preconditions.uid``; a 409 means the pod was replaced (gone)."""
    w, claim, node = _world_with_node()
    w.cluster.create(b.running_pod("db-0", node))
    first_uid = w.cluster.get("Pod", "db-0", "default")["metadata"]["uid"]
    real_evict = w.cluster.evict
    calls: list[str | None] = []

    def evict(name: str, namespace: str, *, uid: str | None = None) -> None:
        calls.append(uid)
        if len(calls) == 1:  # a StatefulSet replaced the pod between karpy's read and its eviction
            w.cluster.delete("Pod", name, namespace)
            w.cluster.create(b.running_pod(name, node))
        real_evict(name, namespace, uid=uid)

    monkeypatch.setattr(w.cluster, "evict", evict)
    w.cluster.delete("NodeClaim", claim)
    w.run_for(12.0)
    assert calls[0] == first_uid
    assert len(calls) == 2 and calls[1] != first_uid  # the new pod is evicted as itself
    assert _gone(w, "Pod", "db-0", "default")
    assert not [e for e in w.events("FailedDraining", name=node) if "db-0" in str(e["message"])]


def test_an_expiring_pod_is_deleted_with_the_grace_that_is_left_not_its_own() -> None:
    """``DeleteExpiringPods``: the delete's gracePeriodSeconds is the node's remaining time."""
    w, claim, node = _world_with_node(termination_grace_period="60s")
    w.cluster.graceful_pods = True
    w.cluster.create(b.running_pod("slow", node, annotations={"karpenter.sh/do-not-disrupt": "true"},
                                   terminationGracePeriodSeconds=300))
    w.cluster.delete("NodeClaim", claim)
    w.run_for(1.0)
    pod = w.cluster.get("Pod", "slow", "default")
    assert interface.is_terminating(pod)
    assert 55 <= pod["metadata"]["deletionGracePeriodSeconds"] <= 60


def test_the_instance_waits_for_the_nodes_volume_attachments_with_karpenters_conditions() -> None:
    w, claim, node = _world_with_node()
    pid = w.cluster.get("NodeClaim", claim)["status"]["providerID"]
    seen = _conditions_seen(w)
    w.cluster.create(_attachment(node))
    w.cluster.create(_attachment("another-node", "pv-2"))
    w.cluster.delete("NodeClaim", claim)
    w.run_for(20.0)
    assert pid in w.running_instances()
    assert not _gone(w, "NodeClaim", claim)
    assert "True/Drained" in seen["Drained"]
    assert seen["VolumesDetached"] == {"False/AwaitingVolumeDetachment"}
    (event,) = w.events("AwaitingVolumeDetachment", name=node)
    assert event["message"] == "Awaiting deletion of bound volumeattachments (csi-pv-1)"
    w.cluster.delete("VolumeAttachment", "csi-pv-1")
    w.run_for(6.0)
    assert pid not in w.running_instances()
    assert _gone(w, "NodeClaim", claim) and _gone(w, "Node", node)
    assert "True/VolumesDetached" in seen["VolumesDetached"]
    assert "True/InstanceTerminating" in seen["InstanceTerminating"]


def test_the_wait_for_volumes_is_bounded() -> None:
    w, claim, node = _world_with_node()
    pid = w.cluster.get("NodeClaim", claim)["status"]["providerID"]
    w.cluster.create(_attachment(node))
    w.cluster.delete("NodeClaim", claim)
    w.run_for(volume_detachment.DETACH_WAIT - 20.0)
    assert pid in w.running_instances()
    w.run_for(40.0)
    assert pid not in w.running_instances() and _gone(w, "NodeClaim", claim)


def test_volumes_of_pods_the_drain_leaves_do_not_block() -> None:
    """``blockingVolumeAttachments``: the volumes of non-drainable pods (here one tolerating the disrupted
    taint) never detach by themselves, so they are not waited for."""
    w, claim, node = _world_with_node()
    pid = w.cluster.get("NodeClaim", claim)["status"]["providerID"]
    w.cluster.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                      "metadata": {"name": "data", "namespace": "default"}, "spec": {"volumeName": "pv-1"}})
    volumes = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    w.cluster.create(b.running_pod("agent", node, volumes=volumes,
                                   tolerations=[{"key": "karpenter.sh/disrupted", "operator": "Exists"}]))
    w.cluster.create(_attachment(node))
    w.cluster.delete("NodeClaim", claim)
    w.run_for(5.0)
    assert pid not in w.running_instances()


def test_a_pod_under_two_pdbs_is_refused_and_failed_draining_says_why() -> None:
    w, claim, node = _world_with_node()
    w.cluster.create(b.running_pod("web-1", node, labels={"app": "web"}))
    w.cluster.create(b.running_pod("web-2", node, labels={"app": "web"}))
    for name in ("web", "everything"):
        w.cluster.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                          "metadata": {"name": name, "namespace": "default"},
                          "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "web"}}}})
    w.cluster.delete("NodeClaim", claim)
    w.run_for(10.0)
    assert not _gone(w, "Pod", "web-1", "default") and not _gone(w, "Node", node)
    messages = [str(e["message"]) for e in w.events("FailedDraining", name=node)]
    assert any("the Eviction API refuses pod default/web-1" in m and "more than one PodDisruptionBudget" in m
               for m in messages), messages


def test_a_pod_stuck_terminating_past_its_grace_period_no_longer_holds_the_node() -> None:
    """``IsStuckTerminating``: a pod terminating a minute past its grace period is not waited for."""
    w, claim, node = _world_with_node()
    pid = w.cluster.get("NodeClaim", claim)["status"]["providerID"]
    stuck = b.running_pod("stuck", node, terminationGracePeriodSeconds=20)
    stuck["metadata"]["finalizers"] = ["example.com/hold"]  # nothing ever removes it
    w.cluster.create(stuck)
    w.cluster.delete("NodeClaim", claim)
    w.run_for(60.0)
    assert interface.is_terminating(w.cluster.get("Pod", "stuck", "default"))
    assert pid in w.running_instances()
    w.run_for(40.0)
    assert pid not in w.running_instances()


def test_a_granted_eviction_is_not_sent_again_while_the_cache_still_shows_the_pod() -> None:
    """The real adapter reads nothing back after an eviction (its cache learns of the deletion through the
    watch): a drain pass that runs before then must not evict the pod a second time; once the memory
    (:data:`karpy.controllers.drain.EVICTED_MEMORY`) has passed and the pod is still there, it is asked again."""
    from karpy.controllers import drain, termination

    w, claim, node = _world_with_node()
    w.cluster.create(b.running_pod("app", node))
    sent: list[float] = []

    def stale_evict(name: str, namespace: str, *, uid: str | None = None) -> None:
        sent.append(w.clock.now())  # granted, but the cache (here: the store) never changes

    w.cluster.evict = stale_evict  # type: ignore[method-assign]
    w.cluster.delete("NodeClaim", claim)
    w.run_for(3.0)
    assert len(sent) == 1
    first = sent[0]
    for _ in range(3):  # passes the pod's and the node's events would cause
        w.manager.enqueue(termination.NAME, termination.NODE + node)
        w.run_for(1.0)
    assert sent == [first]
    w.run_for(drain.EVICTED_MEMORY + termination.WAIT)
    assert len(sent) >= 2 and sent[1] - first >= drain.EVICTED_MEMORY


def test_recent_evictions_forget_oldest_first_and_key_by_uid() -> None:
    from karpy.api import pod as pod_mod
    from karpy.controllers import drain

    def pod(name: str, uid: str) -> pod_mod.Pod:
        manifest = b.running_pod(name, "n")
        manifest["metadata"]["uid"] = uid
        return pod_mod.Pod.from_manifest(manifest)

    memory = drain.RecentEvictions()
    memory.remember(pod("a", "u1"), 0.0)
    memory.remember(pod("b", "u2"), 5.0)
    assert memory.holds(pod("a", "u1"), 9.9) and memory.holds(pod("b", "u2"), 9.9)
    assert not memory.holds(pod("a", "u3"), 9.9)  # another pod that took a's name
    assert not memory.holds(pod("a", "u1"), 10.0) and len(memory) == 1
    assert memory.holds(pod("b", "u2"), 14.9) and not memory.holds(pod("b", "u2"), 15.0)
    assert len(memory) == 0
