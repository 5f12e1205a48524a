"""``karpy simulate``'s default output: the run's story and its end state, as kubectl-style tables.

:func:`render_table` prints, in order:

* the scenario line;
* WHAT KARPY DID: the NodeClaims karpy launched during the run (when, NodePool, instance type, zone,
  capacity type, how many pods were nominated to each, why: provisioning or a disruption's
  replacement) and the ones it disrupted (when, the ``<Method>/<Decision>`` of the disruption, the
  NodeClaims that replaced them) - gone or not at the end (:mod:`karpy.simulator.history`);
* NODES and NODECLAIMS at the end (name, instance type, capacity type, zone, NodePool, ready, age);
* PODS NOT RUNNING (an unbound pod's REASON is karpy's own latest word on it - the per-NodePool
  explanation of its last ``FailedScheduling`` event, or its nomination - and the kube-scheduler's
  message only when karpy said nothing);
* EVENTS of karpenter (``kubectl get events --field-selector source=karpenter``) in time order;
* notes and the cost.

Past :data:`SUMMARISE_PAST` nodes (or past :data:`ROWS_PAST` rows in one table) a table is
summarised instead: nodes and NodeClaims grouped by NodePool, instance type, zone and capacity type
with counts; launches grouped the same way with first / last time and pods; disruptions grouped by
reason; pending pods grouped by reason (a nomination's ``node/NAME`` read as ``node/*``); events
grouped by reason with counts and first / last time.
``wide=True`` (``karpy simulate --wide``) prints every row however many. Columns are padded as
kubectl pads them; text is printed as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any

from karpy.api import labels
from karpy.simulator import engine, history, timefmt

KARPENTER = "karpenter"
SUMMARISE_PAST = 50
"""Nodes at the end past which every table is summarised (unless wide)."""
ROWS_PAST = 200
"""Rows past which one table is summarised even in a small cluster (unless wide)."""
FAILED_PREFIX = "Failed to schedule pod, "
_GAP = "   "
_TARGET = re.compile(r"\b(node|nodeclaim)/[^\s,;]+")
"""A nomination's target, left out when pending pods are grouped by reason."""


def _print_table(file: IO[str], title: str, header: Sequence[str], rows: Iterable[Sequence[str]],
                 width: int) -> None:
    """``title``, the header, a rule and the rows, each column as wide as its widest cell (a cell is
    cut to ``width`` characters)."""
    cells = [[str(c)[:width] for c in r] for r in rows]
    if not cells:
        file.write(f"{title}: none\n")
        return
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    file.write(title + "\n")
    line = _GAP.join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()
    file.write(line + "\n" + "─" * len(line) + "\n")
    for r in cells:
        file.write(_GAP.join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def _condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return c  # type: ignore[no-any-return]
    return None


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


def _by_count(groups: Mapping[Any, list[Any]]) -> list[tuple[Any, list[Any]]]:
    """Groups biggest first, then by key."""
    return sorted(groups.items(), key=lambda kv: (-kv[1][0], kv[0]))


def _grouped(rows: Iterable[tuple[tuple[str, ...], float | None, int]]) -> list[list[str]]:
    """Rows ``(key, time, pods)`` -> one row per key: key, count, first / last time, pods."""
    groups: dict[tuple[str, ...], list[Any]] = {}
    for key, t, pods in rows:
        g = groups.setdefault(key, [0, None, None, 0])
        g[0] += 1
        if t is not None:
            g[1] = t if g[1] is None else min(g[1], t)
            g[2] = t if g[2] is None else max(g[2], t)
        g[3] += pods
    return [[*k, str(g[0]), "" if g[1] is None else timefmt.offset(g[1]), "" if g[2] is None else
             timefmt.offset(g[2]), str(g[3])] for k, g in _by_count(groups)]


class _Report:
    def __init__(self, result: engine.Result, file: IO[str], width: int, wide: bool) -> None:
        self.result = result
        self.file = file
        self.width = width
        self.wide = wide
        self.big = len(result.objects.get("nodes", [])) > SUMMARISE_PAST

    def summarise(self, rows: int) -> bool:
        return not self.wide and (self.big or rows > ROWS_PAST)

    def table(self, title: str, header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
        _print_table(self.file, title, header, rows, self.width)

    def story(self) -> None:
        claims = history.story(self.result.nodeclaims, self.result.events)
        self.file.write("WHAT KARPY DID\n")
        launched = sorted(claims, key=lambda c: (c["created"], c["name"]))
        if self.summarise(len(launched)):
            self.table("NODECLAIMS LAUNCHED (grouped)",
                       ("NODEPOOL", "INSTANCE TYPE", "ZONE", "CAPACITY TYPE", "FOR", "COUNT", "FIRST", "LAST", "PODS"),
                       _grouped(((c["nodepool"], c["instanceType"], c["zone"], c["capacityType"], c["launchedFor"]),
                                 c["created"], c["pods"]) for c in launched))
        else:
            self.table("NODECLAIMS LAUNCHED",
                       ("TIME", "NODECLAIM", "NODEPOOL", "INSTANCE TYPE", "ZONE", "CAPACITY TYPE", "PODS", "FOR",
                        "GONE"),
                       ([timefmt.offset(c["created"]), c["name"], c["nodepool"], c["instanceType"], c["zone"],
                         c["capacityType"], str(c["pods"]), c["launchedFor"],
                         "" if c["deleted"] is None else timefmt.offset(c["deleted"])] for c in launched))
        disrupted = sorted((c for c in claims if c["disrupted"] is not None),
                           key=lambda c: (c["disrupted"]["t"], c["name"]))
        if self.summarise(len(disrupted)):
            self.table("NODES DISRUPTED (grouped)", ("REASON", "COUNT", "FIRST", "LAST", "REPLACEMENTS"),
                       ([*r[:4], str(len({n for c in disrupted if c["disrupted"]["reason"] == r[0]
                                          for n in c["replacedBy"]}))]
                        for r in _grouped(((c["disrupted"]["reason"],), c["disrupted"]["t"], 0) for c in disrupted)))
        else:
            self.table("NODES DISRUPTED", ("TIME", "NODECLAIM", "NODE", "INSTANCE TYPE", "REASON", "REPLACED BY"),
                       ([timefmt.offset(c["disrupted"]["t"]), c["name"], c["node"], c["instanceType"],
                         c["disrupted"]["reason"], ", ".join(c["replacedBy"]) or "-"] for c in disrupted))

    def machines(self, title: str, kind: str, objs: Sequence[Mapping[str, Any]]) -> None:
        end = self.result.end

        def labels_of(o: Mapping[str, Any]) -> Mapping[str, str]:
            return (o.get("metadata") or {}).get("labels") or {}

        def ready(o: Mapping[str, Any]) -> str:
            return str((_condition(o, "Ready") or {}).get("status", "Unknown"))

        if self.summarise(len(objs)):
            groups: dict[tuple[str, ...], list[int]] = {}
            for o in objs:
                lb = labels_of(o)
                key = (lb.get(labels.NODEPOOL, engine.UNMANAGED), lb.get(labels.INSTANCE_TYPE, ""),
                       lb.get(labels.ZONE, ""), lb.get(labels.CAPACITY_TYPE, ""))
                g = groups.setdefault(key, [0, 0])
                g[0] += 1
                g[1] += ready(o) == "True"
            self.table(f"{title} (grouped)", ("NODEPOOL", "INSTANCE TYPE", "ZONE", "CAPACITY TYPE", "COUNT", "READY"),
                       ([*k, str(g[0]), str(g[1])] for k, g in _by_count(groups)))
        elif kind == "Node":
            self.table(title, ("NAME", "INSTANCE TYPE", "CAPACITY TYPE", "ZONE", "NODEPOOL", "READY", "AGE"),
                       ([o["metadata"]["name"], labels_of(o).get(labels.INSTANCE_TYPE, ""),
                         labels_of(o).get(labels.CAPACITY_TYPE, ""), labels_of(o).get(labels.ZONE, ""),
                         labels_of(o).get(labels.NODEPOOL, engine.UNMANAGED), ready(o), timefmt.created_age(o, end)]
                        for o in objs))
        else:
            self.table(title, ("NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"),
                       ([o["metadata"]["name"], labels_of(o).get(labels.INSTANCE_TYPE, ""),
                         labels_of(o).get(labels.CAPACITY_TYPE, ""), labels_of(o).get(labels.ZONE, ""),
                         str((o.get("status") or {}).get("nodeName", "")), ready(o), timefmt.created_age(o, end)]
                        for o in objs))

    def pods(self) -> None:
        karpy_says = pending_explanations(self.result.events)
        rows: list[list[str]] = []
        for p in self.result.objects.get("pods", []):
            phase = (p.get("status") or {}).get("phase") or "Pending"
            if phase == "Running":
                continue
            sched = _condition(p, "PodScheduled") or {}
            why = str(sched.get("message") or sched.get("reason") or "") if sched.get("status") == "False" else ""
            if not (p.get("spec") or {}).get("nodeName"):
                why = karpy_says.get((p["metadata"].get("namespace", ""), p["metadata"]["name"]), why)
            rows.append([p["metadata"].get("namespace", ""), p["metadata"]["name"], phase,
                         str((p.get("spec") or {}).get("nodeName") or ""), why])
        if self.summarise(len(rows)):
            groups: dict[tuple[str, str], list[Any]] = {}
            for ns, name, phase, _node, why in rows:
                g = groups.setdefault((phase, _TARGET.sub(r"\1/*", why)), [0, f"{ns}/{name}"])
                g[0] += 1
            self.table("PODS NOT RUNNING (grouped)", ("PHASE", "COUNT", "FOR EXAMPLE", "REASON"),
                       ([k[0], str(g[0]), g[1], k[1]] for k, g in _by_count(groups)))
        else:
            self.table("PODS NOT RUNNING", ("NAMESPACE", "NAME", "PHASE", "NODE", "REASON"), rows)

    def events(self) -> None:
        evs = [e for e in self.result.events if e["source"] == KARPENTER]
        title = "EVENTS (source=karpenter)"
        if self.summarise(len(evs)):
            groups: dict[tuple[str, str], list[Any]] = {}
            for e in evs:
                g = groups.setdefault((e["reason"], e["type"]), [0, 0, e["t"], e["t"], ""])
                g[0] += 1
                g[1] += e["count"]
                g[2] = min(g[2], e["t"])
                if e["t"] >= g[3]:
                    g[3], g[4] = e["t"], e["message"]
            self.table(f"{title} (grouped)", ("REASON", "TYPE", "EVENTS", "COUNT", "FIRST", "LAST", "LAST MESSAGE"),
                       ([k[0], k[1], str(g[0]), str(g[1]), timefmt.offset(g[2]), timefmt.offset(g[3]), g[4]]
                        for k, g in sorted(groups.items(), key=lambda kv: (kv[1][2], kv[0]))))
            return
        rows = []
        for e in evs:
            obj = e["involvedObject"]
            count = f" (x{e['count']})" if e["count"] > 1 else ""
            ref = f"{str(obj.get('kind', '')).lower()}/{obj.get('name', '')}"
            rows.append([timefmt.offset(e["t"]), e["type"], e["reason"], ref, e["message"] + count])
        self.table(title, ("TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"), rows)

    def footer(self) -> None:
        result, write = self.result, self.file.write
        for n in result.notes:
            message = str(n["message"])
            if not message.startswith("step ") or "does not exist" in message or "cannot" in message:
                write(f"note {timefmt.offset(n['t'])}: {message}\n")
        sim = result.metrics.get("simulator", {})
        write(f"Cost: ${result.cost_per_hour:.4f}/h for karpy's nodes at the end; "
              f"${result.accrued_cost:.4f} spent during the run; "
              f"{sim.get('instancesLaunched', 0)} launched, "
              f"{sim.get('instancesTerminated', 0)} terminated\n")
        bill = sim.get("commitments")
        if bill:
            write(f"Commitments at the end: on-demand equivalent ${bill['onDemandEquivalent']:.4f}/h, "
                  f"paid ${bill['paid']:.4f}/h; Reserved Instances {bill['reservedInstanceUtilization']:.0%} "
                  f"used, Savings Plans {bill['savingsPlanUtilization']:.0%} used\n")


def render_table(result: engine.Result, file: IO[str], *, width: int | None = None, wide: bool = False) -> None:
    """The human-readable report; see the module docstring. ``width`` cuts cells longer than it
    (default 160 characters; ``wide`` prints them whole)."""
    report = _Report(result, file, width or (1 << 30 if wide else 160), wide)
    scn = result.scenario
    file.write(f"Scenario {scn.name} ({scn.cloud.provider}{', ' + scn.cloud.region if scn.cloud.region else ''}): "
               f"simulated {timefmt.duration(result.until)}, seed {result.seed}\n")
    report.story()
    report.machines("NODES", "Node", result.objects.get("nodes", []))
    report.machines("NODECLAIMS", "NodeClaim", result.objects.get("nodeclaims", []))
    report.pods()
    report.events()
    report.footer()
