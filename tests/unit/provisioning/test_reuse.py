"""A SchedulingCache kept between runs gives exactly the plans of a fresh Scheduler (reuse.py's
contract), whatever sequence of node additions, removals, bindings, relabelings and cordons came
before; and it re-derives only the nodes that changed."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.api import labels as wk
from karpy.api import pod
from karpy.provisioning import grouping_paths, nodetable, results, reuse, scheduler, templates

from . import builders as b

SIZES = ((2, 4), (4, 16), (8, 32))


def _pending() -> list[pod.Pod]:
    """A mix that reaches every path: plain, zonal and hostname spreads, anti-affinity, host ports,
    a node selector on a custom label and on a hostname, and running pods' anti-affinity."""
    web = {"app": "web"}
    return [
        *b.make_pods("plain", 6, cpu="500m", memory="512Mi"),
        *b.make_pods("web", 5, cpu="250m", memory="256Mi", labels=web,
                     topologySpreadConstraints=[b.spread(wk.ZONE, web)]),
        *b.make_pods("spread-host", 3, cpu="250m", labels={"app": "sh"},
                     topologySpreadConstraints=[b.spread(wk.HOSTNAME, {"app": "sh"})]),
        *b.make_pods("db", 2, cpu="1", labels={"app": "db"},
                     affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                         b.affinity_term(wk.HOSTNAME, {"app": "db"})]}}),
        *b.make_pods("port", 2, cpu="100m", containers=[{"name": "c", "ports": [{"containerPort": 80,
                                                                                  "hostPort": 8080}],
                                                          "resources": {"requests": {"cpu": "100m"}}}]),
        *b.make_pods("team-a", 2, cpu="1", nodeSelector={"team": "a"}),
        *b.make_pods("pinned", 1, cpu="100m", nodeSelector={wk.HOSTNAME: "n-1"}),
        *b.make_pods("cache", 2, cpu="200m", labels={"app": "cache"}),
    ]


RUNNING_KINDS: tuple[dict[str, Any], ...] = (
    {"cpu": "250m", "memory": "256Mi"},
    {"cpu": "500m", "memory": "1Gi", "labels": {"app": "web"}},
    {"cpu": "250m", "labels": {"app": "db"},
     "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
         b.affinity_term(wk.HOSTNAME, {"app": "db"})]}}},
    {"cpu": "100m", "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}],
                                    "resources": {"requests": {"cpu": "100m"}}}]},
    {"cpu": "300m", "labels": {"app": "cache"},
     "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
         b.affinity_term(wk.ZONE, {"app": "cache"})]}}},
)


@dataclass
class World:
    """The cluster as a caller sees it; every run gets new ExistingNode objects, as callers build."""

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    counter: int = 0

    def existing(self, order: random.Random) -> list[results.ExistingNode]:
        names = sorted(self.nodes)
        if order.random() < 0.3:
            order.shuffle(names)
        out = []
        for name in names:
            n = self.nodes[name]
            out.append(b.existing_node(name, cpu=n["cpu"], memory_gi=n["mem"], zone=n["zone"],
                                       labels=dict(n["labels"]), taints=n["taints"], running=list(n["pods"]),
                                       in_flight=n["in_flight"], schedulable=n["schedulable"]))
        return out

    def apply(self, op: tuple[Any, ...]) -> None:
        kind, a, c = op
        names = sorted(self.nodes)
        target = names[a % len(names)] if names else None
        if kind == "add" or target is None:
            self.counter += 1
            cpu, mem = SIZES[a % len(SIZES)]
            self.nodes[f"n-{self.counter}"] = {
                "cpu": cpu, "mem": mem, "zone": b.ZONES[c % 3], "pods": [],
                "labels": {"team": "a"} if c % 4 == 1 else {},
                "taints": (b.taint("dedicated", "x"),) if c % 7 == 3 else (),
                "in_flight": c % 5 == 2, "schedulable": True}
        elif kind == "remove":
            del self.nodes[target]
        elif kind == "bind":
            self.counter += 1
            spec = dict(RUNNING_KINDS[c % len(RUNNING_KINDS)])
            cpu = spec.pop("cpu")
            memory = spec.pop("memory", "128Mi")
            lbl = spec.pop("labels", {})
            p = b.make_pod(f"run-{self.counter}", cpu=cpu, memory=memory, labels=lbl, node_name=target, **spec)
            self.nodes[target]["pods"] = [*self.nodes[target]["pods"], p]
        elif kind == "unbind":
            pods = self.nodes[target]["pods"]
            if pods:
                self.nodes[target]["pods"] = pods[:c % len(pods)] + pods[c % len(pods) + 1:]
        elif kind == "relabel":
            n = self.nodes[target]
            n["labels"] = {} if n["labels"] else {"team": "a"}
        elif kind == "cordon":
            self.nodes[target]["schedulable"] = not self.nodes[target]["schedulable"]
        elif kind == "initialize":
            self.nodes[target]["in_flight"] = False


def plan(res: results.Results) -> Any:
    """Everything a caller reads from a run, in a comparable form."""
    return (
        sorted((n, [p.key for p in ps]) for n, ps in res.existing.items()),
        [(c.nodepool, c.requirements, c.instance_type_names(), [p.key for p in c.pods], c.price,
          sorted(c.requests.items()), sorted(c.daemon_overhead.items()), c.hostname) for c in res.new_claims],
        sorted(res.errors.items()), sorted(res.relaxed.items()), [p.key for p in res.unschedulable],
    )


ops = st.tuples(st.sampled_from(["add", "add", "remove", "bind", "bind", "bind", "unbind", "relabel", "cordon",
                                 "initialize"]),
                st.integers(min_value=0, max_value=50), st.integers(min_value=0, max_value=50))


@settings(max_examples=30, deadline=None)
@given(steps=st.lists(ops, min_size=1, max_size=14), seed=st.integers(min_value=0, max_value=1000))
def test_a_kept_cache_plans_exactly_as_a_fresh_scheduler_after_any_sequence_of_changes(
        steps: list[tuple[Any, ...]], seed: int) -> None:
    world = World()
    rnd = random.Random(seed)
    pools = [b.make_nodepool(), b.make_nodepool("team-a", labels={"team": "a"}, weight=10)]
    types = {p.name: b.small_catalog() for p in pools}
    daemons = [b.daemonset_pod("agent", cpu="100m", memory="64Mi")]
    provisioner_cache, kube_cache = reuse.SchedulingCache(), reuse.SchedulingCache()
    pending = _pending()
    for step in steps:
        world.apply(step)
        existing = world.existing(rnd)
        kept = scheduler.Scheduler(pools, types, existing, daemons, cache=provisioner_cache).solve(pending)
        fresh = scheduler.Scheduler(pools, types, existing, daemons).solve(pending)
        assert plan(kept) == plan(fresh), f"after {step}"
        kept = scheduler.Scheduler(existing=existing, cache=kube_cache).solve(pending)
        fresh = scheduler.Scheduler(existing=existing).solve(pending)
        assert plan(kept) == plan(fresh), f"after {step} (no NodePools)"
    assert provisioner_cache.runs == kube_cache.runs == len(steps)


def test_a_node_that_gains_a_pod_between_runs_is_the_only_one_derived_again() -> None:
    cache = reuse.SchedulingCache()
    nodes = [b.existing_node(f"n-{i}", zone=b.ZONES[i % 3]) for i in range(20)]
    pending = b.make_pods("p", 3)
    scheduler.Scheduler(existing=nodes, cache=cache).solve(pending)
    derived = cache.nodes.derived
    assert derived == 20
    bound = b.make_pod("bound", cpu="1", node_name="n-4")
    again = [b.existing_node(n.name, zone=n.labels[wk.ZONE], running=[bound] if n.name == "n-4" else [])
             for n in nodes]
    res = scheduler.Scheduler(existing=again, cache=cache).solve(pending)
    assert cache.nodes.derived == derived + 1
    assert plan(res) == plan(scheduler.Scheduler(existing=again).solve(pending))


def test_nodes_absent_from_many_runs_are_dropped_from_the_table() -> None:
    cache = reuse.SchedulingCache()
    pending = b.make_pods("p", 1)
    scheduler.Scheduler(existing=[b.existing_node("gone"), b.existing_node("kept")], cache=cache).solve(pending)
    assert set(cache.nodes.rows) == {"gone", "kept"}
    for _ in range(2 * nodetable.EVICT_AFTER):
        scheduler.Scheduler(existing=[b.existing_node("kept")], cache=cache).solve(pending)
    assert set(cache.nodes.rows) == {"kept"}


def test_a_table_whose_node_classes_are_mostly_gone_starts_afresh_and_plans_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nodetable, "BLOAT_SLACK", 4)
    cache = reuse.SchedulingCache()
    pending = b.make_pods("web", 4, labels={"app": "web"},
                          topologySpreadConstraints=[b.spread(wk.ZONE, {"app": "web"})])
    most = 0
    for i in range(6 * nodetable.EVICT_AFTER):  # every run a node with a label no node had before
        nodes = [b.existing_node(f"gen-{i}", zone=b.ZONES[i % 3], labels={"generation": str(i)},
                                 running=[b.make_pod(f"r-{i}", labels={"app": "web", "i": str(i)})]),
                 b.existing_node("steady", zone="zone-b")]
        res = scheduler.Scheduler(existing=nodes, cache=cache).solve(pending)
        assert plan(res) == plan(scheduler.Scheduler(existing=nodes).solve(pending))
        most = max(most, len(cache.nodes.classes.values))
    assert most <= 2 * 2 * nodetable.EVICT_AFTER + 4 + 1


def test_a_node_relabeled_between_runs_is_checked_with_its_new_labels() -> None:
    cache = reuse.SchedulingCache()
    pending = b.make_pods("team", 1, nodeSelector={"team": "a"})
    first = scheduler.Scheduler(existing=[b.existing_node("n", labels={"team": "b"})], cache=cache).solve(pending)
    assert not first.existing
    second = scheduler.Scheduler(existing=[b.existing_node("n", labels={"team": "a"})], cache=cache).solve(pending)
    assert [p.key for p in second.existing["n"]] == ["default/team-0"]


def test_instance_type_tables_are_reused_while_the_types_are_the_same_objects() -> None:
    cache = reuse.SchedulingCache()
    pools = [b.make_nodepool()]
    types = {"default": b.small_catalog()}
    pending = b.make_pods("p", 3)
    scheduler.Scheduler(pools, types, cache=cache).solve(pending)
    first = cache.tables.table(templates.nodepool_requirements(pools[0]), types["default"], ["cpu", "memory", "pods"])
    scheduler.Scheduler(pools, types, cache=cache).solve(pending)
    assert cache.tables.table(templates.nodepool_requirements(pools[0]), types["default"],
                              ["cpu", "memory", "pods"]) is first
    other = {"default": b.small_catalog()}  # equal values, new objects: a new table
    scheduler.Scheduler(pools, other, cache=cache).solve(pending)
    assert cache.tables.table(templates.nodepool_requirements(pools[0]), other["default"],
                              ["cpu", "memory", "pods"]) is not first


@settings(max_examples=20, deadline=None)
@given(steps=st.lists(ops, min_size=1, max_size=24))
def test_first_fit_in_chunks_of_bins_places_exactly_as_one_full_scan(steps: list[tuple[Any, ...]]) -> None:
    world = World()
    for step in steps:
        world.apply(step)
    existing = world.existing(random.Random(0))
    pools = [b.make_nodepool()]
    types = {"default": b.small_catalog()}
    pending = _pending()
    plans = []
    for chunk in (1, 3, 1 << 30):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(grouping_paths, "CHUNK", chunk)
            plans.append((plan(scheduler.Scheduler(pools, types, existing).solve(pending)),
                          plan(scheduler.Scheduler(existing=existing).solve(pending))))
    assert plans[0] == plans[1] == plans[2]
