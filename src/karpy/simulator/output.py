"""What ``karpy simulate`` prints: a table report, or the whole result as JSON / YAML, and the command.

:func:`render` writes a :class:`karpy.simulator.engine.Result` in one of :data:`OUTPUTS`: ``json``
and ``yaml`` stream :func:`karpy.simulator.document.document` (the machine-readable form, see there);
``table`` is :func:`karpy.simulator.table.render_table` (``wide``: every row, however many).
:func:`run_command` is the body of ``karpy simulate``; the HTML report (``--report``) is
:mod:`karpy.simulator.report`, which takes the result and knows nothing of this module.
"""

from __future__ import annotations

import io
from typing import IO

from rich.console import Console

from karpy import clock as clock_mod
from karpy.simulator import document as document_mod
from karpy.simulator import engine, table, timefmt

OUTPUTS = ("table", "json", "yaml")
EXIT_RECONCILE_ERRORS = 3
"""``karpy simulate`` exit status when a controller failed unexpectedly (2 is bad input)."""

document = document_mod.document
render_table = table.render_table
pending_explanations = table.pending_explanations
age = timefmt.age
offset = timefmt.offset


def render_json(result: engine.Result) -> str:
    """The JSON text at once (:func:`render` streams it to a file instead)."""
    buf = io.StringIO()
    document_mod.write_json(result, buf)
    return buf.getvalue()


def render_yaml(result: engine.Result) -> str:
    """The YAML text at once (:func:`render` streams it to a file instead)."""
    buf = io.StringIO()
    document_mod.write_yaml(result, buf)
    return buf.getvalue()


def render(result: engine.Result, output: str, file: IO[str], *, width: int | None = None,
           wide: bool = False) -> None:
    """Write ``result`` to ``file`` in ``output`` (one of :data:`OUTPUTS`); ``wide``: the table prints
    every node, event and pod instead of summarising past :data:`karpy.simulator.table.SUMMARISE_PAST`."""
    if output == "json":
        document_mod.write_json(result, file)
    elif output == "yaml":
        document_mod.write_yaml(result, file)
    elif output == "table":
        render_table(result, file, width=width, wide=wide)
    else:
        raise ValueError(f"output must be one of {', '.join(OUTPUTS)}, got {output!r}")


# ----------------------------------------------------------------------------------- command


def run_command(path: str, *, until: str | None = None, seed: int | None = None, output: str = "table",
                report_dir: str | None = None, stdout: IO[str], stderr: IO[str],
                progress: bool = False, autoscaler: str = "karpy", wide: bool = False, max_pods: int | None = None,
                max_nodes: int | None = None) -> int:
    """The body of ``karpy simulate``: load and validate everything, run, write the outputs.

    Returns the exit status: 0, or :data:`EXIT_RECONCILE_ERRORS` when a reconcile failed with
    something other than a retryable API/cloud error (summarised on ``stderr`` either way).

    Raises :class:`karpy.api.errors.ValidationError` for bad input *before* anything runs (the
    scenario, ``until``, the output format, a report directory that cannot be created, a scenario asking
    for more pods than ``max_pods``), and :class:`karpy.simulator.limits.LimitExceededError` when the run
    goes over ``max_pods`` / ``max_nodes`` (:mod:`karpy.simulator.limits`; it says so on ``stderr`` near them).
    """
    import pathlib

    from karpy.api import duration as duration_mod
    from karpy.api import errors
    from karpy.simulator import scenario as scenario_mod

    if output not in OUTPUTS:
        raise errors.ValidationError.single("--output", "(option)", "one of " + ", ".join(OUTPUTS), output)
    until_s: float | None = None
    if until is not None:
        try:
            until_s = duration_mod.parse_duration(until)
        except duration_mod.DurationError:
            until_s = None
        if until_s is None or until_s <= 0:
            raise errors.ValidationError.single("--until", "(option)",
                                                "a positive duration such as 15m or 24h", until)
    report_path: pathlib.Path | None = None
    if report_dir is not None:
        report_path = pathlib.Path(report_dir)
        if report_path.exists() and not report_path.is_dir():
            raise errors.ValidationError.single("--report", "(option)", "a directory", report_dir)
        try:
            report_path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise errors.ValidationError.single("--report", "(option)", "a directory that can be created",
                                                f"{report_dir} ({exc.strerror})") from None
    from karpy.simulator import limits as limits_mod

    run_limits = limits_mod.Limits(max_pods=limits_mod.DEFAULT_MAX_PODS if max_pods is None else max_pods,
                                   max_nodes=limits_mod.DEFAULT_MAX_NODES if max_nodes is None else max_nodes)
    scn = scenario_mod.load(path, until=until_s, limits=run_limits)

    def notify(message: str) -> None:
        stderr.write(f"warning: {message}\n")

    for w in scn.warnings:
        stderr.write(f"warning: {w}\n")
    sim_progress = _progress_bar(stderr) if progress else None
    try:
        result = engine.Simulation(scn, seed=seed, progress=sim_progress.update if sim_progress else None,
                                   autoscaler=autoscaler, notify=notify).run()
    finally:
        if sim_progress is not None:
            sim_progress.close()
    render(result, output, stdout, wide=wide)
    if report_path is not None:
        from karpy.simulator import report

        index = report.write(result, report_path)
        stderr.write(f"report written to {index}\n")
    if result.error_lines:
        stderr.write(f"reconcile errors ({result.unexpected_errors} unexpected):\n")
        for line in result.error_lines:
            stderr.write(f"  {line}\n")
    return EXIT_RECONCILE_ERRORS if result.unexpected_errors else 0


class _ProgressBar:
    """A rich progress bar over virtual time, redrawn at most ten times a second (wall time)."""

    def __init__(self, file: IO[str]) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.description}"),
                                  TimeElapsedColumn(), console=Console(file=file), transient=True)
        self._task = self._progress.add_task("", total=1.0)
        self._progress.start()
        self._last = 0.0

    def update(self, done: float, total: float) -> None:
        now = clock_mod.perf_counter()
        if now - self._last < 0.1 and done < total:
            return
        self._last = now
        self._progress.update(self._task, completed=done / total if total else 1.0,
                              description=f"{timefmt.duration(int(done))} / {timefmt.duration(int(total))} virtual")

    def close(self) -> None:
        self._progress.stop()


def _progress_bar(file: IO[str]) -> _ProgressBar:
    return _ProgressBar(file)
