"""A design applied to the input's NodePools: the v1 NodePool manifests a trial runs and a user applies.

The space's ``spec.nodePool`` (or the input's only NodePool) is the **base**: a design replaces it by
one or more NodePools that copy everything of the base (the constants) but what the design's variables
set. The input's other NodePools stay as they are. What each variable writes:

* ``instanceCategory`` / ``instanceFamily`` / ``instanceSize`` / ``architecture`` / ``capacityType``: a
  requirement ``In`` the chosen values (replacing the base's requirement on that key);
* ``instanceGeneration: N``: ``instance-generation Gt N-1``;
* ``consolidationPolicy``, ``consolidateAfter``, ``budgets`` (``[{nodes: ...}]``), ``weight``,
  ``expireAfter``: the NodePool field of that name;
* ``spotShare: s`` (0 < s < 1): two pools, ``<name>-spot`` (spot, weight +1, a CPU limit of ``s`` times
  the peak CPU its workloads request) and ``<name>`` (on-demand); 0 is on-demand only, 1 spot only;
* ``split: KEY``: one pool per value ``v`` of the workload label ``KEY`` (``<name>-<v>``, its nodes
  labelled ``KEY=v``), and the workloads carrying the label select it (``nodeSelector``); workloads
  without the label keep the base pool.

A caller may rely on: :func:`resolve` checks a space against a workload once (raising
:class:`karpy.api.errors.ValidationError` naming the space field); :func:`apply` is pure.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.api import errors, labels, quantity
from karpy.cloudprovider import catalog
from karpy.design import space as space_mod
from karpy.kube import interface
from karpy.simulator import scenario, scenario_steps

LABEL_KEYS: dict[str, tuple[str, ...]] = {
    "instanceCategory": (labels.AWS_INSTANCE_CATEGORY,),
    "instanceFamily": (labels.AWS_INSTANCE_FAMILY, "karpenter.azure.com/sku-family",
                       "karpenter.kwok.sh/instance-family"),
    "instanceGeneration": (labels.AWS_INSTANCE_GENERATION, "karpenter.azure.com/sku-version"),
    "instanceSize": (labels.AWS_INSTANCE_SIZE, "karpenter.kwok.sh/instance-size"),
    "architecture": (labels.ARCH,),
    "capacityType": (labels.CAPACITY_TYPE,),
}
_WORKLOAD_KINDS = ("Deployment", "ReplicaSet")


@dataclass(frozen=True, slots=True)
class Target:
    """A space resolved against one workload: the base pool, label keys, peaks for spot limits."""

    base: dict[str, Any]
    keys: dict[str, str]
    """variable -> the node label key it constrains in this workload's catalog."""
    peak_cpu: dict[str, float]
    """split value (``""``: all workloads) -> peak CPU (cores) the workloads request over time."""


def resolve(space: space_mod.Space, scn: scenario.Scenario) -> Target:
    pools = [o for o in scn.objects if o.get("kind") == "NodePool"]
    names = [interface.name_of(p) for p in pools]
    obj = f"{space.source}: {space_mod.KIND}/{space.name}"
    if space.nodepool is None:
        if len(pools) != 1:
            raise errors.ValidationError.single(obj, "spec.nodePool", "the NodePool to design, one of "
                                                + ", ".join(names), None)
        base = pools[0]
    else:
        found = [p for p in pools if interface.name_of(p) == space.nodepool]
        if not found:
            raise errors.ValidationError.single(obj, "spec.nodePool", "one of the input's NodePools: "
                                                + ", ".join(names), space.nodepool)
        base = found[0]
    types = catalog.load(scn.cloud.catalog, region=scn.cloud.region if scn.cloud.catalog in ("aws", "azure")
                         else None)
    keys: dict[str, str] = {}
    problems: list[errors.FieldError] = []
    for var in space.variables:
        candidates = LABEL_KEYS.get(var.name)
        if not candidates:
            continue
        key = next((k for k in candidates if any(k in t.labels for t in types) or k == labels.CAPACITY_TYPE), None)
        if key is None:
            problems.append(errors.FieldError(obj, f"spec.variables.{var.name}", "a variable the "
                                              f"{scn.cloud.catalog} catalog has a label for", var.name))
            continue
        keys[var.name] = key
        if key == labels.CAPACITY_TYPE or var.name == "instanceGeneration":
            continue
        known = {t.labels.get(key) for t in types}
        for i, value in enumerate(var.values):
            for v in value if isinstance(value, list) else [value]:
                if v not in known:
                    problems.append(errors.FieldError(obj, f"spec.variables.{var.name}[{i}]", f"a {key} value of the "
                                                      f"{scn.cloud.catalog} catalog", v))
    if problems:
        raise errors.ValidationError(problems)
    split = space.variable("split")
    split_keys = [str(v) for v in split.values if v != space_mod.NO_SPLIT] if split else []
    return Target(base=copy.deepcopy(dict(base)), keys=keys, peak_cpu=_peaks(scn, split_keys))


# ------------------------------------------------------------------------------------- applying


def apply(design: Mapping[str, Any], target: Target) -> list[dict[str, Any]]:
    """The NodePools replacing the base under ``design`` (variable -> chosen value)."""
    name = interface.name_of(target.base)
    split = design.get("split", space_mod.NO_SPLIT)
    groups: list[tuple[str, dict[str, str], str]] = [(name, {}, "")]
    if split != space_mod.NO_SPLIT:
        values = sorted(v[len(split) + 1:] for v in target.peak_cpu if v.startswith(split + "=") and
                        v != split + "=")
        groups = [(name, {}, "")] if _has_unlabelled(target, split) else []
        groups += [(_child(name, v), {split: v}, f"{split}={v}") for v in values]
    pools: list[dict[str, Any]] = []
    for pool_name, node_labels, peak_key in groups:
        pool = _designed(target, design, pool_name, node_labels)
        share = design.get("spotShare")
        if share is None:
            pools.append(pool)
            continue
        share = float(share)
        od = _with_capacity(pool, labels.CAPACITY_TYPE_ON_DEMAND)
        spot = _with_capacity(pool, labels.CAPACITY_TYPE_SPOT)
        if share <= 0:
            pools.append(od)
        elif share >= 1:
            pools.append(spot)
        else:
            spot["metadata"]["name"] = _child(pool_name, "spot")
            spec = spot["spec"]
            spec["weight"] = min(100, int(spec.get("weight") or 0) + 1)
            cpu = max(1, math.ceil(share * target.peak_cpu.get(peak_key, 0.0)))
            spec["limits"] = {**(spec.get("limits") or {}), "cpu": str(cpu)}
            pools.extend([spot, od])
    return pools


def _designed(target: Target, design: Mapping[str, Any], name: str, node_labels: Mapping[str, str]) -> dict[str, Any]:
    pool = copy.deepcopy(target.base)
    pool["metadata"] = {k: v for k, v in (pool.get("metadata") or {}).items() if k in ("name", "labels", "annotations")}
    pool["metadata"]["name"] = name
    pool.pop("status", None)
    spec = pool.setdefault("spec", {})
    tmpl = spec.setdefault("template", {})
    tspec = tmpl.setdefault("spec", {})
    reqs: list[dict[str, Any]] = list(tspec.get("requirements") or [])
    for var, key in target.keys.items():
        if var not in design:
            continue
        value = design[var]
        if var == "instanceGeneration":
            reqs = _replace(reqs, {"key": key, "operator": "Gt", "values": [str(int(value) - 1)]})
        else:
            reqs = _replace(reqs, {"key": key, "operator": "In", "values": [str(v) for v in (
                value if isinstance(value, list) else [value])]})
    for key, value in node_labels.items():
        reqs = _replace(reqs, {"key": key, "operator": "In", "values": [value]})
        tmpl.setdefault("metadata", {}).setdefault("labels", {})[key] = value
    tspec["requirements"] = reqs
    disruption = spec.setdefault("disruption", {})
    if "consolidationPolicy" in design:
        disruption["consolidationPolicy"] = design["consolidationPolicy"]
    if "consolidateAfter" in design:
        disruption["consolidateAfter"] = design["consolidateAfter"]
    disruption.setdefault("consolidateAfter", "0s")
    if "budgets" in design:
        disruption["budgets"] = [{"nodes": str(design["budgets"])}]
    if "weight" in design:
        spec["weight"] = int(design["weight"])
    if "expireAfter" in design:
        tspec["expireAfter"] = design["expireAfter"]
    return pool


def _replace(reqs: list[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    """``reqs`` with ``new`` in place of the first requirement on its key (the others on it dropped), or
    appended."""
    at = next((i for i, r in enumerate(reqs) if r.get("key") == new["key"]), len(reqs))
    rest = [r for r in reqs if r.get("key") != new["key"]]
    return [*rest[:at], new, *rest[at:]]


def _with_capacity(pool: dict[str, Any], capacity_type: str) -> dict[str, Any]:
    out = copy.deepcopy(pool)
    tspec = out["spec"]["template"]["spec"]
    tspec["requirements"] = _replace(tspec["requirements"],
                                     {"key": labels.CAPACITY_TYPE, "operator": "In", "values": [capacity_type]})
    return out


def _child(name: str, suffix: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", f"{name}-{suffix}".lower())[:63].strip("-")


def _has_unlabelled(target: Target, split: str) -> bool:
    return target.peak_cpu.get(f"{split}=", 0.0) > 0


def scenario_with(scn: scenario.Scenario, target: Target, pools: Sequence[dict[str, Any]],
                  design: Mapping[str, Any]) -> scenario.Scenario:
    """``scn`` with the base NodePool replaced by ``pools``; with a split, the labelled workloads select
    their pool."""
    base = interface.name_of(target.base)
    split = design.get("split", space_mod.NO_SPLIT)
    objects = [o for o in scn.objects if not (o.get("kind") == "NodePool" and interface.name_of(o) == base)]
    if split != space_mod.NO_SPLIT:
        objects = [_pinned(o, str(split)) for o in objects]
        steps = tuple(dataclasses.replace(s, action=scenario_steps.Apply(tuple(_pinned(o, str(split)) for o in
                                                                         s.action.objects)))
                      if isinstance(s.action, scenario_steps.Apply) else s for s in scn.steps)
        scn = dataclasses.replace(scn, steps=steps)
    return dataclasses.replace(scn, objects=tuple([*objects, *(copy.deepcopy(p) for p in pools)]))


def _pinned(obj: dict[str, Any], key: str) -> dict[str, Any]:
    if obj.get("kind") not in _WORKLOAD_KINDS:
        return obj
    tmpl = (obj.get("spec") or {}).get("template") or {}
    value = ((tmpl.get("metadata") or {}).get("labels") or {}).get(key)
    if value is None:
        return obj
    out = copy.deepcopy(obj)
    pod_spec = out["spec"]["template"].setdefault("spec", {})
    pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), key: value}
    return out


# ------------------------------------------------------------------------------------------ peaks


def _peaks(scn: scenario.Scenario, split_keys: Sequence[str]) -> dict[str, float]:
    """Peak CPU over time of the scenario's Deployments / ReplicaSets, in total (``""``) and per
    ``key=value`` of each split key (``key=``: the workloads without that label)."""
    shapes: dict[tuple[str, str, str], tuple[float, dict[str, str]]] = {}
    replicas: dict[tuple[str, str, str], int] = {}

    def add(objs: Iterable[Mapping[str, Any]]) -> None:
        for o in objs:
            if o.get("kind") not in _WORKLOAD_KINDS:
                continue
            key = (str(o.get("kind")), interface.namespace_of(o) or "default", interface.name_of(o))
            spec = o.get("spec") or {}
            tmpl = spec.get("template") or {}
            cpu = sum(quantity.parse_milli(str(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0")))
                      for c in (tmpl.get("spec") or {}).get("containers") or []) / 1000
            shapes[key] = (float(cpu), dict((tmpl.get("metadata") or {}).get("labels") or {}))
            replicas[key] = int(spec.get("replicas", 1) or 0)

    def total() -> dict[str, float]:
        out: dict[str, float] = {"": 0.0}
        for key, (cpu, lb) in shapes.items():
            amount = cpu * replicas.get(key, 0)
            out[""] += amount
            for sk in split_keys:
                k = f"{sk}={lb.get(sk, '')}"
                out[k] = out.get(k, 0.0) + amount
        return out

    add(scn.objects)
    peak = total()
    for step in scn.steps:
        a = step.action
        if isinstance(a, scenario_steps.Scale):
            replicas[(a.kind, a.namespace, a.name)] = a.replicas
        elif isinstance(a, scenario_steps.Apply):
            add(a.objects)
        elif isinstance(a, scenario_steps.Delete):
            replicas.pop((a.kind, a.namespace or "default", a.name), None)
        else:
            continue
        for k, v in total().items():
            peak[k] = max(peak.get(k, 0.0), v)
    return peak
