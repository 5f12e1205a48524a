"""CRUD, optimistic concurrency, merge patches and finalizers on the in-memory cluster."""

from __future__ import annotations

import copy

import pytest

from karpy import clock
from karpy.kube import errors, interface, memory, memory_objects

from . import builders


def test_create_sets_uid_resource_version_timestamp_from_the_clock_and_generation_one() -> None:
    cluster, vclock = builders.new_cluster()
    vclock.advance(5)
    created = cluster.create(builders.node("n1"))
    meta = created["metadata"]
    assert meta["uid"]
    assert meta["resourceVersion"] == "1"
    assert meta["creationTimestamp"] == "2026-01-01T00:00:05Z"
    assert meta["generation"] == 1
    assert "namespace" not in meta


def test_create_does_not_modify_the_callers_object() -> None:
    cluster, _ = builders.new_cluster()
    obj = builders.node("n1")
    before = copy.deepcopy(obj)
    cluster.create(obj)
    assert obj == before


def test_a_namespaced_object_without_namespace_goes_to_default_and_get_finds_it_there() -> None:
    cluster, _ = builders.new_cluster()
    obj = builders.pod("p")
    del obj["metadata"]["namespace"]
    cluster.create(obj)
    assert cluster.get("Pod", "p")["metadata"]["namespace"] == "default"
    assert cluster.get("Pod", "p", "default")["metadata"]["name"] == "p"


def test_generate_name_gets_a_five_character_suffix_and_uids_are_deterministic() -> None:
    first, _ = builders.new_cluster()
    second, _ = builders.new_cluster()
    obj = {"kind": "NodeClaim", "metadata": {"generateName": "default-"}, "spec": {}}
    a = first.create(obj)
    b = second.create(obj)
    assert a["metadata"]["name"].startswith("default-")
    assert len(a["metadata"]["name"]) == len("default-") + 5
    assert a["metadata"]["name"] == b["metadata"]["name"]
    assert a["metadata"]["uid"] == b["metadata"]["uid"]
    assert a["apiVersion"] == "karpenter.sh/v1"


def test_creating_a_taken_name_is_already_exists_and_not_retryable() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.node("n1"))
    with pytest.raises(errors.AlreadyExists) as info:
        cluster.create(builders.node("n1"))
    assert info.value.status == 409
    assert info.value.reason == "AlreadyExists"
    assert info.value.retryable is False


def test_an_invalid_name_is_rejected() -> None:
    cluster, _ = builders.new_cluster()
    with pytest.raises(errors.Invalid) as info:
        cluster.create(builders.node("Node_1"))
    assert info.value.status == 422


def test_a_custom_kind_is_accepted_as_namespaced_with_its_own_api_version() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
    widget = cluster.get("Widget", "w", "default")
    assert widget["apiVersion"] == "example.com/v1"
    assert widget["metadata"]["namespace"] == "default"
    with pytest.raises(errors.Invalid):
        cluster.create({"kind": "Gadget", "metadata": {"name": "g"}})


def test_a_pod_created_without_status_is_pending() -> None:
    cluster, _ = builders.new_cluster()
    created = cluster.create(builders.pod("p", phase=None))
    assert created["status"] == {"phase": "Pending"}


def test_get_of_a_missing_object_is_not_found() -> None:
    cluster, _ = builders.new_cluster()
    with pytest.raises(errors.NotFound) as info:
        cluster.get("Pod", "nope", "default")
    assert info.value.status == 404
    assert errors.is_not_found(info.value)


def test_get_returns_a_private_copy_that_does_not_change_the_store() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.node("n1", labels={"a": "1"}))
    got = cluster.get("Node", "n1")
    got["metadata"]["labels"]["a"] = "changed"
    assert cluster.get("Node", "n1")["metadata"]["labels"] == {"a": "1"}


def test_resource_version_increases_with_every_write_across_objects() -> None:
    cluster, _ = builders.new_cluster()
    versions = [int(cluster.create(builders.node(f"n{i}"))["metadata"]["resourceVersion"]) for i in range(3)]
    node = cluster.get("Node", "n0")
    node["metadata"]["labels"] = {"x": "y"}
    versions.append(int(cluster.update(node)["metadata"]["resourceVersion"]))
    versions.append(
        int(cluster.patch("Node", "n1", {"metadata": {"labels": {"z": "1"}}})["metadata"]["resourceVersion"])
    )
    assert versions == sorted(versions)
    assert len(set(versions)) == len(versions)
    assert cluster.revision == versions[-1]


def test_an_update_with_a_stale_resource_version_is_a_retryable_conflict() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.node("n1"))
    first = cluster.get("Node", "n1")
    second = cluster.get("Node", "n1")
    first["metadata"]["labels"] = {"writer": "first"}
    cluster.update(first)
    second["metadata"]["labels"] = {"writer": "second"}
    with pytest.raises(errors.Conflict) as info:
        cluster.update(second)
    assert info.value.status == 409
    assert info.value.retryable is True
    assert cluster.get("Node", "n1")["metadata"]["labels"] == {"writer": "first"}


def test_an_update_without_resource_version_is_unconditional() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.node("n1"))
    cluster.patch("Node", "n1", {"metadata": {"labels": {"a": "1"}}})
    obj = builders.node("n1", labels={"b": "2"})
    assert cluster.update(obj)["metadata"]["labels"] == {"b": "2"}


def test_update_bumps_generation_only_when_the_spec_changes() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.node("n1"))
    obj = cluster.get("Node", "n1")
    obj["metadata"]["labels"] = {"a": "1"}
    obj = copy.deepcopy(cluster.update(obj))  # what a write returns is shared: copy to change it
    assert obj["metadata"]["generation"] == 1
    obj["spec"]["unschedulable"] = True
    obj = cluster.update(obj)
    assert obj["metadata"]["generation"] == 2


def test_update_cannot_change_status_and_update_status_changes_only_status() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.pod("p", phase="Pending", ready=None))
    obj = cluster.get("Pod", "p")
    obj["status"]["phase"] = "Running"
    obj["metadata"]["labels"] = {"a": "1"}
    updated = cluster.update(obj)
    assert updated["status"]["phase"] == "Pending"
    assert updated["metadata"]["labels"] == {"a": "1"}
    obj = cluster.get("Pod", "p")
    obj["status"]["phase"] = "Running"
    obj["metadata"]["labels"] = {"b": "2"}
    obj["spec"]["nodeName"] = "elsewhere"
    updated = cluster.update_status(obj)
    assert updated["status"]["phase"] == "Running"
    assert updated["metadata"]["labels"] == {"a": "1"}
    assert "nodeName" not in updated["spec"]
    assert updated["metadata"]["generation"] == 1


def test_an_update_that_changes_nothing_keeps_the_resource_version() -> None:
    cluster, _ = builders.new_cluster()
    created = cluster.create(builders.node("n1"))
    again = cluster.update(cluster.get("Node", "n1"))
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_update_ignores_server_managed_metadata_in_the_request() -> None:
    cluster, _ = builders.new_cluster()
    created = cluster.create(builders.node("n1"))
    obj = cluster.get("Node", "n1")
    obj["metadata"]["creationTimestamp"] = "1999-01-01T00:00:00Z"
    obj["metadata"]["deletionTimestamp"] = "1999-01-01T00:00:00Z"
    obj["metadata"]["labels"] = {"a": "1"}
    updated = cluster.update(obj)
    assert updated["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert not interface.is_terminating(updated)


def test_passing_a_shared_listed_object_back_to_update_is_caught() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.node("n1"))
    (listed,) = cluster.list("Node")
    with pytest.raises(memory.SharedObjectMutatedError):
        cluster.update(listed)


def test_copy_reads_makes_list_return_private_copies() -> None:
    cluster = memory.InMemoryCluster(clock.VirtualClock(), copy_reads=True)
    cluster.create(builders.node("n1"))
    (listed,) = cluster.list("Node")
    listed["metadata"]["labels"] = {"mutated": "yes"}
    assert cluster.get("Node", "n1")["metadata"]["labels"] == {}
    assert cluster.update(listed)["metadata"]["labels"] == {"mutated": "yes"}


def test_merge_patch_merges_maps_replaces_lists_and_null_deletes_a_key() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.node("n1", labels={"keep": "1", "drop": "2"}))
    cluster.patch("Node", "n1", {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})
    patched = cluster.patch(
        "Node",
        "n1",
        {
            "metadata": {"labels": {"drop": None, "add": "3"}},
            "spec": {"taints": [{"key": "b", "effect": "NoExecute"}], "providerID": None},
        },
    )
    assert patched["metadata"]["labels"] == {"keep": "1", "add": "3"}
    assert patched["spec"] == {"taints": [{"key": "b", "effect": "NoExecute"}]}
    assert patched["metadata"]["generation"] == 3


def test_merge_patch_function_follows_rfc_7386_examples() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}}
    assert memory.merge_patch(target, {"a": "z", "c": {"f": None}}) == {"a": "z", "c": {"d": "e"}}
    assert memory.merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    assert memory.merge_patch({"a": "b"}, {"a": {"c": 1}}) == {"a": {"c": 1}}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}}


def test_a_resource_version_in_a_patch_is_a_precondition() -> None:
    cluster, _ = builders.new_cluster()
    created = cluster.create(builders.node("n1"))
    stale = created["metadata"]["resourceVersion"]
    cluster.patch("Node", "n1", {"metadata": {"resourceVersion": stale, "labels": {"a": "1"}}})
    with pytest.raises(errors.Conflict):
        cluster.patch("Node", "n1", {"metadata": {"resourceVersion": stale, "labels": {"a": "2"}}})
    assert cluster.get("Node", "n1")["metadata"]["labels"] == {"a": "1"}


def test_patch_ignores_status_and_patch_status_changes_only_status() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.pod("p", phase="Pending", ready=None))
    patched = cluster.patch("Pod", "p", {"status": {"phase": "Running"}}, "default")
    assert patched["status"]["phase"] == "Pending"
    patched = cluster.patch_status("Pod", "p", {"status": {"phase": "Running"}, "spec": {"nodeName": "x"}})
    assert patched["status"]["phase"] == "Running"
    assert "nodeName" not in patched["spec"]


def test_a_patch_cannot_rename_an_object() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.node("n1"))
    with pytest.raises(errors.Invalid):
        cluster.patch("Node", "n1", {"metadata": {"name": "n2"}})


def test_delete_without_finalizers_removes_at_once_and_a_second_delete_is_not_found() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.node("n1"))
    cluster.delete("Node", "n1")
    with pytest.raises(errors.NotFound):
        cluster.get("Node", "n1")
    with pytest.raises(errors.NotFound):
        cluster.delete("Node", "n1")


def test_a_finalizer_blocks_deletion_until_an_update_removes_it() -> None:
    cluster, vclock = builders.new_cluster()
    claim = {"kind": "NodeClaim", "metadata": {"name": "c1", "finalizers": ["karpenter.sh/termination"]}}
    cluster.create(claim)
    vclock.advance(30)
    cluster.delete("NodeClaim", "c1")
    terminating = cluster.get("NodeClaim", "c1")
    assert interface.is_terminating(terminating)
    assert terminating["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:30Z"
    assert interface.has_finalizer(terminating, "karpenter.sh/termination")
    vclock.advance(10)
    cluster.delete("NodeClaim", "c1")  # a second delete is a no-op while terminating
    assert cluster.get("NodeClaim", "c1")["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:30Z"
    terminating["metadata"]["finalizers"] = []
    cluster.update(terminating)
    with pytest.raises(errors.NotFound):
        cluster.get("NodeClaim", "c1")


def test_removing_the_last_finalizer_with_a_patch_completes_deletion() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create({"kind": "NodeClaim", "metadata": {"name": "c1", "finalizers": ["a", "b"]}})
    cluster.delete("NodeClaim", "c1")
    cluster.patch("NodeClaim", "c1", {"metadata": {"finalizers": ["b"]}})
    assert interface.has_finalizer(cluster.get("NodeClaim", "c1"), "b")
    cluster.patch("NodeClaim", "c1", {"metadata": {"finalizers": None}})
    assert cluster.list("NodeClaim") == []


def test_no_new_finalizer_can_be_added_to_a_terminating_object() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create({"kind": "NodeClaim", "metadata": {"name": "c1", "finalizers": ["a"]}})
    cluster.delete("NodeClaim", "c1")
    with pytest.raises(errors.Invalid):
        cluster.patch("NodeClaim", "c1", {"metadata": {"finalizers": ["a", "b"]}})


def test_objects_and_snapshot_list_everything_sorted() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.node("n2"))
    cluster.create(builders.node("n1"))
    cluster.create(builders.pod("p", "kube-system"))
    assert builders.names(cluster.objects("Node")) == ["n1", "n2"]
    assert [o["metadata"]["name"] for o in cluster.objects("Node")] == ["n1", "n2"]
    snap = cluster.snapshot()
    assert sorted(snap) == ["Node", "Pod"]
    snap["Node"][0]["metadata"]["name"] = "mutated"
    assert cluster.objects("Node")[0]["metadata"]["name"] == "n1"


def test_meta_key_and_owner_helpers() -> None:
    cluster, _ = builders.new_cluster()
    rs = cluster.create(builders.replicaset("web", 1))
    pod = cluster.create(builders.pod("web-0", owners=[interface.owner_reference(rs)]))
    assert interface.meta_key(pod) == ("Pod", "default", "web-0")
    assert interface.meta_key(cluster.create(builders.node("n1"))) == ("Node", "", "n1")
    ref = interface.owner(pod)
    assert ref is not None
    assert (ref["kind"], ref["name"], ref["uid"]) == ("ReplicaSet", "web", rs["metadata"]["uid"])
    assert interface.owner(builders.pod("bare")) is None


def test_a_write_returns_the_stored_object_without_copying_it() -> None:
    cluster, _ = builders.new_cluster()
    created = cluster.create(builders.node("n1"))
    patched = cluster.patch("Node", "n1", {"metadata": {"labels": {"a": "1"}}})
    (listed,) = cluster.list("Node")
    assert listed is patched
    assert created is not patched and created["metadata"]["labels"] == {}


def test_changing_what_a_write_returned_in_place_is_caught_by_the_shared_object_check() -> None:
    cluster = memory.InMemoryCluster(clock.VirtualClock(), check_shared=True)
    created = cluster.create(builders.node("n1"))
    created["metadata"]["labels"]["mutated"] = "yes"
    with pytest.raises(memory.SharedObjectMutatedError, match="changed in place"):
        cluster.get("Node", "n1")
    with pytest.raises(memory.SharedObjectMutatedError):
        cluster.verify_shared()


def test_the_shared_object_check_is_off_unless_asked_for() -> None:
    cluster = memory.InMemoryCluster(clock.VirtualClock(), check_shared=False)
    created = cluster.create(builders.node("n1"))
    created["metadata"]["labels"]["mutated"] = "yes"
    cluster.verify_shared()
    assert cluster.get("Node", "n1")["metadata"]["labels"] == {"mutated": "yes"}


def test_pods_of_one_controller_with_equal_specs_share_one_stored_spec_and_stay_independent() -> None:
    cluster, _ = builders.new_cluster()
    owner = cluster.create(builders.replicaset("rs", 2))
    ref = interface.owner_reference(owner)
    spec = {"containers": [{"name": "app", "image": "app:1"}]}
    for name in ("a", "b"):
        cluster.create({"kind": "Pod", "metadata": {"name": name, "ownerReferences": [ref]},
                        "spec": copy.deepcopy(spec)})
    a, b = cluster.get("Pod", "a"), cluster.get("Pod", "b")
    assert cluster.list("Pod", field_selector="metadata.name=a")[0]["spec"] is \
        cluster.list("Pod", field_selector="metadata.name=b")[0]["spec"]
    cluster.patch("Pod", "a", {"spec": {"nodeName": "n1"}})
    assert cluster.get("Pod", "a")["spec"]["nodeName"] == "n1"
    assert "nodeName" not in cluster.get("Pod", "b")["spec"]
    assert a["spec"] == b["spec"] == spec


def test_copy_all_copies_deeply_and_keeps_what_the_originals_share_shared() -> None:
    spec = {"containers": [{"name": "app"}]}
    a = {"kind": "Pod", "metadata": {"name": "a"}, "spec": spec}
    b = {"kind": "Pod", "metadata": {"name": "b"}, "spec": spec}
    ca, cb = memory_objects.copy_all([a, b])
    assert ca == a and cb == b
    assert ca["spec"] is cb["spec"] and ca["spec"] is not spec
    assert ca["spec"]["containers"][0] is not spec["containers"][0]


def test_a_status_patch_with_a_stale_resource_version_conflicts_and_a_current_one_applies() -> None:
    cluster, _ = builders.new_cluster()
    created = cluster.create(builders.pod("p", phase="Pending"))
    stale = created["metadata"]["resourceVersion"]
    cluster.patch_status("Pod", "p", {"status": {"phase": "Running"}}, "default")  # a new version
    with pytest.raises(errors.Conflict):
        cluster.patch_status("Pod", "p", {"metadata": {"resourceVersion": stale},
                                          "status": {"phase": "Failed"}}, "default")
    current = cluster.get("Pod", "p", "default")["metadata"]["resourceVersion"]
    done = cluster.patch_status("Pod", "p", {"metadata": {"resourceVersion": current},
                                             "status": {"phase": "Succeeded"}}, "default")
    assert done["status"]["phase"] == "Succeeded"
