"""A finished simulation is freed: nothing module-level keeps its manager, controllers or cluster.

``karpy design`` runs hundreds of simulations in one worker process; anything a simulation leaves
reachable grows the worker by megabytes per simulation (7 GB after ~300 of bench/design.py's).
"""

from __future__ import annotations

import gc
import pathlib
import weakref

from karpy.disruption import controller as disruption
from karpy.simulator import engine, scenario

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "eks-scale-out-v1alpha5.yaml"


def _run_and_keep_weak_refs() -> tuple[weakref.ref[object], weakref.ref[object]]:
    sim = engine.Simulation(scenario.load(EXAMPLE))
    sim.run()
    ctrl = disruption.registered(sim.manager)
    assert ctrl is not None and disruption.registered(sim.manager) is ctrl
    return weakref.ref(sim.manager), weakref.ref(ctrl)


def test_a_finished_simulations_manager_and_disruption_controller_are_collected() -> None:
    manager, ctrl = _run_and_keep_weak_refs()
    gc.collect()
    assert manager() is None
    assert ctrl() is None
