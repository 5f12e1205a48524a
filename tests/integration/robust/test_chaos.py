"""The bounded CI form of ``bench/chaos.py``: six simulated hours with every fault on, judged by the
independent invariant checker (:mod:`karpy.simulator.invariants`).

Which random faults a seed draws depends on how many calls the controllers make, so any change in
their call counts reshuffles them (and a kind drawn a few times per run may not be drawn at all).
The test therefore does not rely on a lucky seed: the scenario's fault plan makes each kind of
``chaos_scenario.PLANNED`` certain from a named moment (``spec.faults.plan``), restarts and NotReady
nodes come at fixed moments, and two seeds run, each judged on its own.
"""

from __future__ import annotations

import pytest

from karpy.simulator import chaos_scenario

EXERCISED = (*chaos_scenario.PLANNED, "restart", "nodeNotReady")


@pytest.mark.parametrize("seed", [1, 2])
def test_six_hours_of_every_fault_break_no_invariant(seed: int) -> None:
    out = chaos_scenario.run(seed=seed, hours=6.0)
    assert out.violations == []
    assert out.unexpected_errors == 0, out.error_lines
    assert [kind for kind in EXERCISED if out.faults.get(kind, 0) == 0] == [], out.faults
    assert out.launches > 10 and out.interruptions > 0 and out.disruptions > 0
    assert out.samples > 600  # the checker looked at least every 30 simulated seconds
