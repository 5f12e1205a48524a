"""Opening new NodeClaims for a pod group, and turning them into results at the end.

:func:`open_claim` tries NodePools in weight order. A NodePool qualifies when the group tolerates
its taints, its requirements are compatible with the group's, and some instance type that is
compatible with the combined requirements, offered in an allowed domain and within the remaining
limits holds one pod plus the DaemonSet overhead of the DaemonSets that would run there, and none
of those DaemonSets holds a host port the group needs (a new claim starts with their ports).

The claim is then sized after one *target* instance type: the one with the lowest price per unit
of the run's total demand (how many "average pods" it holds per dollar), taking the largest of
near-ties so that pods pack into few, dense nodes. With minValues, the target is the largest type
whose set of equal-or-larger types still offers minValues distinct values, so any packing that fits
the target keeps enough options. :func:`finalize` lists every type holding what the claim got.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy.api import labels as wk
from karpy.cloudprovider import instancetype
from karpy.provisioning import daemons, podgroups, results, templates
from karpy.provisioning import placement as placement_mod
from karpy.scheduling import hostports, requirement
from karpy.scheduling import requirements as reqs_mod

IntArray = npt.NDArray[np.int64]
NEAR_TIE = 1.01
MAX_INSTANCE_TYPES = 60


def usable_templates(run: placement_mod.Placement, g: podgroups.PodGroup
                     ) -> Iterator[tuple[int, templates.Template, reqs_mod.Requirements]]:
    """NodePools in weight order whose taints ``g`` tolerates and whose requirements are compatible
    with the group's, each with the combined requirements of a NodeClaim for the group."""
    greq = g.requirements()
    key = (greq, g.tolerations, g.tolerate_prefer_no_schedule)
    usable = run.usable_memo.get(key)
    if usable is None:  # the templates' taints and requirements do not change during a run
        usable = []
        for ti, tmpl in enumerate(run.templates):
            if daemons.untolerated(g.tolerations, tmpl.taints,
                                          prefer_ok=g.tolerate_prefer_no_schedule) is not None:
                continue
            if tmpl.requirements.compatible(greq) is not None:
                continue
            usable.append((ti, tmpl, tmpl.requirements.intersect(greq)))
        run.usable_memo[key] = usable
    yield from usable


def open_claim(run: placement_mod.Placement, g: podgroups.PodGroup, req: IntArray,
               constraints: dict[str, set[str]]) -> int | None:
    """Open a new NodeClaim that can take at least one pod of ``g``; its bin index, or None."""
    for ti, tmpl, base in usable_templates(run, g):
        for creqs in _domain_choices(run, g, base, constraints):
            if daemon_port_conflict(run, ti, creqs, g) is not None:
                continue
            b = _open(run, ti, tmpl, creqs, req)
            if b is not None:
                return b
    return None


def first_template(run: placement_mod.Placement, g: podgroups.PodGroup,
                   req: IntArray) -> tuple[int, reqs_mod.Requirements] | None:
    """The first NodePool (by weight) that could open a NodeClaim for ``g``, with the claim's
    requirements; None when none can."""
    for ti, tmpl, creqs in usable_templates(run, g):
        table = tmpl.table
        if len(table) == 0:
            continue
        if tmpl.has_min_values:
            return None  # the packer does not keep minValues: open_claim() takes it, in weight order
        # memoised per run as _choose is (same memo, its own key): the answer depends only on these
        key = ("first", ti, creqs, req.tobytes(), tuple(sorted(tmpl.limits.items())))
        fits = run.choose_memo.get(key)
        if fits is None:
            info = table.info(creqs)
            avail = run.daemons.available(ti, creqs)
            limit = tmpl.remaining_limit_vector(run.dims)
            fits = run.choose_memo[key] = int((info.mask & (avail >= req).all(axis=1)
                                               & (table.capacity <= limit).all(axis=1)).any())
        if fits:
            return ti, creqs
    return None


def _domain_choices(run: placement_mod.Placement, g: podgroups.PodGroup, base: reqs_mod.Requirements,
                    constraints: dict[str, set[str]]) -> list[reqs_mod.Requirements]:
    """Requirement sets to try, narrowed to each allowed domain (least-loaded first)."""
    out = [base]
    for key, allowed in sorted(constraints.items()):
        narrowed: list[reqs_mod.Requirements] = []
        for reqs in out:
            r = reqs.get(key)
            values = [v for v in allowed if r is None or r.has(v)]
            if len(values) > 1:
                values.sort(key=lambda v: (run.terms_count(g, key, v), v))
            narrowed.extend(run.narrowed(reqs, key, v) for v in values)
        out = narrowed
    return out


def can_open(run: placement_mod.Placement, g: podgroups.PodGroup, req: IntArray,
             constraints: dict[str, set[str]]) -> bool:
    """Could NodeClaims for ``g`` within ``constraints`` be opened again and again, from a NodePool
    without limits? (Then a share of pods for that domain is sure to be placed.)"""
    for ti, tmpl, base in usable_templates(run, g):
        if tmpl.limits:
            continue
        for creqs in _domain_choices(run, g, base, constraints):
            if daemon_port_conflict(run, ti, creqs, g) is None and _choose(run, ti, tmpl, creqs, req) is not None:
                return True
    return False


def daemon_port_conflict(run: placement_mod.Placement, ti: int, creqs: reqs_mod.Requirements,
                         g: podgroups.PodGroup) -> hostports.HostPort | None:
    """The host port of ``g`` that a DaemonSet running on every such new NodeClaim holds, or None."""
    if not g.host_ports:
        return None
    usage = run.daemon_ports(ti, creqs)
    if usage is None:
        return None
    return usage.conflicts([hostports.host_port(*hp) for hp in g.host_ports])


def _open(run: placement_mod.Placement, ti: int, tmpl: templates.Template, creqs: reqs_mod.Requirements,
          req: IntArray) -> int | None:
    target = _choose(run, ti, tmpl, creqs, req)
    if target is None:
        return None
    return create_bin(run, ti, creqs, target)


def _choose(run: placement_mod.Placement, ti: int, tmpl: templates.Template, creqs: reqs_mod.Requirements,
            req: IntArray) -> int | None:
    """The instance type a new NodeClaim with ``creqs`` would be sized after, or None.

    Memoised per run: the answer depends only on the arguments, the run's demand (fixed) and the
    NodePool's remaining limits (part of the key)."""
    key = (ti, creqs, req.tobytes(), tuple(sorted(tmpl.limits.items())))
    memo = run.choose_memo
    if key in memo:
        return memo[key]
    found = _choose_now(run, ti, tmpl, creqs, req)
    memo[key] = found
    return found


def _choose_now(run: placement_mod.Placement, ti: int, tmpl: templates.Template, creqs: reqs_mod.Requirements,
                req: IntArray) -> int | None:
    table = tmpl.table
    if len(table) == 0:
        return None
    info = table.info(creqs)
    avail = run.daemons.available(ti, creqs)
    feasible = info.mask & (avail >= req).all(axis=1)
    if tmpl.limits:  # without limits every type is within them
        feasible &= (table.capacity <= tmpl.remaining_limit_vector(run.dims)).all(axis=1)
    if not feasible.any():
        return None
    return _target(run, ti, tmpl, info, avail, feasible, creqs)


def create_bin(run: placement_mod.Placement, ti: int, creqs: reqs_mod.Requirements, target: int) -> int:
    """Add a new NodeClaim bin of template ``ti`` sized after instance type ``target``."""
    tmpl = run.templates[ti]
    table = tmpl.table
    info = table.info(creqs)
    ds = run.daemon_overhead(ti, creqs)
    for j, d in enumerate(run.dims):
        if d in tmpl.limits:
            tmpl.limits[d] -= int(table.capacity[target, j])
    domains: dict[str, str | frozenset[str] | None] = {}
    for key in run.keys:
        domains[key] = _claim_domain(creqs, key, table, target, info)
    name = f"{tmpl.name}-new-{len(run.new_bins)}"
    b = run.bins.add(name, table.alloc[target] - ds[target], ds[target].copy(), creqs, tmpl.taints, is_node=False,
                     template=ti, target=target, domains=domains)
    ds_ports = run.daemon_ports(ti, creqs)
    if ds_ports is not None:
        run.bins.ports[b] = ds_ports.copy()
    run.new_bins.append(b)
    run.initial_pods.append(0)
    return b


def grow(run: placement_mod.Placement, b: int, extra: IntArray) -> bool:
    """Re-size new NodeClaim bin ``b`` after the cheapest instance type of its NodePool that also
    holds ``extra`` more (within limits and its requirements); False when none does or ``b`` is
    not a new NodeClaim. (Karpenter keeps every instance type option on an open NodeClaim, so
    pods that must join it may make it larger.)"""
    if not (extra > 0).any():
        return False
    return _resize(run, b, extra)


def shrink(run: placement_mod.Placement, b: int) -> bool:
    """Re-size new NodeClaim bin ``b`` after the cheapest instance type of its NodePool that holds
    what it got so far; True when that type is cheaper than the one it was sized after (its free room
    is then what that type leaves, so later pods fill it without making it larger)."""
    ti = run.bins.template[b]
    if ti < 0 or not run.bins.pods[b]:
        return False
    info = run.templates[ti].table.info(run.bins.requirements(b))
    old = run.bins.target[b]
    if not _resize(run, b, np.zeros_like(run.bins.used[b])):
        return False
    return bool(info.price[run.bins.target[b]] < info.price[old])


def _resize(run: placement_mod.Placement, b: int, extra: IntArray) -> bool:
    """Re-size new NodeClaim bin ``b`` after the cheapest type that holds its pods plus ``extra``."""
    ti = run.bins.template[b]
    if ti < 0:
        return False
    tmpl = run.templates[ti]
    table = tmpl.table
    creqs = run.bins.requirements(b)
    info = table.info(creqs)
    old = run.bins.target[b]
    ds = run.daemon_overhead(ti, creqs)
    need = run.bins.used[b] - ds[old] + extra  # the pods' part: each type brings its own overhead
    limit = tmpl.remaining_limit_vector(run.dims) + table.capacity[old]
    ok = info.mask & (run.daemons.available(ti, creqs) >= need).all(axis=1) & (table.capacity <= limit).all(axis=1)
    if not ok.any():
        return False
    idx = np.flatnonzero(ok)
    new = int(idx[np.lexsort((idx, info.price[idx]))][0])
    for j, d in enumerate(run.dims):
        if d in tmpl.limits:
            tmpl.limits[d] += int(table.capacity[old, j]) - int(table.capacity[new, j])
    run.bins.used[b] += ds[new] - ds[old]
    run.bins.remaining[b] = table.alloc[new] - run.bins.used[b]
    run.bins.target[b] = new
    for key in run.keys:
        if run.bins.domain_of(b, key) is None:
            run.bins.set_domain(b, key, _claim_domain(creqs, key, table, new, info))
    return True


def _claim_domain(creqs: reqs_mod.Requirements, key: str, table: templates.TypeTable, target: int,
                  info: templates.TypeInfo) -> str | frozenset[str] | None:
    r = creqs.get(key)
    if key == wk.ZONE:
        return frozenset(info.zones[target])
    if key == wk.CAPACITY_TYPE:
        return frozenset(info.capacity_types[target])
    value = table.types[target].labels.get(key)
    if value is not None:
        return value
    if r is not None and not r.complement and r.values:
        return frozenset(r.values)
    return None


def _target(run: placement_mod.Placement, ti: int, tmpl: templates.Template, info: templates.TypeInfo,
            avail: IntArray, feasible: Any, creqs: reqs_mod.Requirements) -> int | None:
    idx = np.flatnonzero(feasible)
    key = ("units", ti, creqs)  # per type: the run's average pods it holds, and its price per one
    hit = run.finalize_memo.get(key)
    if hit is None:
        demand = run.demand
        nz = demand > 0
        every = (avail[:, nz] / demand[nz]).min(axis=1)
        hit = run.finalize_memo[key] = (every, info.price / np.maximum(every, 1e-12))
    units, score = hit[0][idx], hit[1][idx]
    if tmpl.has_min_values:
        for j in np.lexsort((-units, score)):
            t = int(idx[j])
            if _min_values_ok(tmpl, creqs, avail, info, avail[t]):
                return t
        return None
    # the lowest score (NaN last, as a sort would put it): only its value is needed, not an order
    best = np.fmin.reduce(score)
    near = np.flatnonzero(score <= best * NEAR_TIE)
    return int(idx[near[np.argmax(units[near])]])


def _min_values_ok(tmpl: templates.Template, creqs: reqs_mod.Requirements, avail: IntArray,
                   info: templates.TypeInfo, used: IntArray) -> bool:
    holds = info.mask & (avail >= used).all(axis=1)  # used excludes the DaemonSet overhead here
    types = [tmpl.table.types[i].labels for i in np.flatnonzero(holds)]
    return not creqs.min_values_violations(types)


def finalize(run: placement_mod.Placement, b: int) -> results.NewNodeClaim | None:
    """The NodeClaim for new bin ``b``: its pods, requirements and instance type options."""
    pods = run.bins.pods[b]
    if not pods:
        return None
    ti = run.bins.template[b]
    tmpl = run.templates[ti]
    creqs = run.bins.requirements(b)
    used = run.bins.used[b]
    target = run.bins.target[b]
    # claims with the same pool, requirements, requests and target get the same options (the
    # limits are the run's final ones for every claim): decide once per such claim
    key = (ti, creqs, used.tobytes(), int(target), tuple(sorted(tmpl.limits.items())))
    hit = run.finalize_memo.get(key)
    if hit is None:
        hit = _options(run, ti, tmpl, creqs, used, int(target))
        run.finalize_memo[key] = hit
    types, out_reqs, requests, overhead, price = hit
    return results.NewNodeClaim(
        nodepool=tmpl.name, requirements=out_reqs, instance_types=list(types), pods=list(pods),
        requests=dict(requests), daemon_overhead=dict(overhead), labels=dict(tmpl.labels), taints=tmpl.taints,
        startup_taints=tmpl.startup_taints, price=price, hostname=run.bins.names[b])


def _options(run: placement_mod.Placement, ti: int, tmpl: templates.Template, creqs: reqs_mod.Requirements,
             used: IntArray, target: int) -> tuple[list[instancetype.InstanceType], reqs_mod.Requirements,
                                                   dict[str, int], dict[str, int], float]:
    table = tmpl.table
    info = table.info(creqs)
    ds = run.daemon_overhead(ti, creqs)
    limit = tmpl.remaining_limit_vector(run.dims) + table.capacity[target]
    pods_used = used - ds[target]  # the bin's used counts the overhead of its target type
    holds = info.mask & (run.daemons.available(ti, creqs) >= pods_used).all(axis=1) & (
        table.capacity <= limit).all(axis=1)
    idx = np.flatnonzero(holds)
    if len(idx) == 0:
        idx = np.array([target])
    if not tmpl.has_min_values and len(idx) > MAX_INSTANCE_TYPES:  # only the cheapest are kept: those
        by_price = info.price[idx]                                  # up to the cut's price, ties included
        idx = idx[by_price <= np.partition(by_price, MAX_INSTANCE_TYPES - 1)[MAX_INSTANCE_TYPES - 1]]
    idx = idx[np.argsort(info.price[idx], kind="stable")]  # by price, then index (idx ascends)
    if tmpl.has_min_values:
        options = [int(i) for i in idx]
    else:
        options = [int(i) for i in idx[:MAX_INSTANCE_TYPES]]
    types = [table.types[i] for i in options]
    names = [t.name for t in types]
    out_reqs = creqs.add(requirement.Requirement.new(wk.INSTANCE_TYPE, "In", names))
    requests = {d: v for d, v in zip(run.dims, used.tolist(), strict=True) if v}
    overhead = {d: v for d, v in zip(run.dims, ds[target].tolist(), strict=True) if v}
    return types, out_reqs, requests, overhead, float(info.price[options[0]])

