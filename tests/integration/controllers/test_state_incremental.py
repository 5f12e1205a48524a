"""The watch-fed cluster state does work in proportion to what changed, and holds one model per object."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st_

from karpy import clock
from karpy.controllers import state
from karpy.kube import memory

from . import builders as b


def _state() -> tuple[memory.InMemoryCluster, state.ClusterState]:
    cluster = memory.InMemoryCluster(clock.VirtualClock())
    return cluster, state.ClusterState(cluster).start()


def _launched_claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"requirements": [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["fake-it-3"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-1"]}],
            "nodeClassRef": dict(b.NODECLASS_REF)},
        "status": {"providerID": f"kwok://{name}", "capacity": {"cpu": "4", "memory": "8Gi", "pods": "40"},
                   "allocatable": {"cpu": "3900m", "memory": "7Gi", "pods": "40"}},
    }


def test_the_pending_set_follows_each_pod_event_without_rescanning() -> None:
    cluster, st = _state()
    cluster.create(b.pending_pod("a"))
    cluster.create(b.pending_pod("b"))
    assert [p.name for p in st.pending_pods()] == ["a", "b"] and st.is_pending("default/a")
    cluster.patch("Pod", "a", {"spec": {"nodeName": "node-1"}}, "default")  # bound: no longer pending
    assert [p.name for p in st.pending_pods()] == ["b"]
    assert not st.is_pending("default/a") and st.pending_pod_count() == 1
    cluster.delete("Pod", "b", "default")
    assert st.pending_pods() == [] and st.pending_pod_count() == 0
    cluster.create(b.pending_pod("c"))
    assert [p.name for p in st.pending_pods()] == ["c"] and st.pending_pod_count() == 1


def test_a_pod_that_stops_being_unschedulable_leaves_the_pending_set() -> None:
    cluster, st = _state()
    cluster.create(b.pending_pod("web"))
    assert st.pending_pod_count() == 1
    pod = cluster.get("Pod", "web", "default")
    pod["status"]["conditions"] = []  # as after a scheduler restart: not marked Unschedulable
    cluster.update_status(pod)
    assert st.pending_pods() == [] and st.pending_pod_count() == 0
    assert st.pending_pod_count() == sum(1 for o in cluster.list("Pod") if state.is_provisionable(o))


def test_a_launched_claim_s_bin_is_reused_until_the_claim_changes() -> None:
    cluster, st = _state()
    cluster.create(_launched_claim("c1"))
    (first,) = st.existing_nodes()
    (again,) = st.existing_nodes()
    assert again is first and first.in_flight and first.allocatable["cpu"] == 3900
    cluster.patch("NodeClaim", "c1", {"metadata": {"labels": {"team": "a"}}})
    (changed,) = st.existing_nodes()
    assert changed is not first and changed.labels["team"] == "a"
    cluster.delete("NodeClaim", "c1")
    assert st.existing_nodes() == []


def test_the_state_holds_one_model_per_stored_object_and_drops_deleted_ones() -> None:
    cluster, st = _state()
    for i in range(5):
        cluster.create(b.pending_pod(f"p{i}"))
    st.pending_pods()
    for i in range(5):  # status writes: new versions replace the models, they do not add to them
        pod = cluster.get("Pod", f"p{i}", "default")
        pod["status"]["conditions"][0]["message"] = "again"
        cluster.update_status(pod)
    st.pending_pods()
    assert st.held()["Pod"] == 5
    for i in range(3):
        cluster.delete("Pod", f"p{i}", "default")
    assert st.held()["Pod"] == 2 and [p.name for p in st.pending_pods()] == ["p3", "p4"]


def test_each_node_write_re_reads_the_node_as_a_full_parse_would() -> None:
    from karpy.api import node as node_mod

    cluster, st = _state()
    cluster.create({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "default"}},
                    "spec": {"providerID": "kwok://n1", "taints": [{"key": "t", "effect": "NoSchedule"}]},
                    "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3900m"},
                               "conditions": [{"type": "Ready", "status": "False"}]}})
    first = st.node("n1")
    writes: list[Callable[[], object]] = [
        lambda: cluster.patch_status("Node", "n1", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        lambda: cluster.patch("Node", "n1", {"metadata": {"labels": {"karpenter.sh/initialized": "true"}}}),
        lambda: cluster.patch("Node", "n1", {"spec": {"taints": None, "unschedulable": True}}),
        lambda: cluster.patch_status("Node", "n1", {"status": {"allocatable": {"cpu": "3800m"}}}),
    ]
    previous = first
    for write in writes:
        write()
        model = st.node("n1")
        assert model == node_mod.Node.from_manifest(cluster.get("Node", "n1"))
        assert model is not previous
        previous = model
    assert first is not None and previous is not None
    assert previous.ready and previous.unschedulable and previous.taints == () and previous.allocatable["cpu"] == 3800


_OPS = st_.lists(st_.tuples(st_.sampled_from(["create", "label", "status", "delete", "bad"]),
                            st_.sampled_from(["a", "b", "c", "d"])), max_size=12)


@settings(max_examples=60, deadline=None)
@given(ops=_OPS)
def test_the_kept_lists_and_keys_answer_what_a_fresh_sorted_parse_answers(ops: list[tuple[str, str]]) -> None:
    from karpy.api import errors as api_errors
    from karpy.api import nodeclaim as nodeclaim_mod
    from karpy.kube import errors

    cluster, st = _state()
    for op, name in ops:
        try:
            if op == "create":
                cluster.create(_launched_claim(name))
            elif op == "label":
                cluster.patch("NodeClaim", name, {"metadata": {"labels": {"n": str(len(ops))}}})
            elif op == "status":
                cluster.patch_status("NodeClaim", name, {"status": {"imageID": op + name}})
            elif op == "bad":
                cluster.patch_status("NodeClaim", name, {"status": {"capacity": {"cpu": "lots"}}})
            else:
                cluster.delete("NodeClaim", name)
        except errors.KubeError:
            continue
        expected = []
        for obj in sorted(cluster.list("NodeClaim"), key=lambda o: o["metadata"]["name"]):
            with contextlib.suppress(api_errors.ValidationError):
                expected.append(nodeclaim_mod.NodeClaim.from_manifest(obj))
        assert st.nodeclaims() == expected
        assert st.nodeclaims() == expected  # kept
        assert [o["metadata"]["name"] for o in st.raws("NodeClaim")] == sorted(
            o["metadata"]["name"] for o in cluster.list("NodeClaim"))


def _bins(st: state.ClusterState) -> list[tuple[Any, ...]]:
    return [(e.name, dict(e.labels), e.taints, dict(e.allocatable), [p.key for p in e.pods], e.nodepool, e.in_flight,
             e.schedulable) for e in st.existing_nodes()]


def test_the_nodes_bins_kept_across_calls_are_what_a_fresh_state_builds_after_every_kind_of_change() -> None:
    """Nodes coming and going, cordoned and relabelled; NodeClaims launched, initialized, deleted; pods
    bound, finished and deleted: after each (with a call between some of them only), the bins are a
    fresh state's."""
    import random

    rng = random.Random(3)
    cluster, st = _state()
    names = ["a", "b", "c", "d"]
    for step in range(400):
        nodes = [o["metadata"]["name"] for o in cluster.list("Node")]
        claims = [o["metadata"]["name"] for o in cluster.list("NodeClaim")]
        pods = [o["metadata"]["name"] for o in cluster.list("Pod", "default")]
        op = rng.choice(["node", "claim", "init", "cordon", "label", "drop_node", "drop_claim", "pod", "pod",
                         "finish", "drop_pod", "read"])
        name = rng.choice(names)
        with contextlib.suppress(Exception):  # an operation on something gone or already there is skipped
            if op == "node" and name not in nodes:
                cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
                    "karpenter.sh/nodepool": "default"}}, "spec": {"providerID": f"kwok://{name}"},
                    "status": {"allocatable": {"cpu": "3900m", "memory": "7Gi", "pods": "40"}}})
            elif op == "claim" and name not in claims:
                cluster.create(_launched_claim(name))
            elif op == "init" and name in claims:
                cluster.patch_status("NodeClaim", name, {"status": {"conditions": [
                    {"type": "Initialized", "status": "True", "reason": "Initialized", "message": "",
                     "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
            elif op == "cordon" and name in nodes:
                cluster.patch("Node", name, {"spec": {"unschedulable": rng.random() < 0.5}})
            elif op == "label" and name in nodes:
                cluster.patch("Node", name, {"metadata": {"labels": {"v": str(step)}}})
            elif op == "drop_node" and name in nodes:
                cluster.delete("Node", name)
            elif op == "drop_claim" and name in claims:
                cluster.delete("NodeClaim", name)
            elif op == "pod":
                cluster.create(b.running_pod(f"p{step}", name))
            elif op == "finish" and pods:
                cluster.patch_status("Pod", rng.choice(pods), {"status": {"phase": "Succeeded"}}, "default")
            elif op == "drop_pod" and pods:
                cluster.delete("Pod", rng.choice(pods), "default")
        if op == "read" or step % 5 == 0:
            assert _bins(st) == _bins(state.ClusterState(cluster).start()), (step, op, name)
    assert _bins(st) == _bins(state.ClusterState(cluster).start())
