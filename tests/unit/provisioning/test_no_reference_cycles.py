"""A scheduling run leaves nothing for the cyclic garbage collector: its working state (bins, pod
lists, placements) is freed by reference counting as soon as the run ends. A cycle there (once: the
DaemonSet overhead holding a bound method of its placement) kept every solve's state alive until a
collection, and made the simulator's collections scan it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from karpy.api import labels as wk
from karpy.simulator import gcpolicy

from . import builders as b


@pytest.fixture
def no_automatic_collection() -> Iterator[None]:
    gc.collect()
    with gcpolicy.tuned():  # the simulator's own switch: no automatic collection, the state restored after
        yield


def _garbage_after(run: object) -> list[str]:
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        assert callable(run)
        run()
        gc.collect()
        return sorted({type(o).__name__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_a_solve_with_daemonsets_existing_and_in_flight_nodes_and_topology_leaves_no_cyclic_garbage(
        no_automatic_collection: None) -> None:
    spread = b.make_pods("spread", 12, cpu="500m", labels={"app": "s"},
                         topologySpreadConstraints=[b.spread(wk.ZONE, {"app": "s"})])
    anti = b.make_pods("anti", 3, labels={"app": "a"},
                       affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                           b.affinity_term(wk.HOSTNAME, {"app": "a"})]}})
    plain = b.make_pods("plain", 40, cpu="250m")
    existing = [b.existing_node("n1", running=b.make_pods("old", 2)), b.existing_node("n2", in_flight=True)]
    agent = b.daemonset_pod("agent", cpu="100m")

    def run() -> None:
        res = b.solve([*spread, *anti, *plain], existing=existing, daemonsets=[agent])
        assert res.new_claims

    run()  # the first run imports and builds lazily made types (their cycles are not the run's)
    assert _garbage_after(run) == []


@pytest.mark.parametrize("enabled", [True, False])
def test_a_solve_runs_without_automatic_collection_and_leaves_the_collector_as_it_found_it(
        enabled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from karpy.provisioning import podgroups

    seen: list[bool] = []
    group_pods = podgroups.group_pods

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return group_pods(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(podgroups, "group_pods", spy)
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        res = b.solve(b.make_pods("plain", 5, cpu="250m"))
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert res.new_claims and seen == [False]
