"""The Pareto front and the recommendation, on hand-made trial summaries (no simulation)."""

from __future__ import annotations

from typing import Any

from karpy.clock import VirtualClock
from karpy.design import search, trials
from karpy.kube.interface import ADDED, MODIFIED

BOUNDS = trials.Bounds(max_p95_pending=60.0)


def _summary(name: str, cost: float, p95: float, disruptions: float = 0.0, launched: float = 1.0) -> trials.Summary:
    out = trials.Outcome(seed=0, figures={"cost": cost, "p95Pending": p95, "disruptionsPerHour": disruptions,
                                          "nodesLaunched": launched}, timeline=())
    return trials.summarise(name, {"name": name}, [out], BOUNDS)


def test_the_front_keeps_feasible_undominated_designs_cheapest_first() -> None:
    cheap_slow = _summary("a", cost=1.0, p95=50.0)
    dear_fast = _summary("b", cost=2.0, p95=10.0)
    dominated = _summary("c", cost=2.5, p95=55.0)
    too_slow = _summary("d", cost=0.5, p95=90.0)
    fr = search.front([dear_fast, dominated, too_slow, cheap_slow])
    assert [s.key for s in fr] == ["a", "b"]
    assert not too_slow.feasible and too_slow.violation == 0.5 and too_slow.constraints == (30.0, 0.0)
    assert search.recommend(fr, "cost") is cheap_slow
    assert search.recommend(fr, "p95Pending") is dear_fast
    assert search.closest([too_slow]) is too_slow


def test_constraints_bound_the_worst_seed_while_the_objectives_are_means() -> None:
    seeds = [trials.Outcome(seed=s, figures={"cost": c, "p95Pending": p, "disruptionsPerHour": 1.0,
                                             "nodesLaunched": 3.0}, timeline=())
             for s, c, p in ((0, 1.0, 30.0), (1, 3.0, 70.0))]
    s = trials.summarise("k", {}, seeds, trials.Bounds(max_p95_pending=60.0, max_disruptions_per_hour=2.0))
    assert s.mean["cost"] == 2.0 and s.mean["p95Pending"] == 50.0
    assert s.worst["p95Pending"] == 70.0 and s.best["cost"] == 1.0
    assert s.constraints == (10.0, -1.0) and not s.feasible


def test_percentile_interpolates_like_numpy() -> None:
    assert trials.percentile([0.0, 10.0, 20.0, 30.0, 40.0], 95.0) == 38.0
    assert trials.percentile([5.0], 95.0) == 5.0


def test_pending_time_runs_from_creation_to_binding_or_the_end_and_skips_daemon_set_pods() -> None:
    clock = VirtualClock()
    times = trials.PendingTimes(clock)

    def pod(uid: str, node: str = "", owner: str = "ReplicaSet") -> dict[str, Any]:
        return {"metadata": {"uid": uid, "ownerReferences": [{"kind": owner, "name": "x", "controller": True}]},
                "spec": {"nodeName": node} if node else {}}

    start = clock.now()
    times.handle(ADDED, pod("a"))
    times.handle(ADDED, pod("b"))
    times.handle(ADDED, pod("ds", node="n1", owner="DaemonSet"))
    clock.set(start + 30)
    times.handle(MODIFIED, pod("a", node="n1"))
    times.handle(MODIFIED, pod("a", node="n1"))  # counted once
    clock.set(start + 100)
    assert times.waits == [30.0]
    assert times.p95(clock.now()) == trials.percentile([30.0, 100.0], 95.0) == 96.5
