"""The search of ``karpy design``: Optuna's NSGA-II over a design space, several objectives, constraints.

:func:`run` asks Optuna (``optuna.samplers.NSGAIISampler``, seeded) for one generation of designs at a
time (``population`` proposals), simulates every new design with ``seeds`` seeds through a runner
(:mod:`karpy.design.runners`), and tells Optuna each trial's mean figures (the four objectives of
:data:`karpy.design.trials.OBJECTIVES`, all minimised) and its constraint values (worst seed's p95
pending time and disruptions per hour minus their bounds: NSGA-II's constrained domination ranks
infeasible trials after feasible ones, and they never enter the front). ``trials`` is the number
of distinct designs simulated (at most the space's size): a design proposed again is told its
figures again without a simulation and does not count; at most ``MAX_ASKS_PER_TRIAL`` proposals per
trial. Then :func:`front` keeps the feasible designs no other feasible design dominates and
:func:`recommend` picks the one with the lowest ``--objective`` (ties: the other objectives).

Determinism: trials are asked and told in the same order whatever the runner or the order simulations
finish in, the sampler's seed is the search seed, and every simulation is deterministic: the same space,
workload, seed and trial count give the same front, serially, on a process pool or on Ray.

Optuna is imported here only when :func:`run` is called (``karpy[design]``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.design import runners
from karpy.design import space as space_mod
from karpy.design import trials as tr

Progress = Callable[["Status"], None]

MAX_ASKS_PER_TRIAL = 10
"""A search stops after this many proposals per trial even if NSGA-II keeps repeating designs."""


@dataclass(slots=True)
class Status:
    """What the progress bar shows."""

    trials_done: int
    trials_total: int
    simulations_done: int
    simulations_total: int
    best: tr.Summary | None
    progress: float = 0.0
    """Trials done, counting a generation in flight by its finished simulations."""


@dataclass(frozen=True, slots=True)
class Options:
    trials: int = 200
    seeds: int = 3
    seed: int = 0
    """The search seed: Optuna's sampler; the simulations use seeds ``seed .. seed + seeds - 1``."""
    population: int | None = None
    objective: str = "cost"
    bounds: tr.Bounds = field(default_factory=tr.Bounds)


@dataclass(slots=True)
class Result:
    space: space_mod.Space
    options: Options
    summaries: dict[str, tr.Summary]
    """Every distinct design evaluated, by key, in the order first proposed."""
    trial_keys: list[str]
    """The design of every Optuna trial, in order (repeats of a design included)."""
    front: list[tr.Summary]
    recommended: tr.Summary | None


def population_size(opts: Options) -> int:
    if opts.population is not None:
        return max(2, opts.population)
    return max(4, min(50, opts.trials // 8))


def sim_seeds(opts: Options) -> list[int]:
    return [opts.seed + i for i in range(opts.seeds)]


def run(sp: space_mod.Space, runner: runners.Runner, opts: Options, progress: Progress | None = None) -> Result:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.NSGAIISampler(population_size=population_size(opts), seed=opts.seed)
    study = optuna.create_study(directions=["minimize"] * len(tr.OBJECTIVES), sampler=sampler)
    summaries: dict[str, tr.Summary] = {}
    keys: list[str] = []
    seeds = sim_seeds(opts)
    budget = min(opts.trials, sp.size())
    max_asks = MAX_ASKS_PER_TRIAL * opts.trials
    status = Status(0, budget, 0, 0, None)
    batch = population_size(opts)
    while len(summaries) < budget and len(keys) < max_asks:
        asked = []
        for _ in range(min(batch, budget - len(summaries), max_asks - len(keys))):
            trial = study.ask()
            design = {v.name: v.values[v.labels().index(trial.suggest_categorical(v.name, v.labels()))]
                      for v in sp.variables}
            asked.append((trial, tr.design_key(design), design))
        new: dict[str, dict[str, Any]] = {}
        for _, key, design in asked:
            if key not in summaries:
                new.setdefault(key, design)
        jobs = [tr.Job(key, design, s) for key, design in new.items() for s in seeds]
        status.simulations_total += len(jobs)
        outcomes = runner.run(jobs, _Batch(status, progress, len(summaries), len(new), len(jobs)).done)
        for i, (key, design) in enumerate(new.items()):
            summaries[key] = tr.summarise(key, design, outcomes[i * len(seeds):(i + 1) * len(seeds)], opts.bounds)
        for trial, key, _ in asked:
            s = summaries[key]
            for name, value in zip(tr.CONSTRAINED, s.constraints, strict=False):
                trial.set_constraint(name, value)
            study.tell(trial, [s.mean[k] for k in tr.OBJECTIVES])
            keys.append(key)
        status.trials_done = len(summaries)
        status.progress = float(len(summaries))
        status.best = recommend(front(list(summaries.values())), opts.objective)
        if progress is not None:
            progress(status)
    fr = front(list(summaries.values()))
    return Result(space=sp, options=opts, summaries=summaries, trial_keys=keys, front=fr,
                  recommended=recommend(fr, opts.objective))


def grid(sp: space_mod.Space, runner: runners.Runner, opts: Options,
         progress: Progress | None = None) -> Result:
    """Every design of the space (brute force), for small spaces and for checking the search."""
    designs = [dict(zip([v.name for v in sp.variables], combo, strict=True))
               for combo in itertools.product(*[v.values for v in sp.variables])]
    seeds = sim_seeds(opts)
    jobs = [tr.Job(tr.design_key(d), d, s) for d in designs for s in seeds]
    status = Status(0, len(designs), 0, len(jobs), None)

    def done() -> None:
        status.simulations_done += 1
        status.trials_done = status.simulations_done // len(seeds)
        status.progress = status.simulations_done / len(seeds)
        if progress is not None:
            progress(status)

    outcomes = runner.run(jobs, done)
    summaries = {tr.design_key(d): tr.summarise(tr.design_key(d), d,
                                                        outcomes[i * len(seeds):(i + 1) * len(seeds)], opts.bounds)
                 for i, d in enumerate(designs)}
    fr = front(list(summaries.values()))
    return Result(space=sp, options=opts, summaries=summaries, trial_keys=list(summaries), front=fr,
                  recommended=recommend(fr, opts.objective))


class _Batch:
    """Counts a generation's finished simulations into the status."""

    def __init__(self, status: Status, progress: Progress | None, first: int, trials: int, jobs: int) -> None:
        self.status, self.progress, self.first, self.trials, self.jobs = status, progress, first, trials, jobs
        self.finished = 0

    def done(self) -> None:
        self.finished += 1
        self.status.simulations_done += 1
        self.status.progress = self.first + self.trials * self.finished / max(1, self.jobs)
        if self.progress is not None:
            self.progress(self.status)


def _dominates(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    return all(a[k] <= b[k] for k in tr.OBJECTIVES) and any(a[k] < b[k] for k in tr.OBJECTIVES)


def front(summaries: Sequence[tr.Summary]) -> list[tr.Summary]:
    """The feasible designs no feasible design dominates (on mean figures), cheapest first."""
    feasible = [s for s in summaries if s.feasible]
    out = [s for s in feasible if not any(_dominates(o.mean, s.mean) for o in feasible if o is not s)]
    return sorted(out, key=lambda s: (*(s.mean[k] for k in tr.OBJECTIVES), s.key))


def recommend(fr: Sequence[tr.Summary], objective: str) -> tr.Summary | None:
    order = [objective, *(k for k in tr.OBJECTIVES if k != objective)]
    return min(fr, key=lambda s: (*(s.mean[k] for k in order), s.key), default=None)


def closest(summaries: Sequence[tr.Summary]) -> tr.Summary | None:
    """With no feasible design: the one the least beyond the constraints."""
    return min(summaries, key=lambda s: (s.violation, s.mean["cost"], s.key), default=None)
