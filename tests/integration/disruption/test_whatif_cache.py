"""The disruption controller's what-if runs keep what they derived from the nodes across passes: a pass
re-derives only the nodes that changed since the last one, not the whole cluster."""

from __future__ import annotations

from karpy.disruption import simulation

from .test_emptiness import World


def _whatif(w: World, node: str) -> int:
    """One pass's snapshot and a removal what-if of ``node`` on it; the node rows that what-if derived."""
    obs = w.controller.observe(w.clock.now())
    snap = w.controller.snapshot(obs)
    before = snap.scheduling_cache.nodes.derived
    simulation.simulate_removal(snap, [node])
    return snap.scheduling_cache.nodes.derived - before


def test_a_pass_after_one_node_changed_re_derives_only_that_node_for_its_what_if_runs() -> None:
    w = World({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
    for i in range(1, 6):
        w.add_node(f"n{i}")
        w.add_pod(f"p{i}", f"n{i}")
    assert _whatif(w, "n1") == 4  # the first pass: every node but the one taken out
    w.clock.advance(10)
    assert _whatif(w, "n1") == 0  # a new pass, a new snapshot, nothing changed: nothing derived
    w.add_pod("extra", "n3")
    w.clock.advance(10)
    assert _whatif(w, "n1") == 1  # n3 only


def test_every_pass_s_snapshot_shares_the_controller_s_milp_memo() -> None:
    w = World({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
    w.add_node("n1")
    snaps = []
    for _ in range(2):
        snaps.append(w.controller.snapshot(w.controller.observe(w.clock.now())))
        w.clock.advance(10)
    assert snaps[0] is not snaps[1]
    assert snaps[0].milp_memo is snaps[1].milp_memo is w.controller.observer.milp_memo
