"""The scheduling simulation: pending pods -> existing nodes, in-flight and new NodeClaims.

Given pending pods, existing nodes (with their pods) and in-flight NodeClaims, NodePools with
their instance types, DaemonSets and each NodePool's usage, :meth:`Scheduler.solve` returns a
:class:`results.Results`. It is pure and synchronous. The algorithm:

1. Pods are grouped (:mod:`podgroups`), larger first. Each group is decided at once.
2. Bins (:mod:`bins`) are existing nodes, then in-flight NodeClaims, then new NodeClaims in
   creation order; a group goes first-fit into them, vectorised over all bins with NumPy:
   compatible requirements, tolerated taints, free resources, host ports and topology.
3. When no bin can take more, a new NodeClaim is opened from the first NodePool (by weight) that
   is compatible, tolerated, within its limits and has an instance type that fits the pod with the
   DaemonSet overhead of the DaemonSets that would run there. The claim is sized after the
   instance type with the best price per unit of the run's total demand (the largest of the
   near-ties), so that many small pods pack densely; at the end each claim lists every instance
   type that holds what it got, cheapest first (respecting minValues and limits).
4. Topology: hostname terms cap pods per bin; a zonal (or other key) spread is water-filled over
   its domains and each domain's share placed separately; pod (anti-)affinity on a non-hostname
   key is decided pod by pod. New NodeClaims are narrowed to the chosen domain.
5. A group that does not fully fit relaxes one preference (:meth:`podgroups.PodGroup.relax`) and
   its remaining pods go again; when nothing is left to relax they get an explanation
   (:mod:`explain`).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy.api import labels as wk
from karpy.api import pod as pod_mod
from karpy.cloudprovider import instancetype
from karpy.provisioning import bins as bins_mod
from karpy.provisioning import (
    claims,
    daemons,
    dra,
    explain,
    grouping_paths,
    packer,
    podgroups,
    reservation_slots,
    results,
    reuse,
    templates,
)
from karpy.provisioning import placement as placement_mod
from karpy.scheduling import namespaces as ns_mod
from karpy.scheduling import requirement, topology
from karpy.scheduling import requirements as reqs_mod
from karpy.scheduling import taints as taints_mod

IntArray = npt.NDArray[np.int64]
BASE_DIMS = ("cpu", "memory", "pods")
EPHEMERAL_TAINTS = frozenset({wk.TAINT_NOT_READY, wk.TAINT_UNREACHABLE, wk.TAINT_UNREGISTERED,
                              "node.cloudprovider.kubernetes.io/uninitialized"})
MAX_INSTANCE_TYPES = 60


class Scheduler:
    """One scheduling run over a snapshot of the cluster. Create one per run."""

    def __init__(
        self,
        nodepools: Sequence[Any] = (),
        instance_types: Mapping[str, Sequence[instancetype.InstanceType]] | None = None,
        existing: Sequence[results.ExistingNode] = (),
        daemonsets: Sequence[pod_mod.Pod] = (),
        usage: Mapping[str, Mapping[str, int]] | None = None,
        *,
        cache: reuse.SchedulingCache | None = None,
        namespaces: ns_mod.NamespaceIndex | None = None,
        dra_explanation: str = dra.MESSAGE,
    ) -> None:
        """``daemonsets`` are the DaemonSets' template pods; ``usage`` is each NodePool's
        launched-plus-in-flight capacity, counted against its limits. ``cache``: what the caller
        keeps between runs (:mod:`reuse`); the results are the same with or without it.
        ``namespaces``: the cluster's Namespaces and their labels, which a pod affinity term's
        ``namespaceSelector`` selects from (none known: such a selector selects only its listed
        ``namespaces``). Pods with DRA requirements are refused with ``dra_explanation``
        (:mod:`karpy.provisioning.dra`)."""
        self.nodepools = list(nodepools)
        self.instance_types = dict(instance_types or {})
        self.existing = list(existing)
        self.daemon_pods = dra.split(daemonsets)[0]  # Karpenter leaves DRA daemons out of the overhead
        self.usage = dict(usage or {})
        self.cache = cache
        self.namespaces = namespaces if namespaces is not None else ns_mod.EMPTY
        self.dra_explanation = dra_explanation

    def solve(self, pods: Sequence[pod_mod.Pod]) -> results.Results:
        """The run (module docstring), with the cyclic garbage collector paused (:func:`_collector_paused`)."""
        with _collector_paused():
            return self._solve(pods)

    def _solve(self, pods: Sequence[pod_mod.Pod]) -> results.Results:
        cache = self.cache
        out = results.Results()
        pods, claiming = dra.split(pods)
        for p in claiming:  # Karpenter's DRAError: refused, never relaxed
            out.errors[p.key] = self.dra_explanation
            out.unschedulable.append(p)
        groups = podgroups.group_pods(pods, cache.pod_signatures if cache is not None else None, self.namespaces)
        if not groups:
            return out
        dims = _dims(groups, self.daemon_pods, self.existing)
        if any(templates.NODES in (p.limits or {}) for p in self.nodepools) and templates.NODES not in dims:
            dims.append(templates.NODES)
        if cache is not None:
            cache.runs += 1
        tmpls = templates.build_templates(self.nodepools, self.instance_types, self.usage, dims,
                                          cache.tables if cache is not None else None)
        run = placement_mod.Placement(dims, tmpls, groups, self.existing, self.daemon_pods,
                                      count_matching=bool(self.nodepools),
                                      table=cache.nodes if cache is not None else None,
                                      namespaces=self.namespaces)
        free = [g for g in groups if _is_free(run, g)]
        free_ids = {id(g) for g in free}
        queue = [g for g in groups if id(g) not in free_ids]
        self._drain(run, queue, out)
        while free:
            leftovers = self._pack_free(run, free, out)
            free = []
            for g in leftovers:
                if g.relax() is None:
                    self._fail(run, g, out)
                elif _is_free(run, g):
                    free.append(g)
                else:
                    self._drain(run, [g], out)
        for b in sorted(run.touched):
            node_pods = run.bins.pods[b][run.initial_pods[b]:]
            if node_pods:
                out.existing[run.bins.names[b]] = node_pods
        out.new_claims = [c for c in (claims.finalize(run, b) for b in run.new_bins) if c is not None]
        out.new_claims = reservation_slots.count_down(out.new_claims)  # one reserved slot per claim
        for c in out.new_claims:
            if not c.instance_types:  # pragma: no cover - finalize keeps the target type
                for p in c.pods:
                    out.errors[p.key] = f"no instance type of NodePool {c.nodepool} holds the pods"
        return out

    def _drain(self, run: placement_mod.Placement, queue: list[podgroups.PodGroup],
               out: results.Results) -> None:
        """Place constrained groups one by one, relaxing and retrying what does not fit.

        A group with required pod affinity that fits nowhere yet waits at the end of the queue
        while other groups are still being placed (Karpenter's queue retries a pod as long as a
        pass makes progress): the pods it must join may be placed after it."""
        waiting: list[podgroups.PodGroup] = []
        progress = False
        while queue or waiting:
            if not queue:
                if not progress:
                    for g in waiting:
                        self._fail(run, g, out)
                    return
                queue, waiting, progress = waiting, [], False
            g = queue.pop(0)
            if g.size == 0:
                continue
            if g.pod_affinity_required:
                _room_to_join(run, g)
            placed = grouping_paths.place(run, g)
            if placed:
                progress = True
            if placed >= g.size:
                _record_relaxed(out, g)
                continue
            unplaced = g.split(g.size - placed) if placed else g
            if placed:
                _record_relaxed(out, g)
            if unplaced.relax() is not None:
                queue.append(unplaced)
            elif unplaced.pod_affinity_required and (queue or progress):
                waiting.append(unplaced)
            else:
                self._fail(run, unplaced, out)

    def _fail(self, run: placement_mod.Placement, g: podgroups.PodGroup, out: results.Results) -> None:
        reason = explain.explain(g, run)
        for p in g.pods:
            out.errors[p.key] = reason
            out.unschedulable.append(p)
        g.pods = []

    def _pack_free(self, run: placement_mod.Placement, free: list[podgroups.PodGroup],
                   out: results.Results) -> list[podgroups.PodGroup]:
        """Existing capacity first, then the cost-aware packer per NodePool; returns leftovers.

        Pods the packer left (a NodePool's limits ran out) go round again, so they reach the next
        NodePool by weight before anything is relaxed for them.

        The new NodeClaims opened so far (for constrained pods) are first re-sized after the cheapest
        type that holds what they got: these pods then take only the room those types leave, and the
        packer decides the rest. (Filling them up to the large type they were sized after would
        launch a larger type, often one size past what the pods need, as Karpenter's first-fit does.)
        """
        for b in run.new_bins:
            claims.shrink(run, b)
        leftovers: list[podgroups.PodGroup] = []
        pending = free
        while pending:
            buckets: dict[tuple[int, reqs_mod.Requirements], list[podgroups.PodGroup]] = {}
            for g in pending:
                req = run.vector(g.requests)
                placed = grouping_paths.fill(run, g, req, 0, g.size, None, open_new=False)
                rest = self._keep_unplaced(g, placed, out)
                if rest is None:
                    continue
                target = claims.first_template(run, rest, req)
                if target is None:
                    # minValues NodePools (and nothing at all): open NodeClaims in weight order
                    placed = grouping_paths.fill(run, rest, req, 0, rest.size, None)
                    rest = self._keep_unplaced(rest, placed, out)
                    if rest is not None:
                        leftovers.append(rest)
                else:
                    buckets.setdefault(target, []).append(rest)
            pending = []
            for (ti, creqs), bucket in buckets.items():
                packer.pack(run, ti, creqs, bucket)
                progress = any(g.placed_count for g in bucket)
                for g in bucket:
                    rest = self._keep_unplaced(g, g.placed_count, out)
                    if rest is not None:
                        (pending if progress else leftovers).append(rest)
        return leftovers

    @staticmethod
    def _keep_unplaced(g: podgroups.PodGroup, placed: int, out: results.Results) -> podgroups.PodGroup | None:
        """Record the relaxations of the ``placed`` first pods of ``g``; the unplaced rest, or None."""
        if placed >= g.size:
            _record_relaxed(out, g)
            return None
        if not placed:
            return g
        rest = g.split(g.size - placed)
        _record_relaxed(out, g)
        return rest


def _room_to_join(run: placement_mod.Placement, g: podgroups.PodGroup) -> None:
    """Grow the new NodeClaims ``g`` must join (hostname affinity to pods placed there) so the
    group fits, when one of their NodePool's instance types can hold it all."""
    req = run.vector(g.requests)
    for term in g.pod_affinity_required:
        if not term.hostname:
            continue
        state = run.terms[term]
        state.grow(run.bins.n)
        for b in np.flatnonzero(state.bin_counts[:run.bins.n] > 0):
            bi = int(b)
            if run.bins.template[bi] >= 0 and run.bins.fit_counts(req)[bi] < g.size:
                claims.grow(run, bi, req * g.size)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No automatic cyclic collection during a run, the caller's setting restored after.

    A run allocates many short-lived containers and leaves no reference cycles
    (tests/unit/provisioning/test_no_reference_cycles.py): its objects die by reference count. With
    the collector on, those allocations trigger collections that walk the caller's whole heap
    (beside 100,000 running pods, about a fifth of a fresh run) and free nothing. Nothing the run
    decides depends on when cycles are freed; the switch is process-wide, as
    :func:`karpy.simulator.gcpolicy.tuned`'s (which a simulation already holds around its runs)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _record_relaxed(out: results.Results, g: podgroups.PodGroup) -> None:
    if g.relaxed:
        for p in g.pods:
            out.relaxed[p.key] = list(g.relaxed)


def _is_free(run: placement_mod.Placement, g: podgroups.PodGroup) -> bool:
    """No topology term, host port or inverse anti-affinity applies: the packer may take it.

    A group matching some pending pod's required (anti-)affinity is not free either: it is placed
    in size order with the constrained groups, so the (anti-)affine pods see where it went."""
    if g.terms() or g.host_ports or run.counted_spreads(g) or run.counts_for_hostname_spread(g):
        return False
    if any(t.kind in (topology.ANTI_AFFINITY, topology.AFFINITY) and t.required
           and t.matches(g.namespace, g.labels) for t in run.terms):
        return False
    return not any(t.kind == topology.ANTI_AFFINITY and s.owners is not None
                   and (s.owners or s.bin_owners.any()) and t.matches(g.namespace, g.labels)
                   for t, s in run.terms.items())


def _dims(groups: Sequence[podgroups.PodGroup], daemon_pods: Sequence[pod_mod.Pod],
          existing: Sequence[results.ExistingNode]) -> list[str]:
    names: set[str] = set()
    for g in groups:
        names.update(g.requests)
    for d in daemon_pods:
        names.update(d.requests)
    return list(BASE_DIMS) + sorted(names - set(BASE_DIMS))


def tolerated(tolerations: Sequence[Any], taints: Sequence[Any], *, prefer_ok: bool) -> Any:
    """The first taint not tolerated (PreferNoSchedule counts until relaxed), or None."""
    effects = ("NoSchedule", "NoExecute") if prefer_ok else ("NoSchedule", "NoExecute", "PreferNoSchedule")
    return taints_mod.first_untolerated(tolerations, taints, effects)


def daemon_fits(dpod: pod_mod.Pod, reqs: reqs_mod.Requirements, taints: Sequence[Any], *,
                node: bool) -> bool:
    """Would a DaemonSet's pod run on a node with these requirements (labels) and taints?
    (:func:`karpy.provisioning.daemons.daemon_fits`)"""
    return daemons.daemon_fits(dpod, reqs, taints, node=node)


def instance_type_requirements(t: instancetype.InstanceType) -> reqs_mod.Requirements:
    r = reqs_mod.Requirements.from_labels(t.labels)
    return r.add(requirement.Requirement.new(wk.ZONE, "In", sorted(t.zones)),
                 requirement.Requirement.new(wk.CAPACITY_TYPE, "In", sorted(t.capacity_types)),
                 *(requirement.Requirement.new(k, "In", sorted(v)) for k, v in sorted(t.offering_labels.items())))


__all__ = ["Scheduler", "bins_mod", "topology"]
