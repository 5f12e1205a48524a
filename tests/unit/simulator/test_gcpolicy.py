"""The simulation's garbage-collector policy: off for the block that asks for it, and a run leaves
little for the collector (so that turning it off costs no memory)."""

from __future__ import annotations

import gc
import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from karpy.simulator import engine, gcpolicy, scenario

BENCH = Path(__file__).resolve().parents[3] / "bench"


@pytest.fixture
def collector_state() -> Iterator[None]:
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        (gc.enable if enabled else gc.disable)()


def test_automatic_collection_is_off_inside_the_block_and_the_callers_state_comes_back_after(
        collector_state: None) -> None:
    gc.enable()
    gc.set_threshold(1234, 5, 6)
    with gcpolicy.tuned():
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_threshold() == (1234, 5, 6)
    gc.disable()
    with gcpolicy.tuned():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_the_callers_state_comes_back_when_the_block_raises(collector_state: None) -> None:
    gc.enable()
    with pytest.raises(RuntimeError), gcpolicy.tuned():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_what_the_block_allocated_leaves_the_young_generation_without_being_walked(collector_state: None) -> None:
    gc.enable()
    with gcpolicy.tuned():
        kept = [[i] for i in range(50_000)]
        assert gc.get_count()[0] >= 50_000  # nothing collected inside: all of it is young
    assert gc.get_count()[0] < 1_000  # promoted on the way out: the next young collection has little to walk
    assert len(kept) == 50_000


def test_objects_the_caller_froze_stay_frozen(collector_state: None) -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gcpolicy.tuned():
            kept = [[i] for i in range(5_000)]
        # frozen objects may still die by reference count meanwhile (a few); unfreezing the caller's would
        # empty the permanent generation, freezing the block's would add its 5,000 lists
        assert frozen - 2_500 < gc.get_freeze_count() < frozen + 2_500
        assert len(kept) == 5_000
    finally:
        gc.unfreeze()


def _cyclic_garbage_of_a_run(pods: int) -> int:
    """Objects the cyclic collector finds after a run of ``pods`` benchmark-mix pods (the run's world
    still referenced: only what the run itself left)."""
    spec = importlib.util.spec_from_file_location("e2e_scale_for_gc_test", BENCH / "e2e_scale.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    text = bench.scenario_text(pods)
    gc.collect()
    gc.disable()
    sim = engine.Simulation(scenario.load_text(text, source="e2e"))
    result = sim.run()
    found = gc.collect()
    assert result.timeline[-1].running_pods == pods
    return found


def test_a_simulation_leaves_a_small_fixed_amount_of_cyclic_garbage_not_an_amount_per_pod(
        collector_state: None) -> None:
    _cyclic_garbage_of_a_run(100)  # imports and lazily built types leave cycles once
    small, large = _cyclic_garbage_of_a_run(500), _cyclic_garbage_of_a_run(2_000)
    # measured: 1,365 and 1,959 (0.4 per added pod); a cycle per pod or per solve (holding its pod lists:
    # once 4 Pod models per pod) grows by several objects per pod
    assert large - small < 1_500, f"{small} cyclic objects after 500 pods, {large} after 2,000"
    assert large < 5_000
