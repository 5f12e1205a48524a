"""The in-memory cluster stores equal parts of similar objects once, without changing any object."""

from __future__ import annotations

import json
from typing import Any

import pytest

from karpy.kube import memory, memory_objects, memory_share

from . import builders


def _owned_pod(name: str, started: str) -> dict[str, Any]:
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1", "controller": True}
    obj = builders.pod(name, node="n1", labels={"app": "web"}, owners=[owner])
    obj["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": started}]
    return obj


def test_pods_of_one_template_store_their_labels_owner_references_and_conditions_once() -> None:
    cluster, _ = builders.new_cluster()
    a = cluster.create(_owned_pod("a", "2026-01-01T00:00:05Z"))
    b = cluster.create(_owned_pod("b", "2026-01-01T00:00:05Z"))
    c = cluster.create(_owned_pod("c", "2026-01-01T00:00:09Z"))
    assert b["metadata"]["labels"] is a["metadata"]["labels"]
    assert b["metadata"]["ownerReferences"] is a["metadata"]["ownerReferences"]
    assert b["status"]["conditions"] is a["status"]["conditions"]
    assert c["status"]["conditions"] is not a["status"]["conditions"]  # another start time
    assert c["metadata"]["labels"] is a["metadata"]["labels"]
    assert cluster.get("Pod", "c", "default")["status"]["conditions"][0]["lastTransitionTime"] == \
        "2026-01-01T00:00:09Z"


def test_a_status_write_shares_the_new_conditions_with_an_equal_pod_and_leaves_the_other_untouched() -> None:
    cluster, _ = builders.new_cluster()
    a = cluster.create(_owned_pod("a", "2026-01-01T00:00:05Z"))
    cluster.create(_owned_pod("b", "2026-01-01T00:00:09Z"))
    b = cluster.patch_status("Pod", "b", {"status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}]}}, "default")
    assert b["status"]["conditions"] is a["status"]["conditions"]
    assert cluster.stored("Pod", "a", "default") is a
    cluster.verify_shared()


def test_sharing_keeps_types_and_key_order_apart() -> None:
    sharing = memory_share.Sharing()
    first = sharing.share({"a": 1, "b": "x"})
    assert sharing.share({"a": 1, "b": "x"}) is first
    for other in ({"a": True, "b": "x"}, {"a": 1.0, "b": "x"}, {"b": "x", "a": 1}):
        got = sharing.share(other)
        assert got is other
        assert json.dumps(got) == json.dumps(other)
    assert sharing.share([1, 2]) == [1, 2]


def test_a_full_table_starts_afresh_and_only_loses_sharing() -> None:
    sharing = memory_share.Sharing(limit=2)
    one, two = sharing.share({"k": "1"}), sharing.share({"k": "2"})
    three = sharing.share({"k": "3"})  # the table was full: it starts again with this one
    assert sharing.share({"k": "3"}) is three
    assert sharing.share({"k": "1"}) is not one
    assert two == {"k": "2"}


@pytest.mark.parametrize("kind", ["Pod", "Node"])
def test_what_a_read_returns_equals_what_was_written_with_sharing(kind: str) -> None:
    cluster = memory.InMemoryCluster(builders.new_cluster()[1])
    written = [_owned_pod(f"p{i}", "2026-01-01T00:00:05Z") if kind == "Pod" else builders.node(f"n{i}")
               for i in range(3)]
    for obj in written:
        cluster.create(obj)
    for obj in written:
        got = cluster.get(kind, obj["metadata"]["name"], "default")
        assert got["spec"] == obj["spec"]
        assert got.get("status") == obj.get("status")
        assert {k: got["metadata"][k] for k in obj["metadata"]} == obj["metadata"]


def test_generated_uids_are_the_uuid4_text_of_the_seeded_bits() -> None:
    import random
    import uuid

    rng = random.Random(7)
    for _ in range(1000):
        bits = rng.getrandbits(128)
        assert memory_objects.uuid4_text(bits) == str(uuid.UUID(int=bits, version=4))


def test_objects_written_at_one_time_share_one_timestamp_string() -> None:
    cluster, vclock = builders.new_cluster()
    a = cluster.create(builders.node("a"))
    b = cluster.create(builders.node("b"))
    vclock.advance(1)
    c = cluster.create(builders.node("c"))
    assert a["metadata"]["creationTimestamp"] is b["metadata"]["creationTimestamp"]
    assert c["metadata"]["creationTimestamp"] == "2026-01-01T00:00:01Z"


def test_mappings_of_plain_strings_and_lists_of_shared_items_are_stored_once() -> None:
    sharing = memory_share.Sharing()
    labels = sharing.share({"app": "web", "tier": "front"})
    assert sharing.share({"app": "web", "tier": "front"}) is labels
    assert sharing.share({"app": "web", "tier": "back"}) is not labels
    cond = sharing.share({"type": "Ready", "status": "True"})
    items = sharing.share([cond, labels])
    assert sharing.share([cond, labels]) is items  # the same items, by identity: the same list
    assert sharing.share([labels, cond]) is not items  # order matters
    assert sharing.share([cond]) is not items


def test_a_string_mapping_is_never_taken_for_one_with_other_types() -> None:
    sharing = memory_share.Sharing()
    texts = sharing.share({"a": "1"})
    for other in ({"a": 1}, {"a": True}, {"a": None}, {"a": ["1"]}):
        got = sharing.share(other)
        assert got is other
        assert json.dumps(got) == json.dumps(other)
    assert sharing.share({"a": "1"}) is texts
