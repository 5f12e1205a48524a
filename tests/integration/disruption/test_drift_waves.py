"""Drift in waves (karpy.io/drift-max-surge, karpy.io/drift-wave-settle) end to end in virtual time.

An observer that shares nothing with the controller records, at every step of the simulation, which
NodeClaims exist, when each new one's Node became Ready, how many pods are pending and how many pods
the drifted nodes still hold; the assertions are made on that record only."""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from karpy import settings
from karpy.disruption import controller as disruption
from karpy.disruption import wave_config, waves
from karpy.kube import interface

from ..controllers import builders as b
from . import test_consolidation as h
from .test_drift_and_expiration import apply

NEVER = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}


def pool(team: str, *, surge: str | None = "3", settle: str | None = "2m", budget: str = "100%") -> dict[str, Any]:
    p = h.nodepool(("fake-it-1",), labels_={"team": team}, disruption_={**NEVER, "budgets": [{"nodes": budget}]})
    annotations = {}
    if surge is not None:
        annotations[wave_config.MAX_SURGE] = surge
    if settle is not None:
        annotations[wave_config.WAVE_SETTLE] = settle
    if annotations:
        p["metadata"]["annotations"] = annotations
    return p


def _ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


@dataclass
class Observer:
    """What an onlooker sees of the rollout, step by step."""

    old: set[str] = field(default_factory=set)
    """NodeClaims that existed before the drift."""
    created: dict[str, float] = field(default_factory=dict)
    ready: dict[str, float] = field(default_factory=dict)
    samples: list[tuple[float, int, int, int, int]] = field(default_factory=list)
    """(t, replacements in flight (new NodeClaims whose Node is not Ready), new NodeClaims beyond the old
    ones still there (surge), pending pods, pods left on old nodes)."""

    def start(self, run: h.Run) -> None:
        self.old = {interface.name_of(c) for c in run.sim.cluster.list("NodeClaim")}

    def __call__(self, run: h.Run) -> bool:
        t = run.t
        claims = {interface.name_of(c): c for c in run.sim.cluster.list("NodeClaim")}
        nodes = {interface.name_of(n): n for n in run.sim.cluster.list("Node")}
        in_flight = 0
        for name, claim in claims.items():
            if name in self.old:
                continue
            self.created.setdefault(name, t)
            node = nodes.get(str((claim.get("status") or {}).get("nodeName") or ""))
            if node is not None and _ready(node):
                self.ready.setdefault(name, t)
            else:
                in_flight += 1
        old_left = sum(1 for name in claims if name in self.old)
        surge = max(0, len(claims) - len(self.old))
        on_old = sum(1 for p in run.sim.cluster.list("Pod", "default")
                     if (p.get("spec") or {}).get("nodeName") in self.old_nodes(run))
        self.samples.append((t, in_flight, surge if old_left else 0, run.pending(), on_old))
        return False

    def old_nodes(self, run: h.Run) -> set[str]:
        return self.old  # the simulator names a Node after its NodeClaim

    def waves(self) -> list[list[str]]:
        """New NodeClaims grouped by creation time."""
        out: dict[float, list[str]] = {}
        for name, t in sorted(self.created.items(), key=lambda kv: (kv[1], kv[0])):
            out.setdefault(t, []).append(name)
        return [sorted(v) for _, v in sorted(out.items())]

    def done(self, wave: list[str], old_pods_before: int) -> float:
        """When ``wave`` was done as the observer sees it: all its Nodes Ready, no pod pending, and the old
        nodes holding no more pods than the wave's own share left them (each wave drains its nodes)."""
        ready = max(self.ready[n] for n in wave)
        for t, _, _, pending, on_old in self.samples:
            if t >= ready and pending == 0 and on_old <= old_pods_before:
                return t
        raise AssertionError(f"wave {wave} never finished")


def rollout(*, surge: str | None, settle: str | None, budget: str, nodes: int = 12) -> tuple[h.Run, Observer]:
    run = h.Run(h.build([h.NODECLASS, pool("a", surge=surge, settle=settle, budget=budget),
                         h.deployment("web", nodes, "1000m", spread=True)],
                        [apply("5m", pool("b", surge=surge, settle=settle, budget=budget))], until="3h"))
    run.run_until(290)
    assert len(run.nodes()) == nodes
    obs = Observer()
    obs.start(run)
    run.run_until(3 * 3600, obs)
    return run, obs


def test_twelve_drifted_nodes_are_replaced_three_at_a_time_each_wave_after_the_last_is_ready_and_settled() -> None:
    run, obs = rollout(surge="3", settle="2m", budget="100%")
    assert max(s[1] for s in obs.samples) == 3, "never more than 3 replacements in flight, and 3 at times"
    assert max(s[2] for s in obs.samples) <= 3
    groups = obs.waves()
    assert [len(g) for g in groups] == [3, 3, 3, 3], groups
    pods_per_node = 1
    for i in range(1, len(groups)):
        before = 12 - pods_per_node * 3 * i  # pods the old nodes still hold once wave i-1 has drained
        done = obs.done(groups[i - 1], before)
        started = obs.created[groups[i][0]]
        assert done + 120 <= started <= done + 120 + 30, (i, started, done)  # settled, and not long after
    assert {interface.labels_of(n)["team"] for n in run.nodes()} == {"b"}
    assert not ({interface.name_of(n) for n in run.nodes()} & obs.old)
    assert len(run.nodes()) == 12
    h.expect_settled(run, {"web": 12})
    assert [len(w.candidates) for w in run.ctrl.waves.history] == [3, 3, 3, 3]
    assert all(w.done_at is not None and not w.notes for w in run.ctrl.waves.history)


def test_a_budget_of_two_is_stricter_than_a_max_surge_of_three() -> None:
    run, obs = rollout(surge="3", settle="2m", budget="2")
    assert max(s[1] for s in obs.samples) == 2
    assert max(s[2] for s in obs.samples) <= 2
    groups = obs.waves()
    assert [len(g) for g in groups] == [2] * 6, groups
    for i in range(1, len(groups)):
        done = obs.done(groups[i - 1], 12 - 2 * i)
        assert obs.created[groups[i][0]] >= done + 120
    assert not ({interface.name_of(n) for n in run.nodes()} & obs.old)
    h.expect_settled(run, {"web": 12})


def test_without_the_annotations_drift_replaces_nodes_side_by_side_up_to_the_budget_as_karpenter() -> None:
    # Karpenter's disruption loop starts a drift command per pass without waiting for the earlier ones'
    # replacements; the nodes of started commands count against the budget (25% of 12: 3)
    run, obs = rollout(surge=None, settle=None, budget="25%")
    assert max(s[1] for s in obs.samples) == 3
    assert run.ctrl.waves.history == []
    assert not ({interface.name_of(n) for n in run.nodes()} & obs.old)
    h.expect_settled(run, {"web": 12})


def test_a_max_surge_karpy_cannot_read_is_reported_once_and_drift_keeps_one_node_per_wave(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="karpy.disruption.waves"):
        run, obs = rollout(surge="three", settle="2m", budget="100%", nodes=4)
    expected = ("NodePool default: metadata.annotations.karpy.io/drift-max-surge: expected a positive whole number "
                "of nodes (\"3\") or a percentage of the NodePool's nodes (\"1%\"-\"100%\"), found 'three'; the "
                "annotation is ignored (no max surge: waves of one drifted node)")
    assert run.messages(waves.INVALID_REASON, "NodePool") == [expected]
    (event,) = run.events(waves.INVALID_REASON, "NodePool")
    assert event["type"] == "Warning"
    assert [r.getMessage() for r in caplog.records if "drift-max-surge" in r.getMessage()] == [
        "disruption: " + expected]
    groups = obs.waves()
    assert [len(g) for g in groups] == [1, 1, 1, 1]  # the settle annotation still holds: waves of one node
    for i in range(1, len(groups)):
        assert obs.created[groups[i][0]] >= obs.done(groups[i - 1], 4 - i) + 120
    h.expect_settled(run, {"web": 4})


def test_two_annotations_karpy_cannot_read_leave_karpenters_drift() -> None:
    run, obs = rollout(surge="0", settle="soon", budget="100%", nodes=4)
    assert sorted(e["message"].split(": ")[1] for e in run.events(waves.INVALID_REASON, "NodePool")) == [
        "metadata.annotations.karpy.io/drift-max-surge", "metadata.annotations.karpy.io/drift-wave-settle"]
    assert run.ctrl.waves.history == []
    assert max(s[1] for s in obs.samples) > 1  # Karpenter's drift: side by side within the 100% budget
    assert not ({interface.name_of(n) for n in run.nodes()} & obs.old)


def test_a_static_nodepool_with_waves_replaces_its_drifted_nodes_two_at_a_time() -> None:
    """Static drift (one for one, before the other drift) keeps to the waves too: max surge 2 of 6 nodes."""
    gates = dict(settings.DEFAULT_FEATURE_GATES)
    gates["StaticCapacity"] = True
    w = b.make_world(settings_=settings.Settings(cluster_name="test", feature_gates=tuple(gates.items())))
    manifest = b.nodepool_manifest("static")
    manifest["spec"]["replicas"] = 6
    manifest["spec"]["disruption"] = {"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}
    manifest["metadata"]["annotations"] = {wave_config.MAX_SURGE: "2", wave_config.WAVE_SETTLE: "1m"}
    w.cluster.create(manifest)
    w.run_for(120)
    old = {interface.name_of(c) for c in w.nodeclaims()}
    assert len(old) == 6
    w.cluster.patch("NodePool", "static", {"spec": {"template": {"metadata": {"labels": {"rev": "2"}}}}})
    created: dict[str, float] = {}
    most_in_flight = 0
    for _ in range(240):
        w.run_for(5)
        in_flight = 0
        for c in w.nodeclaims():
            name = interface.name_of(c)
            if name not in old:
                created.setdefault(name, w.clock.now())
                in_flight += b.condition(c, "Initialized") != "True"
        most_in_flight = max(most_in_flight, in_flight)
    starts = sorted(set(created.values()))
    assert [sum(1 for t in created.values() if t == s) for s in starts] == [2, 2, 2]
    assert all(later - earlier >= 60 for earlier, later in itertools.pairwise(starts))
    assert most_in_flight == 2
    live = [c for c in w.nodeclaims() if not interface.is_terminating(c)]
    assert len(live) == 6 and not old & {interface.name_of(c) for c in live}


def test_a_shorter_settle_annotated_while_a_wave_settles_takes_effect_at_the_next_pass() -> None:
    """An annotation change is no new generation of the NodePool, yet it can change what drift does now."""
    run = h.Run(h.build([h.NODECLASS, pool("a", surge="2", settle="30m"), h.deployment("web", 4, "1000m", spread=True)],
                        [apply("5m", pool("b", surge="2", settle="30m"))], until="3h"))
    run.run_until(290)
    obs = Observer()
    obs.start(run)
    assert run.run_until(900, lambda r: obs(r) or (len(obs.created) == 2 and all(
        n in obs.ready for n in obs.created) and r.pending() == 0 and not r.ctrl.orchestrator.busy()))
    run.run_until(run.t + 60, obs)
    assert len(obs.created) == 2, "the second wave waits for the 30m settle"
    annotated_at = run.t
    run.sim.cluster.patch("NodePool", "default", {"metadata": {"annotations": {wave_config.WAVE_SETTLE: "0s"}}})
    assert run.run_until(annotated_at + 30, lambda r: obs(r) or len(obs.created) > 2)
    assert len(obs.created) == 4


def test_a_wave_whose_replacement_fails_is_over_and_the_next_wave_retries_after_the_settle() -> None:
    run = h.Run(h.build([h.NODECLASS, pool("a", surge="2", settle="2m"), h.deployment("web", 4, "1000m", spread=True)],
                        [apply("5m", pool("b", surge="2", settle="2m"))], until="3h"))
    run.run_until(290)
    obs = Observer()
    obs.start(run)
    assert run.run_until(900, lambda r: obs(r) or len(obs.created) == 2)
    lost = sorted(obs.created)[0]
    run.sim.cluster.delete("NodeClaim", lost)  # the cloud lost it before it joined
    failed_by = run.t + disruption.INTERVAL + disruption.AFTER_DRIFT  # the next pass (1 s after the wave started)
    run.run_until(3 * 3600, obs)
    first = run.ctrl.waves.history[0]
    assert first.notes and first.notes[0].startswith(f"failed: replacement NodeClaim {lost}")
    assert first.done_at is not None and first.done_at - run.start <= failed_by
    later = sorted({t for name, t in obs.created.items() if t > obs.created[lost]})
    assert later and later[0] >= first.done_at - run.start + 120
    assert max(s[1] for s in obs.samples) <= 2
    assert not ({interface.name_of(n) for n in run.nodes()} & obs.old)
    h.expect_settled(run, {"web": 4})
