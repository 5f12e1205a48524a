"""What ``karpy design`` searches against: a workload over time, from a scenario or a cluster dump + trace.

* A **scenario** (a file with a ``kind: Scenario`` document, as ``karpy simulate`` reads it) is used as
  it is: its objects at time 0 and its steps.
* A **cluster dump** (``kubectl get ... -A -o yaml`` files, as ``karpy whatif`` reads them) becomes a
  workload through :func:`karpy.simulator.whatif_state.read`: NodePools, NodeClasses, PDBs, DaemonSets,
  the Deployments' active ReplicaSets and unmanaged Nodes are applied at time 0; karpy-managed nodes and
  pods are *not* (a design starts from no managed capacity and launches its own: the ReplicaSets
  re-create the pods, pending at time 0).
* A **trace** (``--trace``, see :func:`read_trace`) adds Deployment replica counts over time as scale
  steps. With a dump, a Deployment is its active ReplicaSet (``<deployment>-<pod-template-hash>``).

Trace formats (both give ``at``, ``namespace``, ``deployment``, ``replicas`` rows; ``at`` is a duration
such as ``90m`` or a number of seconds after the start)::

    at,namespace,deployment,replicas          # CSV, with this header
    0s,default,web,40
    6h,default,web,120

    apiVersion: karpy.io/v1alpha1             # YAML
    kind: Trace
    steps:
    - {at: 6h, namespace: default, deployment: web, replicas: 120}

A caller may rely on: bad input raises only :class:`karpy.api.errors.ValidationError` naming the
file, the row or field, what was expected and what was found.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy import settings as settings_mod
from karpy.api import duration, errors, manifest
from karpy.kube import interface
from karpy.simulator import scenario, scenario_steps, whatif_state

TRACE_KIND = "Trace"
TRACE_COLUMNS = ("at", "namespace", "deployment", "replicas")


@dataclass(frozen=True, slots=True)
class TraceRow:
    at: float
    namespace: str
    deployment: str
    replicas: int


def is_scenario_text(text: str, source: str) -> bool:
    docs = manifest.parse_yaml(text, source, string_keys=False)
    return any(isinstance(d, Mapping) and d.get("kind") == scenario.KIND for d in docs)


def load(inputs: Sequence[tuple[str, str]], *, trace: tuple[str, str] | None, until: float,
         cluster_name: str = "design") -> scenario.Scenario:
    """The workload of ``inputs`` (``(file name, text)``) with ``trace`` applied, running ``until`` seconds."""
    if not inputs:
        raise errors.ValidationError.single("INPUT", "(arguments)", "a scenario file or cluster dump files", None)
    kinds = [is_scenario_text(text, src) for src, text in inputs]
    if any(kinds):
        if len(inputs) != 1:
            raise errors.ValidationError.single(
                ", ".join(s for s, _ in inputs), "(arguments)",
                "one scenario file, or cluster dump files without a Scenario document", f"{len(inputs)} files")
        src, text = inputs[0]
        scn = scenario.load_text(text, source=src, until=until)
    else:
        scn = _from_dump(inputs, until=until, cluster_name=cluster_name)
    if trace is not None:
        rows = read_trace(*trace)
        scn = with_trace(scn, rows, source=trace[0])
    if not any(o.get("kind") == "NodePool" for o in scn.objects):
        raise errors.ValidationError.single(scn.source, "(objects)", "at least one NodePool at time 0 (the design "
                                            "replaces it; the others stay)", "none")
    return scn


def _from_dump(inputs: Sequence[tuple[str, str]], *, until: float, cluster_name: str) -> scenario.Scenario:
    state = whatif_state.read(inputs)
    managed = {m.node for m in state.managed}
    unmanaged = [n for n in state.nodes if interface.name_of(n) not in managed]
    cloud = scenario.Cloud(provider=state.provider, region=state.region, zones=())
    return scenario.Scenario(
        name="design", source=", ".join(src for src, _ in inputs), cloud=cloud,
        settings=settings_mod.Settings(cluster_name=cluster_name), cluster_name=cluster_name, until=until,
        seed=None, launch_latency=scenario.DEFAULT_LAUNCH_LATENCY, objects=tuple([*state.objects, *unmanaged]),
        steps=(), warnings=tuple(state.warnings))


# ------------------------------------------------------------------------------------------ trace


def read_trace(source: str, text: str) -> list[TraceRow]:
    """The rows of a CSV or YAML trace (see the module docstring), sorted by time."""
    stripped = text.lstrip()
    if stripped.startswith(TRACE_COLUMNS[0]) and "," in stripped.splitlines()[0]:
        rows = _csv_rows(source, text)
    else:
        rows = _yaml_rows(source, text)
    return sorted(rows, key=lambda r: r.at)


def _csv_rows(source: str, text: str) -> list[TraceRow]:
    reader = csv.reader(io.StringIO(text))
    header = [h.strip() for h in next(reader)]
    if tuple(header) != TRACE_COLUMNS:
        raise errors.ValidationError.single(source, "line 1", "the header " + ",".join(TRACE_COLUMNS), ",".join(header))
    rows: list[TraceRow] = []
    problems: list[errors.FieldError] = []
    for line, cells in enumerate(reader, start=2):
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(TRACE_COLUMNS):
            problems.append(errors.FieldError(source, f"line {line}", f"{len(TRACE_COLUMNS)} columns", len(cells)))
            continue
        raw = dict(zip(TRACE_COLUMNS, (c.strip() for c in cells), strict=True))
        row = _row(raw, source, f"line {line}", problems)
        if row is not None:
            rows.append(row)
    if problems:
        raise errors.ValidationError(problems)
    return rows


def _yaml_rows(source: str, text: str) -> list[TraceRow]:
    docs = [d for d in manifest.parse_yaml(text, source) if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], Mapping):
        raise errors.ValidationError.single(source, "(documents)", f"one {TRACE_KIND} document or a CSV with the "
                                            "header " + ",".join(TRACE_COLUMNS), len(docs))
    doc = docs[0]
    problems: list[errors.FieldError] = []
    obj = f"{source}: {TRACE_KIND}"
    if doc.get("apiVersion") != scenario.API_VERSION:
        problems.append(errors.FieldError(obj, "apiVersion", scenario.API_VERSION, doc.get("apiVersion")))
    if doc.get("kind") != TRACE_KIND:
        problems.append(errors.FieldError(obj, "kind", TRACE_KIND, doc.get("kind")))
    for key in doc:
        if key not in ("apiVersion", "kind", "metadata", "steps"):
            problems.append(errors.FieldError(obj, str(key), "one of apiVersion, kind, metadata, steps", key))
    steps = doc.get("steps")
    rows: list[TraceRow] = []
    if not isinstance(steps, list) or not steps:
        problems.append(errors.FieldError(obj, "steps", "a non-empty list of {at, namespace, deployment, replicas}",
                                          steps))
    else:
        for i, raw in enumerate(steps):
            if not isinstance(raw, Mapping):
                problems.append(errors.FieldError(obj, f"steps[{i}]", "a mapping", raw))
                continue
            extra = [k for k in raw if k not in TRACE_COLUMNS]
            if extra:
                problems.append(errors.FieldError(obj, f"steps[{i}].{extra[0]}", "one of " + ", ".join(TRACE_COLUMNS),
                                                  extra[0]))
                continue
            row = _row(raw, obj, f"steps[{i}]", problems)
            if row is not None:
                rows.append(row)
    if problems:
        raise errors.ValidationError(problems)
    return rows


def _row(raw: Mapping[str, Any], obj: str, where: str, problems: list[errors.FieldError]) -> TraceRow | None:
    before = len(problems)
    at: float | None = None
    try:
        at = duration.parse_duration(raw.get("at"))
    except duration.DurationError:
        at = None
    if at is None:
        problems.append(errors.FieldError(obj, f"{where}.at", "a duration such as 90m, or seconds", raw.get("at")))
    ns = raw.get("namespace") or "default"
    name = raw.get("deployment")
    if not isinstance(ns, str):
        problems.append(errors.FieldError(obj, f"{where}.namespace", "a namespace name", ns))
    if not isinstance(name, str) or not name:
        problems.append(errors.FieldError(obj, f"{where}.deployment", "a Deployment name", name))
    replicas = raw.get("replicas")
    if isinstance(replicas, str) and replicas.isdigit():
        replicas = int(replicas)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        problems.append(errors.FieldError(obj, f"{where}.replicas", "a non-negative integer", raw.get("replicas")))
    if len(problems) > before or at is None:
        return None
    assert isinstance(replicas, int)
    return TraceRow(at=at, namespace=str(ns), deployment=str(name), replicas=replicas)


def with_trace(scn: scenario.Scenario, rows: Sequence[TraceRow], *, source: str) -> scenario.Scenario:
    """``scn`` with one scale step per trace row (a Deployment, or with a dump its active ReplicaSet)."""
    deployments = {(interface.namespace_of(o) or "default", interface.name_of(o))
                   for o in scn.objects if o.get("kind") == "Deployment"}
    replicasets = _active_replicasets(scn.objects)
    steps = list(scn.steps)
    problems: list[errors.FieldError] = []
    first = max((s.index for s in steps), default=-1) + 1
    for i, row in enumerate(rows):
        key = (row.namespace, row.deployment)
        if key in deployments:
            action = scenario_steps.Scale("Deployment", row.namespace, row.deployment, row.replicas)
        elif key in replicasets:
            action = scenario_steps.Scale("ReplicaSet", row.namespace, replicasets[key], row.replicas)
        else:
            problems.append(errors.FieldError(source, f"row {i + 1} ({row.namespace}/{row.deployment})",
                                              "a Deployment of the input", row.deployment))
            continue
        steps.append(scenario_steps.Step(row.at, action, first + i))
    if problems:
        raise errors.ValidationError(problems)
    steps.sort(key=lambda s: (s.at, s.index))
    return dataclasses.replace(scn, steps=tuple(steps))


def _active_replicasets(objects: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(namespace, Deployment name) -> its ReplicaSet with the most replicas (``<name>-<pod-template-hash>``);
    a ReplicaSet without a hash (a StatefulSet's stand-in) under its own name."""
    best: dict[tuple[str, str], tuple[int, str]] = {}
    for o in objects:
        if o.get("kind") != "ReplicaSet":
            continue
        name = interface.name_of(o)
        ns = interface.namespace_of(o) or "default"
        h = interface.labels_of(o).get("pod-template-hash")
        owner = name[: -len(h) - 1] if h and name.endswith("-" + h) else name
        replicas = int((o.get("spec") or {}).get("replicas") or 0)
        if (ns, owner) not in best or replicas > best[(ns, owner)][0]:
            best[(ns, owner)] = (replicas, name)
    return {k: v[1] for k, v in best.items()}
