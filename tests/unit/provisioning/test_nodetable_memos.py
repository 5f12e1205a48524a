"""The NodeTable finds a node's class and a pod's signature first by its labels in their own order
(no set or sort per node and pod): labels listed in another order still share the class and the
signature, and a kept table follows labels that change between runs."""

from __future__ import annotations

from karpy.api import labels as wk
from karpy.api import pod
from karpy.provisioning import nodetable, results, reuse, scheduler

from . import builders as b


def _node(name: str, labels: dict[str, str], running: list[pod.Pod] | None = None) -> results.ExistingNode:
    return results.ExistingNode(name=name, labels=labels, taints=(), allocatable={"cpu": 4000, "pods": 110_000},
                                pods=list(running or []), nodepool=None)


def test_nodes_listing_the_same_labels_in_another_order_share_one_class() -> None:
    table = nodetable.NodeTable()
    rows = table.sync([
        _node("a", {wk.HOSTNAME: "a", wk.ZONE: "zone-a", "team": "x"}),
        _node("b", {"team": "x", wk.ZONE: "zone-a", wk.HOSTNAME: "b"}),
        _node("c", {wk.HOSTNAME: "c", wk.ZONE: "zone-b", "team": "x"}),
        _node("d", {wk.ZONE: "zone-a", "team": "x"}),  # no hostname: the same class as a and b
    ])
    cls = [int(table.cls[i]) for i in rows]
    assert cls[0] == cls[1] == cls[3] != cls[2]
    zones = {c: table.classes.values[c][0][wk.ZONE] for c in cls}
    assert zones[cls[0]].has("zone-a") and zones[cls[2]].has("zone-b") and not zones[cls[2]].has("zone-a")


def test_a_kept_table_gives_a_node_relabeled_in_the_same_order_the_class_of_its_new_labels() -> None:
    table = nodetable.NodeTable()
    first = table.sync([_node("n", {wk.HOSTNAME: "n", wk.ZONE: "zone-a"})])[0]
    again = table.sync([_node("n", {wk.HOSTNAME: "n", wk.ZONE: "zone-b"})])[0]
    reqs = table.classes.values[int(table.cls[again])][0]
    assert first == again and reqs[wk.ZONE].has("zone-b") and not reqs[wk.ZONE].has("zone-a")


def test_pods_whose_labels_differ_only_in_order_share_one_signature_and_a_changed_value_gets_its_own() -> None:
    table = nodetable.NodeTable()
    pods = [b.make_pod("p1", labels={"app": "web", "tier": "a"}), b.make_pod("p2", labels={"tier": "a", "app": "web"}),
            b.make_pod("p3", labels={"app": "web", "tier": "b"})]
    row = table.sync([_node("n", {wk.HOSTNAME: "n"}, pods)])[0]
    sigs = table.pod_signatures(int(row))
    assert sorted(sigs.values()) == [1, 2]
    named = {table.signatures.values[sid][1]: count for sid, count in sigs.items()}
    assert named == {(("app", "web"), ("tier", "a")): 2, (("app", "web"), ("tier", "b")): 1}


def test_a_kept_cache_counts_running_pods_relabeled_in_the_same_order_under_their_new_labels() -> None:
    spread = [b.spread(wk.ZONE, {"app": "web"})]
    pending = b.make_pods("web", 2, labels={"app": "web", "tier": "x"}, topologySpreadConstraints=spread)
    cache = reuse.SchedulingCache()
    for app in ("web", "db", "web"):  # the running pods match the spread, then not, then again
        running = [b.make_pod(f"run-{app}-{i}", labels={"app": app, "tier": "x"}) for i in range(3)]
        nodes = [b.existing_node(f"n-{z}", zone=z, running=running if z == "zone-a" else []) for z in b.ZONES]
        kept = scheduler.Scheduler(existing=nodes, cache=cache).solve(pending)
        fresh = scheduler.Scheduler(existing=nodes).solve(pending)
        where = sorted(n for n, ps in kept.existing.items() for _ in ps)
        assert where == sorted(n for n, ps in fresh.existing.items() for _ in ps)
        assert ("n-zone-a" in where) == (app == "db")


def test_a_table_used_once_gives_the_relevant_rows_of_the_kept_index_without_building_it() -> None:
    apps = ["web", "db", "cache", "web"]
    nodes = [_node(f"n-{i}", {wk.HOSTNAME: f"n-{i}"},
                   [b.make_pod(f"p-{i}-{j}", labels={"app": apps[(i + j) % 4], "k": str(j % 2)}) for j in range(i % 5)])
             for i in range(12)]

    def relevant(namespace: str, items: tuple[tuple[str, str], ...], owned: tuple[object, ...]) -> list[str]:
        return [f"{namespace}:{dict(items)['app']}"] if ("app", "db") not in items else []

    kept, once = nodetable.NodeTable(), nodetable.NodeTable(once=True)
    kept.sync(nodes)
    once.sync(nodes)
    said = once.relevant_rows(relevant)
    assert said == kept.relevant_rows(relevant)
    assert sorted(s[0] for s, _ in said) == ["default:cache", "default:cache", "default:web", "default:web"]
    assert sum(sum(w.values()) for _, w in said) == sum(p.labels["app"] != "db" for n in nodes for p in n.pods) > 0
    assert once._sig_rows is None and kept._sig_rows is not None


def test_a_run_without_a_cache_counts_the_running_pods_its_terms_select_and_those_owning_anti_affinity() -> None:
    web = {"app": "web"}
    guard = b.make_pod("guard", labels={"role": "x"}, affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [b.affinity_term(wk.HOSTNAME, web)]}})
    nodes = [b.existing_node("n-a", zone="zone-a", running=[b.make_pod(f"w-{i}", labels=web) for i in range(2)]),
             b.existing_node("n-b", zone="zone-b", running=[guard, b.make_pod("plain")]),
             b.existing_node("n-c", zone="zone-c", running=[b.make_pod(f"db-{i}", labels={"app": "db"})
                                                            for i in range(3)])]
    pending = b.make_pods("web", 2, labels=web, topologySpreadConstraints=[b.spread(wk.ZONE, web)])
    fresh = scheduler.Scheduler(existing=nodes).solve(pending)
    kept = scheduler.Scheduler(existing=nodes, cache=reuse.SchedulingCache()).solve(pending)
    where = {n: len(p) for n, p in fresh.existing.items()}
    assert where == {n: len(p) for n, p in kept.existing.items()}
    # zone-a's two web pods count (the first goes to zone-c, the second may not go to zone-a), and
    # the guard (whose own labels no term selects) keeps web pods off n-b: the second has no node
    assert where == {"n-c": 1} and list(fresh.errors) == ["default/web-1"]
