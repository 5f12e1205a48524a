"""Karpenter's scheduling policies (operator settings ``PREFERENCE_POLICY`` and ``MIN_VALUES_POLICY``).

* ``PREFERENCE_POLICY=Ignore`` (Karpenter ``options.PreferencePolicyIgnore``): the provisioner and
  consolidation's what-if runs schedule pods as if they had no preferred node affinity, no preferred
  pod affinity or anti-affinity and no ``whenUnsatisfiable: ScheduleAnyway`` topology spread
  (:func:`without_preferences`). The default, ``Respect``, tries the preferences first and relaxes them
  one by one.
* ``MIN_VALUES_POLICY=BestEffort`` (``options.MinValuesPolicyBestEffort``): when NodePools'
  ``minValues`` leave pods unschedulable, the provisioner plans the batch again with each minValues
  lowered to what the NodePool's instance types offer (:func:`lower_min_values`), then, if pods are
  still left, with minValues removed (:func:`relax_min_values`); it keeps a plan that leaves fewer pods
  pending, and annotates the NodeClaims whose instance types fall short of the minValues
  (:func:`violates_min_values`) ``karpenter.sh/nodeclaim-min-values-relaxed: "true"``
  (:data:`MIN_VALUES_RELAXED`). Karpenter lowers minValues per NodeClaim, to what the types left for
  its pods offer. ``Strict`` (the default) leaves such pods pending.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from karpy.api import nodepool as nodepool_mod
from karpy.api import pod as pod_mod
from karpy.cloudprovider import instancetype

RESPECT, IGNORE = "Respect", "Ignore"
STRICT, BEST_EFFORT = "Strict", "BestEffort"
MIN_VALUES_RELAXED = "karpenter.sh/nodeclaim-min-values-relaxed"
"""Karpenter's ``v1.NodeClaimMinValuesRelaxedAnnotationKey``."""


def without_preferences(p: pod_mod.Pod) -> pod_mod.Pod:
    """``p`` without its preferred affinities and ScheduleAnyway spreads (``p`` itself when it has none)."""
    changes: dict[str, object] = {}
    if p.node_affinity is not None and p.node_affinity.preferred:
        changes["node_affinity"] = dataclasses.replace(p.node_affinity, preferred=())
    if p.pod_affinity is not None and p.pod_affinity.preferred:
        changes["pod_affinity"] = dataclasses.replace(p.pod_affinity, preferred=())
    if p.pod_anti_affinity is not None and p.pod_anti_affinity.preferred:
        changes["pod_anti_affinity"] = dataclasses.replace(p.pod_anti_affinity, preferred=())
    spreads = tuple(t for t in p.topology_spread_constraints if t.when_unsatisfiable != "ScheduleAnyway")
    if len(spreads) != len(p.topology_spread_constraints):
        changes["topology_spread_constraints"] = spreads
    return p.evolve(**changes) if changes else p


def has_min_values(pool: nodepool_mod.NodePool) -> bool:
    return any(r.min_values is not None for r in pool.template.spec.requirements)


def violates_min_values(pool: nodepool_mod.NodePool, types: Sequence[instancetype.InstanceType]) -> bool:
    """Whether ``types`` (a NodeClaim's options) offer fewer distinct values of a requirement's key than
    ``pool``'s minValues for it (the NodeClaim was made with minValues relaxed)."""
    for r in pool.template.spec.requirements:
        if r.min_values is not None and len({t.labels.get(r.key) for t in types} - {None}) < r.min_values:
            return True
    return False


def _allows(operator: str, values: Sequence[str], value: str) -> bool:
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator in ("Gt", "Lt"):
        try:
            number, bound = int(value), int(values[0])
        except (ValueError, IndexError):
            return False
        return number > bound if operator == "Gt" else number < bound
    return operator == "Exists"


def lower_min_values(pool: nodepool_mod.NodePool, types: Sequence[instancetype.InstanceType]
                     ) -> nodepool_mod.NodePool:
    """``pool`` with each minValues lowered to the distinct values of its key that ``types`` (the pool's
    instance types) offer within the requirement (at least 1): the most flexibility still available."""
    if not has_min_values(pool):
        return pool
    reqs = []
    for r in pool.template.spec.requirements:
        if r.min_values is not None:
            offered = {v for t in types if (v := t.labels.get(r.key)) is not None and _allows(r.operator, r.values, v)}
            r = dataclasses.replace(r, min_values=max(1, min(r.min_values, len(offered))))
        reqs.append(r)
    spec = pool.template.spec
    return dataclasses.replace(pool, template=dataclasses.replace(
        pool.template, spec=dataclasses.replace(spec, requirements=tuple(reqs))))


def relax_min_values(pool: nodepool_mod.NodePool) -> nodepool_mod.NodePool:
    """``pool`` with no minValues on its requirements (``pool`` itself when it has none)."""
    if not has_min_values(pool):
        return pool
    spec = pool.template.spec
    reqs = tuple(dataclasses.replace(r, min_values=None) for r in spec.requirements)
    return dataclasses.replace(pool, template=dataclasses.replace(
        pool.template, spec=dataclasses.replace(spec, requirements=reqs)))
