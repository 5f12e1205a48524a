"""Which nodes and domains a topology spread counts, for one scheduling run.

Kubernetes' ``nodeAffinityPolicy`` and ``nodeTaintsPolicy`` (a spread's
:class:`karpy.scheduling.topology.NodeFilter`) and Karpenter's ``StrictRequirements``:

- :func:`domains`: the domains of a spread's key that count for a group's pods: those its strict
  requirements admit (a preferred node affinity does not narrow them, Karpenter passes the
  pod's strict requirements to ``domainMinCount``; ``nodeAffinityPolicy: Ignore``: every domain),
  among the NodePools' domains (with ``nodeTaintsPolicy: Honor``, only NodePools whose taints the
  pod tolerates: Karpenter ``TopologyDomainGroup.ForEachDomain``) and the domains of the existing
  nodes the spread counts;
- :func:`counts_on`: whether the pods of a bin count for a spread with a node filter
  (Karpenter ``TopologyNodeFilter.Matches``).

Answers are memoised on the :class:`~karpy.provisioning.placement.Placement` for its run.
"""

from __future__ import annotations

from typing import Any

from karpy.api import labels as wk
from karpy.provisioning import podgroups, templates
from karpy.scheduling import taints as taints_mod
from karpy.scheduling import topology

Run = Any
"""The :class:`karpy.provisioning.placement.Placement` being filled (placement imports this module, so the
type is not imported here)."""

HARD = ("NoSchedule", "NoExecute")


def domains(run: Run, term: topology.Term, g: podgroups.PodGroup) -> list[str]:
    """The domains spread ``term`` of ``g`` counts (module docstring), sorted."""
    universe = None if term.node_filter is None else filtered_domains(run, term.key, term.node_filter)
    out: list[str] = run.eligible(term.key, g.strict_requirements(), term.honor_node_affinity, universe)
    return out


def filtered_domains(run: Run, key: str, node_filter: topology.NodeFilter) -> set[str]:
    """Domains of ``key`` a spread with ``node_filter`` knows: those of the NodePools (whose hard
    taints it tolerates, with ``nodeTaintsPolicy: Honor``) and of the existing nodes it counts."""
    hit: set[str] | None = run.filtered_memo.get((key, node_filter))
    if hit is None:
        hit = set()
        tolerations = node_filter.tolerations
        for tmpl in run.templates:
            if tolerations is None or taints_mod.first_untolerated(tolerations, list(tmpl.taints), HARD) is None:
                hit |= template_domains(tmpl, key)
        for b in range(run.n_existing):
            domain = run.bins.domain_of(b, key)
            if domain is not None and counts_on(run, node_filter, b):
                hit.add(domain)
        run.filtered_memo[(key, node_filter)] = hit
    return hit


def counts_on(run: Run, node_filter: topology.NodeFilter, b: int) -> bool:
    """Does a spread with ``node_filter`` count the pods of bin ``b``? (memoised by requirement
    and taint set)"""
    bins = run.bins
    key = (node_filter, int(bins.reqset[b]), int(bins.taintset[b]))
    hit: bool | None = run.filter_memo.get(key)
    if hit is None:
        reqs, is_node = bins.reqsets.values[key[1]]
        hit = node_filter.passes(reqs, bins.taintsets.values[key[2]], claim=not is_node)
        run.filter_memo[key] = hit
    return hit


def template_domains(tmpl: templates.Template, key: str) -> set[str]:
    """The values of ``key`` a new NodeClaim of ``tmpl`` may get (its types' offerings and labels,
    within its requirements)."""
    r = tmpl.requirements.get(key)
    if key == wk.ZONE:
        zones = {z for t in tmpl.table.types for z in t.zones}
        return {z for z in zones if r is None or r.has(z)}
    if key == wk.CAPACITY_TYPE:
        cts = {c for t in tmpl.table.types for c in t.capacity_types}
        return {c for c in cts if r is None or r.has(c)}
    values = {t.labels[key] for t in tmpl.table.types if key in t.labels}
    if values:
        return {v for v in values if r is None or r.has(v)}
    if r is not None and not r.complement:
        return set(r.values)
    return set()
