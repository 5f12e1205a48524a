"""``karpy design``: search NodePool designs against a cluster's own workload (``docs/design.md``).

``karpy design INPUT... --space SPACE.yaml [--trace FILE] [--objective cost] [--max-p95-pending 60s]
[--max-disruptions-per-hour 2] [--trials 200] [--seeds 3] [--for 24h] [--parallel N | --ray ADDRESS]
[--output table|json] [--report DIR]``

Exit status: 0 with a recommended design, 1 when no design kept within the bounds (the closest one is
shown), 2 for bad input (every problem named: file, field, expected, found), 3 when ``--kubeconfig``'s
cluster cannot be read.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

import click

from karpy.api import duration, errors
from karpy.simulator import command_inputs

OBJECTIVE_NAMES = {"cost": "cost", "p95-pending": "p95Pending", "disruptions": "disruptionsPerHour",
                   "nodes-launched": "nodesLaunched"}


def _seconds(flag: str, text: str | None, *, allow_zero: bool = False) -> float | None:
    if text is None:
        return None
    try:
        value = duration.parse_duration(text)
    except duration.DurationError:
        value = None
    if value is None or value < 0 or (value == 0 and not allow_zero):
        _fail([errors.FieldError(flag, "(flag)", "a positive duration such as 60s, 15m or 24h", text)])
    return value


def _fail(problems: Any, what: str = "karpy design cannot run") -> NoReturn:
    click.echo(f"Error: {what}:", err=True)
    for e in problems:
        click.echo(f"  {e}", err=True)
    sys.exit(2)


@click.command("design")
@click.argument("inputs", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--space", "space_file", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The design space (kind: DesignSpace; docs/design.md).")
@click.option("--trace", "trace_file", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Deployment replica counts over time (CSV or YAML; docs/design.md), added as scale steps.")
@click.option("--kubeconfig", default=None, metavar="PATH", help="Read the workload from a live cluster (read-only).")
@click.option("--context", default=None, help="The kubeconfig context to use.")
@click.option("--objective", type=click.Choice(tuple(OBJECTIVE_NAMES)), default="cost", show_default=True,
              help="What the recommended design of the front minimises.")
@click.option("--max-p95-pending", default=None, metavar="DURATION",
              help="Bound on the worst seed's p95 pod pending time (e.g. 60s).")
@click.option("--max-disruptions-per-hour", type=click.FloatRange(min=0), default=None,
              help="Bound on the worst seed's voluntary disruptions per hour.")
@click.option("--trials", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Simulations per design (seeds --seed .. --seed + N - 1).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the search and first simulation seed.")
@click.option("--population", type=click.IntRange(min=2), default=None,
              help="NSGA-II generation size (default: trials / 8, between 4 and 50).")
@click.option("--for", "for_", default="24h", show_default=True, metavar="DURATION",
              help="Simulated time per trial.")
@click.option("--parallel", type=click.IntRange(min=1), default=None,
              help="Local worker processes (default: the machine's cores).")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Run the simulations as tasks on this Ray cluster (karpy[ray]; 'local' starts one here).")
@click.option("--output", "-o", type=click.Choice(("table", "json")), default="table", show_default=True)
@click.option("--report", "report_dir", default=None, metavar="DIR", help="Also write an HTML report into DIR.")
@click.option("--cluster-name", default="design", show_default=True, help="Cluster name for a dump input.")
def design_command(inputs: tuple[str, ...], space_file: str, trace_file: str | None, kubeconfig: str | None,
                   context: str | None, objective: str, max_p95_pending: str | None,
                   max_disruptions_per_hour: float | None, trials: int, seeds: int, seed: int,
                   population: int | None, for_: str, parallel: int | None, ray_address: str | None, output: str,
                   report_dir: str | None, cluster_name: str) -> None:
    """Search NodePool designs for the workload of INPUT (a scenario, or a cluster dump with --trace)."""
    import logging

    from karpy.design import inputs as inputs_mod
    from karpy.design import nodepools, runners, search
    from karpy.design import output as out_mod
    from karpy.design import space as space_mod
    from karpy.design import trials as trials_mod

    logging.getLogger("karpy").setLevel(logging.CRITICAL)
    if parallel is not None and ray_address:
        raise click.UsageError("give --parallel or --ray, not both")
    if bool(inputs) == bool(kubeconfig):
        raise click.UsageError("give INPUT files or --kubeconfig, not both and not neither")
    until = _seconds("--for", for_)
    assert until is not None
    bounds = trials_mod.Bounds(max_p95_pending=_seconds("--max-p95-pending", max_p95_pending, allow_zero=True),
                               max_disruptions_per_hour=max_disruptions_per_hour)
    sources = [(f, command_inputs.read_file(f)) for f in inputs]
    if kubeconfig:
        sources = [command_inputs.read_live_cluster(kubeconfig, context)]
    try:
        sp = space_mod.load(space_file)
        trace = (trace_file, command_inputs.read_file(trace_file)) if trace_file else None
        scn = inputs_mod.load(sources, trace=trace, until=until, cluster_name=cluster_name)
        target = nodepools.resolve(sp, scn)
    except errors.ValidationError as exc:
        _fail(exc.errors)
    opts = search.Options(trials=trials, seeds=seeds, seed=seed, population=population,
                          objective=OBJECTIVE_NAMES[objective], bounds=bounds)
    ctx = trials_mod.Context(scn, target, until)
    started = time.monotonic()
    runner = runners.make(ctx, parallel=parallel, ray_address=ray_address)
    try:
        with _progress(trials, enabled=sys.stderr.isatty()) as show:
            base_jobs = [trials_mod.Job("{}", {}, s) for s in search.sim_seeds(opts)]
            baseline = trials_mod.summarise("{}", {}, runner.run(base_jobs, lambda: None), bounds)
            result = search.run(sp, runner, opts, progress=show)
    finally:
        runner.close()
    data = out_mod.to_dict(result, baseline, target)
    out_mod.write(data, output, sys.stdout)
    click.echo(f"{len(result.summaries)} designs simulated ({len(result.trial_keys)} NSGA-II proposals) with {seeds} "
               f"seed(s) on {runner.workers} worker(s) in {time.monotonic() - started:.1f}s", err=True)
    if report_dir:
        from karpy.design import report

        click.echo(f"report written to {report.write(result, baseline, data, report_dir)}", err=True)
    if result.recommended is None:
        sys.exit(1)


class _progress:
    """A rich progress bar on stderr: trials done, the best design so far, time left."""

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> Callable[[Any], None] | None:
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("trials"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                            TextColumn("{task.fields[best]}"), console=Console(stderr=True), transient=True)
        self.bar.start()
        self.task = self.bar.add_task("design", total=self.total, best="")
        return self.update

    def update(self, status: Any) -> None:
        best = status.best
        text = "" if best is None else f"best ${best.mean['cost']:.3f}/h p95 {best.mean['p95Pending']:.0f}s"
        self.bar.update(self.task, completed=min(self.total, status.progress), best=text)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
