"""The Cluster contract (karpy/kube/interface.py), run against the in-memory cluster AND the adapter
over HTTP to the emulated API server: the same test, the same expected behaviour."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.kube import errors, interface

from .conftest import Harness


def pod(name: str, node: str = "", labels: dict[str, str] | None = None, ns: str = "default") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": dict(labels or {})},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    if node:
        obj["spec"]["nodeName"] = node
    return obj


def node(name: str, labels: dict[str, str] | None = None, finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {"providerID": f"kwok://{name}"}}


def names(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(interface.name_of(o) for o in objs)


def test_create_sets_the_server_fields_and_get_returns_the_stored_object(harness: Harness) -> None:
    created = harness.cluster.create(node("n1", {"zone": "a"}))
    meta = created["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
    assert meta["generation"] == 1
    got = harness.cluster.get("Node", "n1")
    assert got["metadata"]["uid"] == meta["uid"]
    assert got["metadata"]["resourceVersion"] == meta["resourceVersion"]
    with pytest.raises(errors.AlreadyExists):
        harness.cluster.create(node("n1"))


def test_get_of_a_missing_object_is_not_found(harness: Harness) -> None:
    with pytest.raises(errors.NotFound):
        harness.cluster.get("Node", "nope")
    with pytest.raises(errors.NotFound):
        harness.cluster.delete("Node", "nope")


def test_list_filters_by_namespace_labels_and_fields(harness: Harness) -> None:
    c = harness.cluster
    c.create(pod("a", node="n1", labels={"app": "web"}))
    c.create(pod("b", node="n2", labels={"app": "web"}))
    c.create(pod("c", node="n1", labels={"app": "db"}, ns="other"))
    c.create(pod("d", labels={"app": "web"}))
    assert names(c.list("Pod")) == ["a", "b", "c", "d"]
    assert names(c.list("Pod", "other")) == ["c"]
    assert names(c.list("Pod", label_selector={"app": "web"})) == ["a", "b", "d"]
    assert names(c.list("Pod", label_selector="app in (db),app!=web")) == ["c"]
    assert names(c.list("Pod", field_selector="spec.nodeName=n1")) == ["a", "c"]
    assert names(c.list("Pod", field_selector="spec.nodeName=")) == ["d"]
    assert names(c.list("Pod", "default", {"app": "web"}, "spec.nodeName!=n2")) == ["a", "d"]
    with pytest.raises(errors.BadRequest):
        c.list("Pod", field_selector="spec.containers=x")


def test_an_update_with_a_stale_resource_version_conflicts(harness: Harness) -> None:
    c = harness.cluster
    first = c.create(node("n1"))
    harness.other.patch("Node", "n1", {"metadata": {"labels": {"by": "someone-else"}}})
    assert harness.wait_for(lambda: c.get("Node", "n1")["metadata"]["labels"].get("by") == "someone-else")
    stale = dict(first)
    stale["metadata"] = {**first["metadata"], "labels": {"mine": "yes"}}
    with pytest.raises(errors.Conflict) as info:
        c.update(stale)
    assert info.value.retryable
    fresh = c.get("Node", "n1")
    fresh["metadata"]["labels"]["mine"] = "yes"
    updated = c.update(fresh)
    assert updated["metadata"]["labels"] == {"by": "someone-else", "mine": "yes"}


def test_update_bumps_generation_on_spec_changes_and_ignores_status(harness: Harness) -> None:
    c = harness.cluster
    c.create(node("n1"))
    obj = c.get("Node", "n1")
    obj["spec"]["unschedulable"] = True
    obj["status"] = {"phase": "Hacked"}
    updated = c.update(obj)
    assert updated["metadata"]["generation"] == 2
    assert updated["spec"]["unschedulable"] is True
    assert "phase" not in (updated.get("status") or {})


def test_update_status_replaces_only_the_status(harness: Harness) -> None:
    c = harness.cluster
    c.create(node("n1", {"a": "1"}))
    obj = c.get("Node", "n1")
    obj["status"] = {"capacity": {"cpu": "4"}}
    obj["metadata"]["labels"] = {"changed": "yes"}
    updated = c.update_status(obj)
    assert updated["status"] == {"capacity": {"cpu": "4"}}
    assert updated["metadata"]["labels"] == {"a": "1"}
    assert c.get("Node", "n1")["status"] == {"capacity": {"cpu": "4"}}


def test_merge_patches_delete_with_null_and_ignore_status(harness: Harness) -> None:
    c = harness.cluster
    c.create(node("n1", {"a": "1", "b": "2"}))
    patched = c.patch("Node", "n1", {"metadata": {"labels": {"a": None, "c": "3"}}, "status": {"phase": "x"}})
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert "phase" not in (patched.get("status") or {})
    assert c.get("Node", "n1")["metadata"]["labels"] == {"b": "2", "c": "3"}
    with pytest.raises(errors.Conflict):
        c.patch("Node", "n1", {"metadata": {"resourceVersion": "1", "labels": {"d": "4"}}})


def test_patch_status_merges_into_the_status_only(harness: Harness) -> None:
    c = harness.cluster
    c.create(node("n1"))
    c.patch_status("Node", "n1", {"status": {"capacity": {"cpu": "4"}}})
    out = c.patch_status("Node", "n1", {"status": {"allocatable": {"cpu": "3"}}, "metadata": {"labels": {"x": "y"}}})
    assert out["status"] == {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3"}}
    assert "x" not in (out["metadata"].get("labels") or {})


def test_a_finalizer_keeps_a_deleted_object_until_it_is_removed(harness: Harness) -> None:
    c = harness.cluster
    c.create(node("n1", finalizers=["karpenter.sh/termination"]))
    c.delete("Node", "n1")
    held = c.get("Node", "n1")
    assert interface.is_terminating(held)
    c.delete("Node", "n1")  # deleting a terminating object again does nothing
    with pytest.raises(errors.Invalid):
        c.patch("Node", "n1", {"metadata": {"finalizers": ["karpenter.sh/termination", "extra"]}})
    c.patch("Node", "n1", {"metadata": {"finalizers": None}})
    with pytest.raises(errors.NotFound):
        c.get("Node", "n1")
    assert c.list("Node") == []


def test_eviction_is_refused_with_429_while_a_pdb_allows_no_disruption(harness: Harness) -> None:
    c = harness.cluster
    c.create(pod("guarded", node="n1", labels={"app": "web"}))
    c.create(pod("free", node="n1", labels={"app": "batch"}))
    c.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    with pytest.raises(errors.TooManyRequests) as info:
        c.evict("guarded", "default")
    assert info.value.retryable
    assert names(c.list("Pod", field_selector="spec.nodeName=n1")) == ["free", "guarded"]
    c.evict("free", "default")
    # the contract: the deletion shows when the watch delivers it (at once on the in-memory cluster)
    assert harness.wait_for(lambda: names(c.list("Pod")) == ["guarded"])
    with pytest.raises(errors.NotFound):
        c.evict("free", "default")


def test_watch_delivers_every_write_in_order(harness: Harness) -> None:
    c = harness.cluster
    seen: list[tuple[str, str, str]] = []
    stop = c.watch("Node", lambda t, o: seen.append((t, interface.name_of(o), o["metadata"]["resourceVersion"])))
    harness.settle()
    c.create(node("n1"))
    c.patch("Node", "n1", {"metadata": {"labels": {"x": "1"}}})
    c.create(node("n2"))
    c.delete("Node", "n1")
    harness.settle()
    assert [(t, n) for t, n, _ in seen] == [("ADDED", "n1"), ("MODIFIED", "n1"), ("ADDED", "n2"), ("DELETED", "n1")]
    stop()
    c.delete("Node", "n2")
    harness.settle()
    assert len(seen) == 4


def test_writes_by_someone_else_reach_the_watch(harness: Harness) -> None:
    c = harness.cluster
    seen: list[tuple[str, str]] = []
    c.watch("Pod", lambda t, o: seen.append((t, interface.name_of(o))))
    harness.settle()
    harness.other.create(pod("p1"))
    harness.other.patch("Pod", "p1", {"metadata": {"labels": {"x": "1"}}}, "default")
    harness.other.delete("Pod", "p1", "default")
    assert harness.wait_for(lambda: len(seen) >= 3)
    assert seen == [("ADDED", "p1"), ("MODIFIED", "p1"), ("DELETED", "p1")]


def test_a_custom_resource_is_created_and_merge_patched(harness: Harness) -> None:
    c = harness.cluster
    c.create(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"limits": {"cpu": "100"}, "template": {"spec": {"requirements": []}}},
        }
    )
    out = c.patch("NodePool", "default", {"spec": {"limits": {"cpu": "200"}}})
    assert out["spec"]["limits"] == {"cpu": "200"}
    assert out["metadata"]["generation"] == 2
    status = c.patch_status("NodePool", "default", {"status": {"resources": {"cpu": "4"}}})
    assert status["status"] == {"resources": {"cpu": "4"}}
    assert c.get("NodePool", "default")["spec"]["template"] == {"spec": {"requirements": []}}


def test_deleting_an_owner_collects_its_dependents(harness: Harness) -> None:
    c = harness.cluster
    owner = c.create(node("n1"))
    dep = pod("on-n1", node="n1")
    dep["metadata"]["ownerReferences"] = [interface.owner_reference(owner)]
    c.create(dep)
    c.delete("Node", "n1")
    assert harness.wait_for(lambda: c.list("Pod") == [])


def test_an_eviction_or_a_delete_with_another_pods_uid_is_a_conflict(harness: Harness) -> None:
    """``deleteOptions.preconditions.uid``: the pod of that name is another one (it was replaced)."""
    c = harness.cluster
    c.create(pod("p", node="n1"))
    with pytest.raises(errors.Conflict):
        c.evict("p", "default", uid="00000000-0000-0000-0000-000000000000")
    with pytest.raises(errors.Conflict):
        c.delete("Pod", "p", "default", uid="00000000-0000-0000-0000-000000000000")
    c.evict("p", "default", uid=c.get("Pod", "p", "default")["metadata"]["uid"])
    assert harness.wait_for(lambda: names(c.list("Pod")) == [])
