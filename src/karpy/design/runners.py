"""Where ``karpy design`` runs its simulations: in this process, a local process pool, or a Ray cluster.

Every runner has ``run(jobs, done) -> outcomes``: the :class:`karpy.design.trials.Outcome` of each job
in the order of ``jobs`` (whatever order they finished in), calling ``done()`` once per finished job
(for the progress bar). A simulation is deterministic, so every runner gives the same outcomes for the
same jobs; the search (:mod:`karpy.design.search`) decides what to run in the same order whichever
runner it uses, hence the same answer locally and on Ray.

* :class:`Serial`: one simulation after the other, in this process (``--parallel 1``).
* :class:`Local`: a ``concurrent.futures`` process pool of ``--parallel`` workers (default: the
  machine's cores); the shared :class:`karpy.design.trials.Context` (workload, base pool) goes to each
  worker once, at its start, and each task carries only a design and a seed.
* :class:`Ray`: each simulation one Ray task on the cluster at ``--ray ADDRESS`` (``ray.init(address)``;
  ``local`` starts a local Ray). The context is put in Ray's object store once per search and every
  task gets its reference. Ray is imported only here, only when this runner is made (``karpy[ray]``).
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from karpy.design import trials

Done = Callable[[], None]


class Runner(Protocol):
    workers: int

    def run(self, jobs: Sequence[trials.Job], done: Done) -> list[trials.Outcome]: ...

    def close(self) -> None: ...


class Serial:
    workers = 1

    def __init__(self, ctx: trials.Context) -> None:
        self.ctx = ctx

    def run(self, jobs: Sequence[trials.Job], done: Done) -> list[trials.Outcome]:
        out = []
        for job in jobs:
            out.append(trials.simulate(self.ctx, job))
            done()
        return out

    def close(self) -> None:
        pass


_WORKER: dict[str, trials.Context] = {}
"""In a pool worker: the search's context, set once when the worker starts."""


def _init_worker(ctx: trials.Context) -> None:
    _WORKER["ctx"] = ctx


def _run_in_worker(job: trials.Job) -> trials.Outcome:
    return trials.simulate(_WORKER["ctx"], job)


def default_parallel() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


class Local:
    """A process pool of ``workers`` processes, started once per search."""

    def __init__(self, ctx: trials.Context, workers: int) -> None:
        self.workers = workers
        self.pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers, initializer=_init_worker,
                                                           initargs=(ctx,))

    def run(self, jobs: Sequence[trials.Job], done: Done) -> list[trials.Outcome]:
        futures = {self.pool.submit(_run_in_worker, job): i for i, job in enumerate(jobs)}
        out: list[trials.Outcome | None] = [None] * len(jobs)
        for fut in concurrent.futures.as_completed(futures):
            out[futures[fut]] = fut.result()
            done()
        return [o for o in out if o is not None]

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _ray_simulate(ctx: trials.Context, job: trials.Job) -> trials.Outcome:
    return trials.simulate(ctx, job)


class Ray:
    """Ray tasks on the cluster at ``address`` (``"local"``: a Ray started here, ``ray.init()``)."""

    def __init__(self, ctx: trials.Context, address: str, *, init_kwargs: dict[str, Any] | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise RuntimeError("--ray needs Ray: pip install 'karpy[ray]'") from None
        self.ray: Any = ray
        self._started = False
        if not ray.is_initialized():
            kwargs = dict(init_kwargs or {})
            kwargs.setdefault("log_to_driver", False)
            kwargs.setdefault("include_dashboard", False)
            if address != "local":
                kwargs["address"] = address
            ray.init(**kwargs)
            self._started = True
        resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
        self.workers = max(1, int(resources.get("CPU", 1)))
        self.ctx_ref = ray.put(ctx)
        self.task = ray.remote(num_cpus=1)(_ray_simulate)

    def run(self, jobs: Sequence[trials.Job], done: Done) -> list[trials.Outcome]:
        refs = [self.task.remote(self.ctx_ref, job) for job in jobs]
        index = {r: i for i, r in enumerate(refs)}
        out: list[trials.Outcome | None] = [None] * len(jobs)
        waiting = list(refs)
        while waiting:
            ready, waiting = self.ray.wait(waiting, num_returns=1)
            for r in ready:
                out[index[r]] = self.ray.get(r)
                done()
        return [o for o in out if o is not None]

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()


def make(ctx: trials.Context, *, parallel: int | None, ray_address: str | None) -> Runner:
    if ray_address:
        return Ray(ctx, ray_address)
    workers = parallel if parallel is not None else default_parallel()
    if workers <= 1:
        return Serial(ctx)
    return Local(ctx, workers)
