"""What ``karpy simulate`` prints: tables (rich), or the whole result as JSON / YAML.

:func:`document` is the machine-readable form of a :class:`karpy.simulator.engine.Result`::

    {"scenario": {...}, "objects": {"nodes": [...], "nodeclaims": [...], "pods": [...],
     "nodepools": [...]}, "events": [...], "metrics": {...}, "timeline": [...], "notes": [...]}

Objects are as the API server would return them, sorted by namespace and name; events are in the
order they were first published, each with ``time``, ``t`` (seconds since the start), ``type``,
``reason``, ``involvedObject``, ``message``, ``count`` and ``source``. :func:`render_json` and
:func:`render_yaml` are byte-identical for identical results.

:func:`render_table` prints, like ``kubectl get``: the nodes (name, instance type, capacity type,
zone, NodePool, age at the end of the run), the NodeClaims, the pods that are not Running (an
unbound pod's REASON is karpy's own latest word on it - the per-NodePool explanation of its last
``FailedScheduling`` event, or its nomination - and the kube-scheduler's message only when karpy
said nothing), the events of karpenter (``kubectl get events --field-selector source=karpenter``) in time order, and
the cost per hour.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import IO, Any

import yaml
from rich import box
from rich.console import Console
from rich.table import Table

from karpy import clock as clock_mod
from karpy.api import labels
from karpy.simulator import engine

OUTPUTS = ("table", "json", "yaml")
EXIT_RECONCILE_ERRORS = 3
"""``karpy simulate`` exit status when a controller failed unexpectedly (2 is bad input)."""
KARPENTER = "karpenter"


def document(result: engine.Result) -> dict[str, Any]:
    """The result as plain data (see the module docstring)."""
    return {
        "scenario": {**result.scenario.summary(), "seed": result.seed,
                     "until": _duration(result.until), "karpyControllers": list(result.karpy_controllers)},
        "objects": {k: result.objects.get(k, []) for k in ("nodes", "nodeclaims", "pods", "nodepools")},
        "events": result.events,
        "metrics": result.metrics,
        "timeline": [s.to_dict() for s in result.timeline],
        "notes": result.notes,
        "reconcileErrors": result.reconcile_errors,
    }


def render_json(result: engine.Result) -> str:
    return json.dumps(document(result), indent=2, ensure_ascii=False) + "\n"


def render_yaml(result: engine.Result) -> str:
    return yaml.safe_dump(document(result), sort_keys=False, allow_unicode=True, width=120)


def render(result: engine.Result, output: str, file: IO[str], *, width: int | None = None) -> None:
    """Write ``result`` to ``file`` in ``output`` (one of :data:`OUTPUTS`)."""
    if output == "json":
        file.write(render_json(result))
    elif output == "yaml":
        file.write(render_yaml(result))
    elif output == "table":
        render_table(result, file, width=width)
    else:
        raise ValueError(f"output must be one of {', '.join(OUTPUTS)}, got {output!r}")


# ------------------------------------------------------------------------------------ tables


def _duration(seconds: float) -> str:
    from karpy.api import duration

    return duration.format_duration(seconds)


def age(seconds: float) -> str:
    """kubectl's AGE column: ``45s``, ``12m``, ``3m20s`` (under 10 minutes), ``5h``, ``2d3h``."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    m, sec = divmod(s, 60)
    if m < 10:
        return f"{m}m{sec}s" if sec else f"{m}m"
    if m < 180:
        return f"{m}m"
    h, m = divmod(m, 60)
    if h < 8:
        return f"{h}h{m}m" if m else f"{h}h"
    if h < 48:
        return f"{h}h"
    d, h = divmod(h, 24)
    return f"{d}d{h}h" if h else f"{d}d"


def offset(seconds: float) -> str:
    """Time since the start of the run, ``+3m05s``."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"+{h}h{m:02d}m{sec:02d}s" if h else f"+{m}m{sec:02d}s"


def _created_age(obj: Mapping[str, Any], end: float) -> str:
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return "?"
    try:
        return age(end - clock_mod.parse_rfc3339(str(created)))
    except ValueError:
        return "?"


def _condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return c  # type: ignore[no-any-return]
    return None


def _table(title: str, *columns: str) -> Table:
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    return t


FAILED_PREFIX = "Failed to schedule pod, "


def pending_explanations(events: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """Per pod ``(namespace, name)``: karpy's latest word on it, from its last ``FailedScheduling``
    (the per-NodePool explanation, without the ``Failed to schedule pod, `` prefix) or
    ``Nominated`` event."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for e in events:
        obj = e.get("involvedObject") or {}
        if e.get("source") != KARPENTER or obj.get("kind") != "Pod" or \
                e.get("reason") not in ("FailedScheduling", "Nominated"):
            continue
        key = (str(obj.get("namespace", "")), str(obj.get("name", "")))
        when = str(e.get("lastTime") or e.get("time") or "")
        message = str(e.get("message", ""))
        message = message[len(FAILED_PREFIX):] if message.startswith(FAILED_PREFIX) else message
        if key not in out or when >= out[key][0]:
            out[key] = (when, message)
    return {k: v[1] for k, v in out.items()}


def render_table(result: engine.Result, file: IO[str], *, width: int | None = None) -> None:
    """The human-readable report; see the module docstring. Text is printed as it is: no rich
    markup is interpreted (``needs In [s390x]`` prints with its brackets)."""
    console = Console(file=file, width=width or 160, no_color=True, highlight=False, emoji=False,
                      force_terminal=False, soft_wrap=False, markup=False)
    end = result.end
    scn = result.scenario
    console.print(f"Scenario {scn.name} ({scn.cloud.provider}"
                  f"{', ' + scn.cloud.region if scn.cloud.region else ''}): "
                  f"simulated {_duration(result.until)}, seed {result.seed}")

    nodes = _table("NODES", "NAME", "INSTANCE TYPE", "CAPACITY TYPE", "ZONE", "NODEPOOL", "READY", "AGE")
    for n in result.objects.get("nodes", []):
        lb = (n.get("metadata") or {}).get("labels") or {}
        ready = _condition(n, "Ready")
        nodes.add_row(n["metadata"]["name"], lb.get(labels.INSTANCE_TYPE, ""),
                      lb.get(labels.CAPACITY_TYPE, ""), lb.get(labels.ZONE, ""),
                      lb.get(labels.NODEPOOL, engine.UNMANAGED),
                      str((ready or {}).get("status", "Unknown")), _created_age(n, end))
    console.print(nodes)

    claims = _table("NODECLAIMS", "NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE")
    for c in result.objects.get("nodeclaims", []):
        lb = (c.get("metadata") or {}).get("labels") or {}
        ready = _condition(c, "Ready")
        claims.add_row(c["metadata"]["name"], lb.get(labels.INSTANCE_TYPE, ""),
                       lb.get(labels.CAPACITY_TYPE, ""), lb.get(labels.ZONE, ""),
                       str((c.get("status") or {}).get("nodeName", "")),
                       str((ready or {}).get("status", "Unknown")), _created_age(c, end))
    if claims.row_count:
        console.print(claims)
    else:
        console.print("NODECLAIMS: none")

    pods = _table("PODS NOT RUNNING", "NAMESPACE", "NAME", "PHASE", "NODE", "REASON")
    karpy_says = pending_explanations(result.events)
    for p in result.objects.get("pods", []):
        phase = (p.get("status") or {}).get("phase") or "Pending"
        if phase == "Running":
            continue
        sched = _condition(p, "PodScheduled") or {}
        why = str(sched.get("message") or sched.get("reason") or "") if sched.get("status") == "False" else ""
        if not (p.get("spec") or {}).get("nodeName"):
            why = karpy_says.get((p["metadata"].get("namespace", ""), p["metadata"]["name"]), why)
        pods.add_row(p["metadata"].get("namespace", ""), p["metadata"]["name"], phase,
                     str((p.get("spec") or {}).get("nodeName") or ""), why)
    if pods.row_count:
        console.print(pods)
    else:
        console.print("PODS NOT RUNNING: none")

    evs = _table("EVENTS (source=karpenter)", "TIME", "TYPE", "REASON", "OBJECT", "MESSAGE")
    for e in result.events:
        if e["source"] != KARPENTER:
            continue
        obj = e["involvedObject"]
        count = f" (x{e['count']})" if e["count"] > 1 else ""
        ref = f"{str(obj.get('kind', '')).lower()}/{obj.get('name', '')}"
        evs.add_row(offset(e["t"]), e["type"], e["reason"], ref, e["message"] + count)
    if evs.row_count:
        console.print(evs)
    else:
        console.print("EVENTS (source=karpenter): none")

    notes = [n for n in result.notes if not str(n["message"]).startswith("step ")
             or "does not exist" in n["message"] or "cannot" in n["message"]]
    for n in notes:
        console.print(f"note {offset(n['t'])}: {n['message']}")
    sim = result.metrics.get("simulator", {})
    console.print(f"Cost: ${result.cost_per_hour:.4f}/h for karpy's nodes at the end; "
                  f"${result.accrued_cost:.4f} spent during the run; "
                  f"{sim.get('instancesLaunched', 0)} launched, "
                  f"{sim.get('instancesTerminated', 0)} terminated")
    bill = sim.get("commitments")
    if bill:
        console.print(f"Commitments at the end: on-demand equivalent ${bill['onDemandEquivalent']:.4f}/h, "
                      f"paid ${bill['paid']:.4f}/h; Reserved Instances {bill['reservedInstanceUtilization']:.0%} "
                      f"used, Savings Plans {bill['savingsPlanUtilization']:.0%} used")


# ----------------------------------------------------------------------------------- command


def run_command(path: str, *, until: str | None = None, seed: int | None = None, output: str = "table",
                report_dir: str | None = None, stdout: IO[str], stderr: IO[str],
                progress: bool = False, autoscaler: str = "karpy", max_pods: int | None = None,
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
    render(result, output, stdout)
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
                              description=f"{_duration(int(done))} / {_duration(int(total))} virtual")

    def close(self) -> None:
        self._progress.stop()


def _progress_bar(file: IO[str]) -> _ProgressBar:
    return _ProgressBar(file)
