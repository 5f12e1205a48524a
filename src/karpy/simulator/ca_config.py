"""Cluster Autoscaler's configuration for ``karpy simulate --autoscaler cluster-autoscaler``.

Cluster Autoscaler (CA) scales *node groups* (EKS managed node groups, ASGs, AKS node pools): each
group has one instance type, a set of zones, a capacity type, labels and taints, and a min and max
size. :func:`read` builds the groups and CA's settings from a scenario:

* ``spec.clusterAutoscaler.nodeGroups`` when given: ``[{name, instanceType, zones, capacityType,
  minSize, maxSize, labels, taints}]``;
* otherwise derived: one group per node group of the scenario's pre-existing Nodes (their
  ``eks.amazonaws.com/nodegroup`` / ``kubernetes.azure.com/agentpool`` label, the instance type they
  run, ``minSize`` = the nodes there, ``maxSize`` = 3 times that, at least 10), plus one group per
  instance type each NodePool allows, when the NodePool lists its types with
  ``node.kubernetes.io/instance-type In`` (otherwise its 5 cheapest compatible types), with the
  NodePool's labels and taints, min 0 and max from the NodePool's cpu limit (else 100);
* the rest of ``spec.clusterAutoscaler``: ``expander`` (``least-waste`` default, ``price``,
  ``random``, ``priority`` with ``priorities: {10: [regex...]}``), ``scanInterval`` (10s),
  ``scaleDownUnneededTime`` (10m), ``scaleDownDelayAfterAdd`` (10m), ``scaleDownUtilizationThreshold``
  (0.5), ``maxNodeProvisionTime`` (15m) and ``provisioningDelay``: how long the node group's own API
  takes between CA raising its desired size and the instance starting to boot (an ASG activity;
  15s by default, so that the EKS field report's comparison, 1m16s for Karpenter and 1m31s for CA
  from FailedScheduling to the pod's container start, is reproduced with the same boot time).

A caller may rely on: bad values raise :class:`karpy.api.errors.ValidationError` naming
``spec.clusterAutoscaler`` and the field; group names are unique and sorted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import duration, errors, fields, labels, node, nodepool
from karpy.cloudprovider import instancetype
from karpy.provisioning import templates
from karpy.scheduling import requirements

EXPANDERS = ("least-waste", "price", "random", "priority")
NODEGROUP_LABELS = ("eks.amazonaws.com/nodegroup", "kubernetes.azure.com/agentpool", "karpy.io/node-group")
GROUP_LABEL = "karpy.io/node-group"
"""Every node a simulated node group launches carries its group name under this label."""
OBJECT = "spec.clusterAutoscaler"


@dataclass(frozen=True, slots=True)
class NodeGroup:
    name: str
    instance_type: str
    zones: tuple[str, ...]
    capacity_type: str = labels.CAPACITY_TYPE_ON_DEMAND
    min_size: int = 0
    max_size: int = 10
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[node.Taint, ...] = ()


@dataclass(frozen=True, slots=True)
class Config:
    node_groups: tuple[NodeGroup, ...]
    expander: str = "least-waste"
    scan_interval: float = 10.0
    scale_down_unneeded_time: float = 600.0
    scale_down_delay_after_add: float = 600.0
    utilization_threshold: float = 0.5
    max_node_provision_time: float = 900.0
    provisioning_delay: float = 15.0
    priorities: tuple[tuple[int, tuple[str, ...]], ...] = ()


def read(raw: Mapping[str, Any] | None, *, pools: Sequence[nodepool.NodePool], nodes: Sequence[Mapping[str, Any]],
         types: Sequence[instancetype.InstanceType]) -> Config:
    """CA's configuration from ``spec.clusterAutoscaler`` (may be None) and the scenario's objects."""
    f = fields.Fields(raw or {}, OBJECT)
    problems: list[errors.FieldError] = []
    by_name = {it.name: it for it in types}
    expander = f.str("expander", "least-waste") or "least-waste"
    if expander not in EXPANDERS:
        problems.append(errors.FieldError(OBJECT, "expander", "one of " + ", ".join(EXPANDERS), expander))
    given = f.list("nodeGroups")
    groups = [_group(g, by_name, problems) for g in f.items("nodeGroups")] if given else \
        _derived(pools, nodes, types)
    names = [g.name for g in groups if g is not None]
    if len(set(names)) != len(names):
        problems.append(errors.FieldError(OBJECT, "nodeGroups", "unique names", sorted(names)))
    timings = {}
    for key, default in (("scanInterval", 10.0), ("scaleDownUnneededTime", 600.0), ("scaleDownDelayAfterAdd", 600.0),
                         ("maxNodeProvisionTime", 900.0), ("provisioningDelay", 15.0)):
        text = f.raw(key)
        try:
            value = default if text is None else duration.parse_duration(text)
        except duration.DurationError:
            value = None
        if value is None or value < 0:
            problems.append(errors.FieldError(OBJECT, key, "a duration such as 10s or 10m", text))
            value = default
        timings[key] = float(value)
    threshold = f.raw("scaleDownUtilizationThreshold", 0.5)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1:
        problems.append(errors.FieldError(OBJECT, "scaleDownUtilizationThreshold", "a number from 0 to 1", threshold))
        threshold = 0.5
    priorities: list[tuple[int, tuple[str, ...]]] = []
    for key, value in (f.sub("priorities").data or {}).items():
        try:
            prio = int(key)
            pats = tuple(str(v) for v in value) if isinstance(value, list) else (str(value),)
            for pat in pats:
                re.compile(pat)
        except (TypeError, ValueError, re.error):
            problems.append(errors.FieldError(OBJECT, f"priorities.{key}", "a list of regular expressions under an "
                                              "integer priority", value))
            continue
        priorities.append((prio, pats))
    if expander == "priority" and not priorities:
        problems.append(errors.FieldError(OBJECT, "priorities", "priorities for the priority expander", None))
    if problems:
        raise errors.ValidationError(problems)
    return Config(
        node_groups=tuple(sorted((g for g in groups if g is not None), key=lambda g: g.name)), expander=expander,
        scan_interval=timings["scanInterval"] or 10.0, scale_down_unneeded_time=timings["scaleDownUnneededTime"],
        scale_down_delay_after_add=timings["scaleDownDelayAfterAdd"],
        max_node_provision_time=timings["maxNodeProvisionTime"], provisioning_delay=timings["provisioningDelay"],
        utilization_threshold=float(threshold), priorities=tuple(sorted(priorities, reverse=True)))


def _group(f: fields.Fields, types: Mapping[str, instancetype.InstanceType],
           problems: list[errors.FieldError]) -> NodeGroup | None:
    try:
        name = f.req_str("name")
        itype = f.req_str("instanceType")
        if itype not in types:
            raise f.fail("instanceType", "an instance type of the scenario's catalog", itype)
        zones = tuple(f.str_list("zones")) or tuple(sorted({o.zone for o in types[itype].offerings}))
        min_size = f.int("minSize", 0) or 0
        max_size = f.int("maxSize", 10) or 0
        if min_size < 0 or max_size < min_size:
            raise f.fail("maxSize", f"a size of at least minSize ({min_size}) and minSize >= 0", max_size)
        taints = tuple(node.Taint.parse(t) for t in f.items("taints"))
        return NodeGroup(name=name, instance_type=itype, zones=zones,
                         capacity_type=f.str("capacityType", labels.CAPACITY_TYPE_ON_DEMAND) or "on-demand",
                         min_size=min_size, max_size=max_size, labels=f.str_map("labels"), taints=taints)
    except errors.ValidationError as exc:
        problems.extend(exc.errors)
        return None


def _derived(pools: Sequence[nodepool.NodePool], nodes: Sequence[Mapping[str, Any]],
             types: Sequence[instancetype.InstanceType]) -> list[NodeGroup]:
    out: dict[str, NodeGroup] = {}
    existing: dict[str, list[Mapping[str, str]]] = {}
    for n in nodes:
        lb = (n.get("metadata") or {}).get("labels") or {}
        group = next((lb[k] for k in NODEGROUP_LABELS if lb.get(k)), None)
        if group and lb.get(labels.INSTANCE_TYPE):
            existing.setdefault(group, []).append(lb)
    for name, lbs in sorted(existing.items()):
        count = len(lbs)
        out[name] = NodeGroup(name=name, instance_type=lbs[0][labels.INSTANCE_TYPE],
                              zones=tuple(sorted({lb.get(labels.ZONE, "") for lb in lbs} - {""})),
                              min_size=count, max_size=max(10, 3 * count),
                              labels={k: v for k, v in lbs[0].items() if k in NODEGROUP_LABELS})
    for pool in pools:
        tmpl = pool.template
        reqs = templates.nodepool_requirements(pool)
        allowed = [it for it in sorted(types, key=_cheapest)
                   if it.offerings and reqs.intersects(requirements.Requirements.from_labels(it.labels)) is None]
        spec_reqs = tmpl.spec.requirements
        listed = next((r.values for r in spec_reqs if r.key == labels.INSTANCE_TYPE and r.operator == "In"), None)
        chosen = allowed if listed else allowed[:5]
        cts = next((r.values for r in spec_reqs if r.key == labels.CAPACITY_TYPE and r.operator == "In"), None)
        ct = labels.CAPACITY_TYPE_ON_DEMAND if not cts or labels.CAPACITY_TYPE_ON_DEMAND in cts else cts[0]
        cpu_limit = pool.limits.get("cpu") if pool.limits else None
        for it in chosen:
            cpus = it.capacity.get("cpu", 1000) or 1000
            max_size = 100 if cpu_limit is None else max(1, math.floor(cpu_limit / cpus))
            name = f"{pool.name}-{it.name.replace('.', '-').replace('_', '-').lower()}"
            out[name] = NodeGroup(name=name, instance_type=it.name,
                                  zones=tuple(sorted({o.zone for o in it.offerings})), capacity_type=ct,
                                  min_size=0, max_size=max_size, labels=dict(tmpl.labels),
                                  taints=tuple(tmpl.spec.taints))
    return list(out.values())


def _cheapest(it: instancetype.InstanceType) -> tuple[float, str]:
    return (min((o.price for o in it.offerings), default=math.inf), it.name)


