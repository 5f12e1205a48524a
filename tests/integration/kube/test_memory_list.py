"""list() with namespaces, label and field selectors, and the pods-by-node index."""

from __future__ import annotations

import pytest

from karpy.kube import errors, memory

from . import builders


def _cluster_with_pods() -> memory.InMemoryCluster:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.pod("a", node="n1", labels={"app": "web", "tier": "front"}))
    cluster.create(builders.pod("b", node="n2", labels={"app": "web", "tier": "back"}))
    cluster.create(builders.pod("c", labels={"app": "db"}, phase="Pending", ready=None))
    cluster.create(builders.pod("d", "kube-system", node="n1", labels={"app": "dns"}))
    return cluster


def test_list_is_scoped_to_a_namespace_or_spans_all() -> None:
    cluster = _cluster_with_pods()
    assert builders.names(cluster.list("Pod")) == ["a", "b", "c", "d"]
    assert builders.names(cluster.list("Pod", "kube-system")) == ["d"]
    assert cluster.list("Pod", "nowhere") == []
    assert cluster.list("Deployment") == []


def test_list_with_label_selectors_as_string_and_mapping() -> None:
    cluster = _cluster_with_pods()
    assert builders.names(cluster.list("Pod", label_selector="app=web")) == ["a", "b"]
    assert builders.names(cluster.list("Pod", label_selector={"app": "web", "tier": "back"})) == ["b"]
    assert builders.names(cluster.list("Pod", label_selector="app in (db,dns),app!=dns")) == ["c"]
    assert builders.names(cluster.list("Pod", label_selector="!tier")) == ["c", "d"]


def test_list_with_field_selectors_on_node_name_phase_and_name() -> None:
    cluster = _cluster_with_pods()
    assert builders.names(cluster.list("Pod", field_selector="spec.nodeName=n1")) == ["a", "d"]
    assert builders.names(cluster.list("Pod", "default", field_selector="spec.nodeName==n1")) == ["a"]
    assert builders.names(cluster.list("Pod", field_selector="spec.nodeName=")) == ["c"]
    assert builders.names(cluster.list("Pod", field_selector="status.phase!=Running")) == ["c"]
    assert builders.names(cluster.list("Pod", field_selector="metadata.name=b")) == ["b"]
    assert builders.names(cluster.list("Pod", field_selector="metadata.namespace=kube-system")) == ["d"]
    assert builders.names(
        cluster.list("Pod", label_selector="app=web", field_selector="spec.nodeName!=n1,status.phase=Running")
    ) == ["b"]


def test_an_unsupported_field_selector_is_a_bad_request() -> None:
    cluster = _cluster_with_pods()
    with pytest.raises(errors.BadRequest) as info:
        cluster.list("Pod", field_selector="spec.priority=5")
    assert info.value.status == 400
    with pytest.raises(errors.BadRequest):
        cluster.list("Pod", label_selector="app in (")


def test_event_field_selectors_cover_the_involved_object_and_source() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(
        {
            "kind": "Event",
            "metadata": {"name": "n1.1", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": "n1", "uid": "u1"},
            "reason": "Unconsolidatable",
            "source": {"component": "karpenter"},
            "reportingComponent": "karpenter",
            "type": "Normal",
        }
    )
    selector = "involvedObject.kind=Node,involvedObject.name=n1,source=karpenter,reportingComponent=karpenter"
    assert builders.names(cluster.list("Event", field_selector=selector)) == ["n1.1"]
    assert cluster.list("Event", field_selector="involvedObject.name=n2") == []


def test_listing_pods_by_node_name_reads_only_that_nodes_pods_among_30000() -> None:
    cluster, _ = builders.new_cluster()
    for i in range(30_000):
        cluster.create(builders.pod(f"p-{i}", node=f"node-{i % 300}"))
    before = cluster.scanned
    on_node = cluster.list("Pod", field_selector="spec.nodeName=node-7")
    assert len(on_node) == 100
    assert {p["spec"]["nodeName"] for p in on_node} == {"node-7"}
    assert cluster.scanned - before == 100  # an index lookup, not a scan of 30,000 pods
    before = cluster.scanned
    assert cluster.list("Pod", field_selector="spec.nodeName=") == []
    assert cluster.scanned == before


def test_the_node_index_follows_a_pod_that_is_bound_and_deleted() -> None:
    cluster, _ = builders.new_cluster()
    cluster.create(builders.pod("p", phase="Pending", ready=None))
    assert builders.names(cluster.list("Pod", field_selector="spec.nodeName=")) == ["p"]
    cluster.patch("Pod", "p", {"spec": {"nodeName": "n1"}}, "default")
    assert cluster.list("Pod", field_selector="spec.nodeName=") == []
    assert builders.names(cluster.list("Pod", field_selector="spec.nodeName=n1")) == ["p"]
    cluster.delete("Pod", "p", "default")
    assert cluster.list("Pod", field_selector="spec.nodeName=n1") == []


def test_a_metadata_name_selector_is_a_direct_lookup() -> None:
    cluster, _ = builders.new_cluster()
    for i in range(50):
        cluster.create(builders.node(f"n{i}"))
    before = cluster.scanned
    assert builders.names(cluster.list("Node", field_selector="metadata.name=n7")) == ["n7"]
    assert cluster.scanned - before == 1
