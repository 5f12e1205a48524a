"""ownerReference garbage collection on the in-memory cluster (background propagation)."""

from __future__ import annotations

import pytest

from karpy.kube import errors, interface

from . import builders


def test_deleting_a_replicaset_deletes_its_pods() -> None:
    cluster, _ = builders.new_cluster()
    rs = cluster.create(builders.replicaset("web", 3))
    builders.owned_pods(cluster, rs, 3)
    cluster.create(builders.pod("unrelated"))
    cluster.delete("ReplicaSet", "web", "default")
    assert builders.names(cluster.list("Pod")) == ["unrelated"]


def test_collection_cascades_from_deployment_through_replicaset_to_pods() -> None:
    cluster, _ = builders.new_cluster()
    deploy = cluster.create(
        {"kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 2}}
    )
    rs = cluster.create(
        builders.replicaset("web-abc", 2, ownerReferences=[interface.owner_reference(deploy)])
    )
    builders.owned_pods(cluster, rs, 2)
    cluster.delete("Deployment", "web", "default")
    assert cluster.list("ReplicaSet") == []
    assert cluster.list("Pod") == []


def test_a_dependent_with_another_live_owner_only_loses_the_dangling_reference() -> None:
    cluster, _ = builders.new_cluster()
    first = cluster.create(builders.replicaset("first", 1))
    second = cluster.create(builders.replicaset("second", 1))
    refs = [interface.owner_reference(first), interface.owner_reference(second, controller=False)]
    cluster.create(builders.pod("shared", owners=refs))
    cluster.delete("ReplicaSet", "first", "default")
    survivor = cluster.get("Pod", "shared", "default")
    assert [r["name"] for r in interface.owner_references(survivor)] == ["second"]
    cluster.delete("ReplicaSet", "second", "default")
    assert cluster.list("Pod") == []


def test_a_dependent_with_a_finalizer_becomes_terminating_and_stays() -> None:
    cluster, _ = builders.new_cluster()
    pool = cluster.create({"kind": "NodePool", "metadata": {"name": "default"}, "spec": {}})
    claim = {
        "kind": "NodeClaim",
        "metadata": {
            "name": "default-abcde",
            "finalizers": ["karpenter.sh/termination"],
            "ownerReferences": [interface.owner_reference(pool, controller=False)],
        },
    }
    cluster.create(claim)
    cluster.delete("NodePool", "default")
    remaining = cluster.get("NodeClaim", "default-abcde")
    assert interface.is_terminating(remaining)


def test_dependents_stay_while_their_owner_is_only_terminating() -> None:
    cluster, _ = builders.new_cluster()
    rs = cluster.create(builders.replicaset("web", 1, finalizers=["example.com/hold"]))
    builders.owned_pods(cluster, rs, 2)
    cluster.delete("ReplicaSet", "web", "default")
    assert len(cluster.list("Pod")) == 2
    cluster.patch("ReplicaSet", "web", {"metadata": {"finalizers": None}}, "default")
    assert cluster.list("Pod") == []


def test_a_pod_whose_owner_never_existed_is_left_alone() -> None:
    cluster, _ = builders.new_cluster()
    ghost = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": "ds",
        "uid": "no-such-uid",
        "controller": True,
    }
    cluster.create(builders.pod("ds-pod", owners=[ghost]))
    cluster.create(builders.node("n1"))
    cluster.delete("Node", "n1")
    assert builders.names(cluster.list("Pod")) == ["ds-pod"]


def test_removing_a_namespace_deletes_what_is_in_it() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create({"kind": "Namespace", "metadata": {"name": "team-a"}})
    cluster.create(builders.pod("a", "team-a"))
    cluster.create(builders.pod("b", "team-b"))
    cluster.delete("Namespace", "team-a")
    assert builders.names(cluster.list("Pod")) == ["b"]


def test_nothing_can_be_created_in_a_terminating_namespace() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create({"kind": "Namespace", "metadata": {"name": "team-a", "finalizers": ["example.com/x"]}})
    cluster.delete("Namespace", "team-a")
    with pytest.raises(errors.Forbidden) as info:
        cluster.create(builders.pod("a", "team-a"))
    assert info.value.status == 403
