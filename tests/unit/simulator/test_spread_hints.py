"""PodTopologySpread's queueing hint for node events, as kube-scheduler's
``isSchedulableAfterNodeChange``: only a change of what spreading reads (the topology keys' labels,
the taints) moves a pod that spreading kept off every node."""

from __future__ import annotations

from typing import Any

from karpy.api import node, pod
from karpy.scheduling import requirements
from karpy.simulator import scheduling_queue

ZONE = "topology.kubernetes.io/zone"


def _node(labels: dict[str, str], taints: list[dict[str, Any]] | None = None) -> node.Node:
    return node.Node.from_manifest({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", **labels}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })


def _spread_pod() -> pod.Pod:
    return pod.Pod.from_manifest({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                 "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
                                                "whenUnsatisfiable": "DoNotSchedule",
                                                "labelSelector": {"matchLabels": {"app": "web"}}}]}})


def _queue() -> scheduling_queue.Queue:
    q = scheduling_queue.Queue(lambda n: requirements.Requirements.from_labels(n.labels))
    q.failed(("default", "web"), _spread_pod(), "sig", frozenset({scheduling_queue.POD_TOPOLOGY_SPREAD}), 0.0)
    return q


def test_a_node_relabelled_outside_the_topology_keys_moves_no_pod_spreading_kept_off() -> None:
    before = _node({ZONE: "a"})
    assert not _queue().node_changed(before, _node({ZONE: "a", "karpenter.sh/registered": "true"}))


def test_a_node_whose_zone_changed_moves_the_pod() -> None:
    assert _queue().node_changed(_node({ZONE: "a"}), _node({ZONE: "b"}))


def test_a_node_that_gained_the_topology_key_moves_the_pod() -> None:
    assert _queue().node_changed(_node({}), _node({ZONE: "a"}))


def test_a_node_whose_taints_changed_moves_the_pod() -> None:
    tainted = _node({ZONE: "a"}, [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}])
    assert _queue().node_changed(tainted, _node({ZONE: "a"}))


def test_a_node_added_without_the_topology_key_moves_nothing_and_one_with_it_moves_the_pod() -> None:
    assert not _queue().node_changed(None, _node({}))
    assert _queue().node_changed(None, _node({ZONE: "a"}))


def test_a_deleted_node_without_the_topology_key_moves_nothing() -> None:
    assert not _queue().node_deleted(_node({}))
    assert _queue().node_deleted(_node({ZONE: "a"}))
