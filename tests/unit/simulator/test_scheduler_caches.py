"""The simulated kube-scheduler's caches give the answers of the plain computations they replace.

* :class:`karpy.simulator.unschedulable.Explainer` with a memo kept across passes (nodes and pod
  lists changing or staying) says what a fresh explainer says;
* :class:`karpy.simulator.scheduling_queue.Queue`'s ``take_due`` / ``next_due`` (a heap of wait
  ends) agree with asking ``due`` of every pod and scanning every entry;
* :class:`karpy.simulator.replicaset_index.PodIndex` (status writes skip the tally) counts what an
  index fed only the final pods counts;
* the kube-scheduler's free capacity of a node whose pod list only grew equals a full count.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from karpy import clock
from karpy.api import node, pod
from karpy.kube import interface, memory
from karpy.simulator import (
    kube_scheduler,
    replicaset_index,
    scheduler_models,
    scheduling_queue,
    unschedulable,
)
from karpy.simulator import (
    owned as owned_mod,
)

TAINTS = [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
          {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
ZONES = ["a", "b"]


def _node(name: str, taints: list[dict[str, Any]], ready: bool, zone: str, cpu: str) -> node.Node:
    return node.Node.from_manifest({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": zone}},
        "spec": {"taints": taints},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    })


def _pod(name: str, cpu: str, tolerate: bool, zone: str | None, port: int | None = None) -> pod.Pod:
    container: dict[str, Any] = {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
    if port is not None:
        container["ports"] = [{"containerPort": port, "hostPort": port}]
    spec: dict[str, Any] = {"containers": [container]}
    if tolerate:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    if zone is not None and zone.startswith("host:"):
        spec["nodeSelector"] = {"kubernetes.io/hostname": zone[5:]}
    elif zone is not None:
        spec["nodeSelector"] = {"zone": zone}
    return pod.Pod.from_manifest({"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                                  "spec": spec})


_node_specs = st.tuples(st.lists(st.sampled_from(range(len(TAINTS))), max_size=2, unique=True), st.booleans(),
                        st.sampled_from(ZONES), st.sampled_from(["1", "2", "4"]))
_pod_specs = st.tuples(st.sampled_from(["100m", "1", "3"]), st.booleans(), st.sampled_from([None, *ZONES, "host:n0"]),
                       st.sampled_from([None, 8080]))


def _reqs(n: node.Node) -> Any:
    from karpy.scheduling import requirements
    return requirements.Requirements.from_labels(n.labels)


def test_nodes_alike_but_their_hostname_share_node_only_answers_except_for_a_pod_that_names_a_host() -> None:
    nodes = [_node("n0", [], True, "a", "4"), _node("n1", [], True, "a", "4")]
    memo = unschedulable.NodeMemo()
    explainer = unschedulable.Explainer(nodes, {}, _reqs, None, memo)
    on_n0 = _pod("p", "8", False, "host:n0")
    assert explainer.explain(on_n0, None, unschedulable.signature(on_n0))[0] == \
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector."
    anywhere = _pod("q", "8", False, "a")
    assert explainer.explain(anywhere, None, unschedulable.signature(anywhere))[0] == \
        "0/2 nodes are available: 2 Insufficient cpu."
    assert memo.nodes["n0"].static is memo.nodes["n1"].static


def _spread_pod(name: str, value: str) -> pod.Pod:
    return pod.Pod.from_manifest({"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": name, "namespace": "default", "labels": {"my-label": value}},
                                  "spec": {"containers": [{"name": "c", "image": "x",
                                                           "resources": {"requests": {"cpu": "8"}}}],
                                           "topologySpreadConstraints": [{
                                               "maxSkew": 1, "topologyKey": "zone",
                                               "whenUnsatisfiable": "DoNotSchedule",
                                               "labelSelector": {"matchLabels": {"my-label": value}}}]}})


def test_pods_whose_spreads_select_different_labels_share_each_nodes_answers() -> None:
    nodes = [_node("n0", [], True, "a", "4"), _node("n1", [TAINTS[1]], True, "b", "4")]
    memo = unschedulable.NodeMemo()
    explainer = unschedulable.Explainer(nodes, {}, _reqs, None, memo)
    first, second = _spread_pod("p", "value-0"), _spread_pod("q", "value-1")
    assert unschedulable.signature(first) != unschedulable.signature(second)
    texts = {explainer.explain(p, None, unschedulable.signature(p))[0] for p in (first, second)}
    assert texts == {"0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}."}
    assert [len(memo.nodes[n].reasons) for n in ("n0", "n1")] == [1, 1]



def test_a_nodes_usage_is_worked_out_once_while_its_pods_stay_however_many_passes_and_pod_kinds_ask() -> None:
    nodes = [_node("n0", [], True, "a", "4"), _node("n1", [], True, "b", "4")]
    bound = {"n0": [_pod("b0", "3", False, None)]}
    asked: list[str] = []

    def usage_of(n: node.Node, pods: Any) -> Any:
        asked.append(n.name)
        return unschedulable.usage(n, pods)

    memo = unschedulable.NodeMemo()
    kinds = [_pod("p", "5", False, None), _pod("q", "3", True, "a"), _pod("r", "100m", False, None, 8080)]
    texts = []
    for p in kinds:  # a pass per pod kind, the nodes and their pod lists the same objects
        explainer = unschedulable.Explainer(nodes, bound, _reqs, usage_of, memo)
        texts.append(explainer.explain(p, None, unschedulable.signature(p))[0])
    assert texts[0] == "0/2 nodes are available: 2 Insufficient cpu."
    assert sorted(asked) == ["n0", "n1"]
    bound = {"n0": [*bound["n0"], _pod("b1", "1", False, None)]}  # n0's pods change: its usage is read again
    explainer = unschedulable.Explainer(nodes, bound, _reqs, usage_of, memo)
    assert explainer.explain(kinds[0], None, unschedulable.signature(kinds[0]))[0] == \
        "0/2 nodes are available: 2 Insufficient cpu."
    assert sorted(asked) == ["n0", "n0", "n1"]

@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_an_explainer_with_a_memo_kept_across_passes_says_what_a_fresh_one_says(data: st.DataObject) -> None:
    count = data.draw(st.integers(1, 5))
    specs = [data.draw(_node_specs) for _ in range(count)]
    nodes = [_node(f"n{i}", [TAINTS[t] for t in s[0]], s[1], s[2], s[3]) for i, s in enumerate(specs)]
    by_node: dict[str, list[pod.Pod]] = {}
    pending = [_pod(f"p{i}", *data.draw(_pod_specs)) for i in range(data.draw(st.integers(1, 4)))]
    memo = unschedulable.NodeMemo()
    for pass_no in range(data.draw(st.integers(1, 4))):
        for i, n in enumerate(nodes):
            change = data.draw(st.sampled_from(["keep", "same content", "new spec", "add pod"]))
            if change == "same content":  # re-parsed: a new model, equal content
                nodes[i] = _node(n.name, [TAINTS[t] for t in specs[i][0]], specs[i][1], specs[i][2], specs[i][3])
            elif change == "new spec":
                specs[i] = data.draw(_node_specs)
                nodes[i] = _node(n.name, [TAINTS[t] for t in specs[i][0]], specs[i][1], specs[i][2], specs[i][3])
            elif change == "add pod":
                by_node[n.name] = [*by_node.get(n.name, ()), _pod(f"b{pass_no}-{i}", *data.draw(_pod_specs))]
        with_memo = unschedulable.Explainer(nodes, by_node, _reqs, None, memo)
        plain = unschedulable.Explainer(list(nodes), {k: list(v) for k, v in by_node.items()}, _reqs)
        for p in pending:
            sig = unschedulable.signature(p)
            assert with_memo.explain(p, None, sig) == plain.explain(p)


PLUGIN_SETS = [frozenset(), frozenset({scheduling_queue.TAINT_TOLERATION}),
               frozenset({scheduling_queue.POD_TOPOLOGY_SPREAD}), frozenset({scheduling_queue.VOLUME_BINDING})]


def _scan_next_due(q: scheduling_queue.Queue, now: float) -> float | None:
    """The plain scan: every entry's backoff end (and flush while pooled), the earliest after ``now``."""
    best: float | None = None
    for entry in q._entries.values():
        at = entry.failed_at + scheduling_queue.backoff(entry.attempts)
        if entry.group is not None:
            flush = (math.floor((entry.failed_at + scheduling_queue.MAX_IN_UNSCHEDULABLE)
                                / scheduling_queue.FLUSH_PERIOD) + 1) * scheduling_queue.FLUSH_PERIOD
            at = max(at, flush)
        if at > now and (best is None or at < best):
            best = at
    return best


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["arrive", "fail", "fail", "forget", "move", "spread", "volume",
                                               "wait", "wait"]),
                              st.integers(0, 2), st.sampled_from(range(len(PLUGIN_SETS))),
                              st.sampled_from([0.5, 1.0, 3.0, 10.0, 100.0, 400.0])), max_size=60))
def test_the_queues_due_pods_and_next_wake_up_match_asking_every_pod(
        ops: list[tuple[str, int, int, float]]) -> None:
    heap_q = scheduling_queue.Queue(_reqs)
    plain_q = scheduling_queue.Queue(_reqs)
    model = _pod("m", "1", False, None)
    pending: set[tuple[str, str]] = set()
    now = 0.0
    for op, i, plugins, dt in ops:
        key = ("default", f"p{i}")
        for q in (heap_q, plain_q):
            if op == "arrive":
                q.arrived(key)
            elif op == "fail" and key in pending:
                q.failed(key, model, plugins, PLUGIN_SETS[plugins], now)
            elif op == "forget":
                q.forget(key)
            elif op == "move":
                q.move_all()
            elif op == "spread":
                q.node_deleted()
            elif op == "volume":
                q.volumes_changed()
        if op == "arrive":
            pending.add(key)
        elif op == "forget":
            pending.discard(key)
        elif op == "wait":
            now += dt
        assert sorted(k for k in heap_q.take_due(now) if k in pending) == \
            sorted(k for k in pending if _plain_due(plain_q, k, now))
        assert heap_q.next_due(now) == _scan_next_due(plain_q, now)


def _plain_due(q: scheduling_queue.Queue, key: scheduling_queue.PodKey, now: float) -> bool:
    """kube-scheduler's rule, read off the queue's entries: never tried, or out of the pool (moved by an
    event, or its flush time passed) with its backoff over."""
    entry = q._entries.get(key)
    if entry is None:
        return True
    if entry.group is not None and now < q._flush_at(entry):
        return False
    return now >= entry.failed_at + scheduling_queue.backoff(entry.attempts)


class _Selector:
    def __init__(self, app: str) -> None:
        self.app = app

    def matches(self, pod_labels: Any) -> bool:
        return bool(pod_labels.get("app") == self.app)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Selector) and other.app == self.app

    def __hash__(self) -> int:
        return hash(self.app)


def _rs_pod(name: str, owner: str, app: str, phase: str, ready: bool,
            labels_obj: dict[str, str] | None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels_obj or {"app": app},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}",
                                              "controller": True}]},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


@settings(max_examples=80, deadline=None)
@given(writes=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["rs-a", "rs-b"]), st.sampled_from(["web", "db"]),
                                 st.sampled_from(["Pending", "Running", "Succeeded"]), st.booleans(),
                                 st.booleans(), st.booleans()), max_size=40))
def test_a_replicaset_pod_index_fed_every_write_counts_what_one_fed_the_final_pods_counts(
        writes: list[tuple[int, str, str, str, bool, bool, bool]]) -> None:
    def index() -> replicaset_index.PodIndex:
        return replicaset_index.PodIndex(owned_mod.is_active, owned_mod.is_pod_ready, owned_mod.controller_ref)

    live = index()
    selector = _Selector("web")
    for rs in ("rs-a", "rs-b"):  # the selector is known from the start: writes update the counts
        live.tallies.totals(("default", rs), f"uid-{rs}", selector, {})
    final: dict[str, dict[str, Any]] = {}
    for i, owner, app, phase, ready, same_labels, delete in writes:
        name = f"p{i}"
        before = final.get(name)
        if delete and before is not None:
            live.index(interface.DELETED, before)
            del final[name]
            continue
        shared = before["metadata"]["labels"] if same_labels and before is not None else None
        obj = _rs_pod(name, owner, app, phase, ready, shared)
        live.index(interface.MODIFIED if before is not None else interface.ADDED, obj)
        final[name] = obj
    fresh = index()
    for obj in final.values():
        fresh.index(interface.ADDED, obj)
    assert {k: dict(v) for k, v in live.owned.items()} == {k: dict(v) for k, v in fresh.owned.items()}
    for rs in ("rs-a", "rs-b"):
        key = ("default", rs)
        got = live.tallies.totals(key, f"uid-{rs}", selector, live.owned.get(key, {}))
        assert got == fresh.tallies.totals(key, f"uid-{rs}", selector, fresh.owned.get(key, {}))


def test_a_nodes_free_capacity_after_its_pod_list_grew_equals_a_full_count() -> None:
    vclock = clock.VirtualClock()
    ks = kube_scheduler.KubeScheduler(memory.InMemoryCluster(vclock), vclock, record_events=False)
    n = _node("n1", [], True, "a", "4")
    first = [_pod("a", "1", False, None)]
    grown = [*first, _pod("b", "100m", False, None), _pod("c", "3", False, None)]
    ks._existing_node(n, first)
    incremental = ks._existing_node(n, grown)[3]
    fresh = kube_scheduler.KubeScheduler(memory.InMemoryCluster(vclock), vclock, record_events=False)
    assert incremental == fresh._existing_node(n, grown)[3]
    shrunk = grown[1:]
    assert ks._existing_node(n, shrunk)[3] == fresh._existing_node(n, list(shrunk))[3]


def _stored_pod(cluster: memory.InMemoryCluster, name: str, node_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                           "spec": spec})


def test_a_pods_model_survives_a_status_write_and_is_parsed_again_after_a_label_change() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    ks = kube_scheduler.KubeScheduler(cluster, vclock, record_events=False)
    first = ks.models.pod_model(_stored_pod(cluster, "web"))
    status = cluster.patch_status("Pod", "web", {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}, "default")
    assert ks.models.pod_model(status) is first
    relabelled = cluster.patch("Pod", "web", {"metadata": {"labels": {"app": "web"}}}, "default")
    second = ks.models.pod_model(relabelled)
    assert second is not first and second is not None and second.labels == {"app": "web"}


def test_a_bound_pods_status_write_keeps_its_nodes_pod_models_and_a_label_change_does_not() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    ks = kube_scheduler.KubeScheduler(cluster, vclock, record_events=False)
    ks._watching = True
    cluster.watch("Pod", ks._on_pod)
    _stored_pod(cluster, "web", node_name="n1")
    models = ks._pods_on("n1")
    cluster.patch_status("Pod", "web", {"status": {"phase": "Running"}}, "default")
    assert ks._pods_on("n1") is models
    cluster.patch("Pod", "web", {"metadata": {"labels": {"app": "web"}}}, "default")
    again = ks._pods_on("n1")
    assert again is not models and [m.labels for m in again] == [{"app": "web"}]


def test_pods_sharing_a_stored_spec_get_the_signature_their_own_models_give() -> None:
    models = scheduler_models.Models()
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                            "nodeSelector": {"zone": "a"}}
    other_spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    objs = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": ns, "uid": f"u{i}"},
             "spec": s} for i, (ns, s) in enumerate([("default", spec), ("default", spec), ("other", spec),
                                                      ("default", other_spec)])]
    plain = scheduler_models.Models()
    for obj in objs:
        entry = models.pod_entry(obj)
        assert entry.model is not None
        assert models.entry_signature(entry, entry.model) == plain.signature(pod.Pod.from_stored(obj))


def test_a_nodes_label_requirements_follow_its_labels_across_status_writes_and_relabels() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    models = scheduler_models.Models()
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"zone": "a"}},
                    "status": {"allocatable": {"cpu": "1"}}})
    first = models.node_model(cluster.get("Node", "n1"))
    assert first is not None
    reqs = models.node_reqs(first)
    cluster.patch_status("Node", "n1", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    ready = models.node_model(cluster.get("Node", "n1"))
    assert ready is not None and ready is not first
    assert models.node_reqs(ready) is reqs
    cluster.patch("Node", "n1", {"metadata": {"labels": {"zone": "b"}}})
    moved = models.node_model(cluster.get("Node", "n1"))
    assert moved is not None
    from karpy.scheduling import requirements
    assert models.node_reqs(moved) == requirements.Requirements.from_labels({"zone": "b"})


def _view(ks: kube_scheduler.KubeScheduler) -> tuple[object, ...]:
    by_node = {name: sorted((m.key, tuple(sorted(m.labels.items()))) for m in models)
               for name, models in ks._bound_models().items()}
    return by_node, [(n.name, n.metadata.resource_version, tuple(sorted(n.labels.items()))) for n in ks._nodes()]


def test_the_bound_pods_and_nodes_a_pass_reads_are_what_a_fresh_read_of_the_cluster_gives() -> None:
    import random

    rng = random.Random(5)
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    ks = kube_scheduler.KubeScheduler(cluster, vclock, record_events=False)
    ks._watching = True
    cluster.watch("Pod", ks._on_pod)
    cluster.watch("Node", ks._on_node)
    nodes = ["n1", "n2", "n3"]
    for step in range(300):
        pods = [interface.name_of(p) for p in cluster.list("Pod", "default")]
        names = [interface.name_of(n) for n in cluster.list("Node")]
        op = rng.choice(["pod", "pod", "delete", "label", "node", "relabel", "drop", "read"])
        if op == "pod":
            _stored_pod(cluster, f"p{step}", rng.choice(["", *nodes]))
        elif op == "delete" and pods:
            cluster.delete("Pod", rng.choice(pods), "default")
        elif op == "label" and pods:
            cluster.patch("Pod", rng.choice(pods), {"metadata": {"labels": {"v": str(step)}}}, "default")
        elif op == "node" and len(names) < len(nodes):
            cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": rng.choice(
                [n for n in nodes if n not in names])}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}})
        elif op == "relabel" and names:
            cluster.patch("Node", rng.choice(names), {"metadata": {"labels": {"v": str(step)}}})
        elif op == "drop" and names:
            cluster.delete("Node", rng.choice(names))
        fresh = kube_scheduler.KubeScheduler(cluster, vclock, record_events=False)
        for p in cluster.list("Pod"):
            fresh._track_pod(interface.ADDED, p)
        fresh._node_objs = {interface.name_of(n): n for n in cluster.list("Node")}
        if op == "read" or step % 7 == 0:  # a pass between some changes, none between others
            assert _view(ks) == _view(fresh), step
    assert _view(ks) == _view(fresh)
