"""The search end to end on a tiny workload: deterministic, and the same serially, on a process pool and on Ray."""

from __future__ import annotations

import importlib.util

import pytest

from karpy.design import inputs, nodepools, runners, search, space, trials
from support import design_workload

UNTIL = 900.0


def _context() -> tuple[space.Space, trials.Context]:
    sp = space.parse(design_workload.SPACE)
    scn = inputs.load([("tiny.yaml", design_workload.SCENARIO)], trace=("t.csv", design_workload.TRACE_CSV),
                      until=UNTIL)
    return sp, trials.Context(scn, nodepools.resolve(sp, scn), UNTIL)


OPTS = search.Options(trials=5, seeds=2, seed=7, population=3, bounds=trials.Bounds(max_p95_pending=600.0))


def _answer(result: search.Result) -> tuple[object, ...]:
    return (result.trial_keys, [(s.key, s.mean, s.worst) for s in result.front],
            result.recommended.key if result.recommended else None,
            {k: [o.figures for o in s.outcomes] for k, s in result.summaries.items()})


def test_the_same_seed_and_trial_count_give_the_same_front_and_another_seed_samples_differently() -> None:
    sp, ctx = _context()
    first = search.run(sp, runners.Serial(ctx), OPTS)
    again = search.run(sp, runners.Serial(ctx), OPTS)
    assert _answer(first) == _answer(again)
    assert len(first.summaries) == 5 and first.front and first.recommended is not None
    assert all(len(s.outcomes) == 2 for s in first.summaries.values())
    # a repeated design is told again but neither simulated again nor counted as a trial
    assert len(first.summaries) == len(set(first.trial_keys)) <= len(first.trial_keys)
    other = search.run(sp, runners.Serial(ctx), search.Options(trials=5, seeds=1, seed=8, population=3))
    assert other.trial_keys != first.trial_keys


def test_a_local_process_pool_gives_the_serial_answer() -> None:
    sp, ctx = _context()
    serial = search.run(sp, runners.Serial(ctx), OPTS)
    pool = runners.Local(ctx, 2)
    try:
        parallel = search.run(sp, pool, OPTS)
    finally:
        pool.close()
    assert _answer(parallel) == _answer(serial)


def test_brute_force_covers_the_whole_space_and_its_best_bounds_the_search() -> None:
    sp, ctx = _context()
    opts = search.Options(trials=sp.size(), seeds=1, seed=7, population=3)
    brute = search.grid(sp, runners.Serial(ctx), opts)
    assert len(brute.summaries) == sp.size() == 6
    searched = search.run(sp, runners.Serial(ctx), search.Options(trials=50, seeds=1, seed=7, population=3))
    assert len(searched.summaries) == 6  # the budget is capped by the space's size: every design once
    assert brute.recommended is not None and searched.recommended is not None
    assert searched.recommended.key == brute.recommended.key
    assert {k: s.mean for k, s in searched.summaries.items()} == {k: s.mean for k, s in brute.summaries.items()}


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (karpy[ray])")
def test_ray_tasks_on_a_local_ray_head_give_the_local_answer() -> None:
    import ray

    sp, ctx = _context()
    opts = search.Options(trials=3, seeds=1, seed=7, population=3)
    serial = search.run(sp, runners.Serial(ctx), opts)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        on_ray = runners.Ray(ctx, "local")
        assert on_ray.workers == 2
        result = search.run(sp, on_ray, opts)
    finally:
        ray.shutdown()
    assert _answer(result) == _answer(serial)
