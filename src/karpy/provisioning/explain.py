"""Why a pod fits nowhere, in words a user acts on.

For each NodePool, the first reason a pod group cannot use it, checked in the order a user would
fix things: a taint it does not tolerate; a requirement that conflicts (key, the pod's values,
the NodePool's values); a host port a DaemonSet holds on each of its nodes; no instance type
matching the combined requirements; no instance type
large enough for the pod plus the DaemonSet overhead (naming the overhead and the type that comes
closest); the NodePool's limits. When every NodePool could take the pod in isolation, the
topology or host-port constraints are to blame and the message says which.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from karpy.api import labels as wk
from karpy.api import quantity
from karpy.provisioning import claims, podgroups, templates
from karpy.provisioning import placement as placement_mod
from karpy.scheduling import hostports
from karpy.scheduling import requirements as reqs_mod
from karpy.scheduling import taints as taints_mod

MAX_VALUES = 5


def _fmt(dims: list[str], vec: npt.NDArray[np.int64]) -> str:
    parts = [f"{d} {quantity.format_quantity(d, int(v))}" for d, v in zip(dims, vec, strict=True) if v]
    return ", ".join(parts) if parts else "nothing"


def explain(g: podgroups.PodGroup, run: placement_mod.Placement) -> str:
    """One sentence per NodePool, ``; ``-joined, plus topology and existing-node notes."""
    if not run.templates:
        return "no NodePool exists and no existing node can take the pod"
    greq = g.strict_requirements()
    req = run.vector(g.requests)
    reasons: list[str] = []
    all_could = True
    for ti, tmpl in enumerate(run.templates):
        why = _nodepool_reason(run, g, greq, req, ti)
        if why is not None:
            all_could = False
            reasons.append(f'NodePool "{tmpl.name}": {why}')
    if all_could:
        constraint = "; ".join(t.describe() for t in g.terms()) or (
            f"host ports {', '.join(f'{p[2]}/{p[1]}' for p in g.host_ports)}" if g.host_ports else "")
        if constraint:
            return f"every NodePool could hold the pod, but its constraints cannot be met: {constraint}"
        if any(t.nodepool.limits for t in run.templates if t.nodepool is not None):
            return "every NodePool could hold the pod, but its limits were used up by other pods in this batch"
        return "every NodePool could hold the pod alone, but not together with the other pods of this batch"
    return "; ".join(reasons)


def _min_values_unmet(table: templates.TypeTable, creqs: reqs_mod.Requirements,
                      fits: npt.NDArray[np.bool_]) -> str | None:
    """Karpenter's ``SatisfiesMinValues`` error when the instance types that hold the pod offer
    fewer values of a key than its ``minValues`` (MIN_VALUES_POLICY Strict)."""
    holding = [table.types[int(i)].labels for i in np.flatnonzero(fits)]
    unmet = creqs.min_values_violations(holding)
    if not unmet:
        return None
    counts = "; ".join(f"{key} needs {creqs[key].min_values} values, the instance types that hold the pod offer "
                       f"{len({lb[key] for lb in holding if key in lb and creqs[key].has(lb[key])})}"
                       for key in unmet)
    return f"minValues requirement is not met for label(s) {', '.join(unmet)}: {counts}"


def _type_conflicts(table: templates.TypeTable, creqs: reqs_mod.Requirements) -> str:
    """``: key K needs ..., the instance types offer [...]`` for each key no type meets alone."""
    parts: list[str] = []
    for key in sorted(creqs):
        r = creqs[key]
        if key == wk.ZONE:
            offered = {o.zone for t in table.types for o in t.offerings if o.available}
        elif key == wk.CAPACITY_TYPE:
            offered = {o.capacity_type for t in table.types for o in t.offerings if o.available}
        elif key in table.label_keys:
            offered = {t.labels[key] for t in table.types if key in t.labels}
            if r.admits_absence() and any(key not in t.labels for t in table.types):
                continue
        else:
            continue
        if not any(r.has(v) for v in offered):
            parts.append(f"key {key}: needs {r.describe(MAX_VALUES)}, the instance types offer "
                         f"{_values(offered)}")
    return ": " + "; ".join(parts) if parts else ""


def _values(values: set[str]) -> str:
    ordered = sorted(values)
    if len(ordered) > MAX_VALUES:
        ordered = [*ordered[:MAX_VALUES], f"and {len(ordered) - MAX_VALUES} others"]
    return "[" + " ".join(ordered) + "]"


def _nodepool_reason(run: placement_mod.Placement, g: podgroups.PodGroup, greq: object,
                     req: npt.NDArray[np.int64], ti: int) -> str | None:
    tmpl = run.templates[ti]
    taint = taints_mod.first_untolerated(g.tolerations, tmpl.taints, ("NoSchedule", "NoExecute"))
    if taint is not None:
        return f"the pod does not tolerate its taint {taints_mod.describe(taint)}"
    why = tmpl.requirements.compatible(greq)  # type: ignore[arg-type]
    if why is not None:
        return f"incompatible requirements: {why}"
    creqs = tmpl.requirements.intersect(greq)  # type: ignore[arg-type]
    held = claims.daemon_port_conflict(run, ti, creqs, g)
    if held is not None:
        owners = run.daemon_ports(ti, creqs)
        who = next((k for k in sorted(owners.pods()) if any(
            hostports.collides(held, p) for p in owners.ports_of(k))), "a DaemonSet") if owners else "a DaemonSet"
        return (f"host port {held.port}/{held.protocol} is held on each of its nodes by {who}")
    table = tmpl.table
    info = table.info(creqs)
    if not info.mask.any():
        if len(table) == 0:
            return "it has no instance types (check its NodeClass and requirements)"
        return ("no instance type matches the pod's and the NodePool's requirements together"
                f"{_type_conflicts(table, creqs)} ({len(table)} types considered)")
    ds = run.daemon_overhead(ti, creqs)
    avail = table.alloc - ds
    fits = info.mask & (avail >= req).all(axis=1)
    if not fits.any():
        idx = np.flatnonzero(info.mask)
        nz = req > 0
        ratio = (avail[idx][:, nz] / req[nz]).min(axis=1)
        best = int(idx[int(np.argmax(ratio))])
        short = [d for j, d in enumerate(run.dims) if req[j] > avail[best, j]]
        overhead = f" plus DaemonSet overhead ({_fmt(run.dims, ds[best])})" if ds[best].any() else ""
        return (f"no instance type can hold the pod's requests ({_fmt(run.dims, req)}){overhead}; "
                f"the closest is {table.types[best].name} with {_fmt(run.dims, avail[best])} free "
                f"for pods, short of {', '.join(short)}")
    if tmpl.has_min_values:
        unmet = _min_values_unmet(table, creqs, fits)
        if unmet:
            return unmet
    limit = tmpl.remaining_limit_vector(run.dims)
    within = fits & (table.capacity <= limit).all(axis=1)
    if not within.any():
        idx = np.flatnonzero(fits)
        smallest = int(idx[np.argmin(table.capacity[idx].sum(axis=1))])
        over = [d for j, d in enumerate(run.dims) if table.capacity[smallest, j] > limit[j]]
        limits = ", ".join(f"{d} {quantity.format_quantity(d, int(tmpl.nodepool.limits.get(d, 0)))}"
                           for d in over)
        left = ", ".join(f"{quantity.format_quantity(d, max(0, int(limit[run.dims.index(d)])))} {d}" for d in over)
        return (f"its limits ({limits}) would be exceeded: the smallest instance type that fits, "
                f"{table.types[smallest].name}, needs more than the {left} left")
    return None
