"""Builders and ``expect_*`` assertions for the scheduling scenario tests.

Builders make the scheduler's inputs from a few keywords (pods, NodePools, hand-built instance
types, existing nodes, DaemonSet pods); :func:`solve` runs one :class:`scheduler.Scheduler`.
The ``expect_*`` helpers check a :class:`results.Results` and fail with the run's decisions in
the message, so a failing scenario says what the scheduler did instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from karpy.api import labels as wk
from karpy.api import node, nodepool, pod, quantity
from karpy.cloudprovider import instancetype
from karpy.provisioning import results, scheduler

ZONES = ("zone-a", "zone-b", "zone-c")
GI = 2**30 * quantity.MILLI
MI = 2**20 * quantity.MILLI


# -- inputs --------------------------------------------------------------------------------------


def make_pod(name: str, *, cpu: str = "100m", memory: str = "128Mi", labels: Mapping[str, str] | None = None,
             namespace: str = "default", **spec: Any) -> pod.Pod:
    """A pending pod with one container requesting ``cpu`` and ``memory``; ``spec`` are manifest
    spec fields (``nodeSelector``, ``affinity``, ``tolerations``, ``topologySpreadConstraints``...)."""
    return pod.build(name, namespace=namespace, requests={"cpu": cpu, "memory": memory},
                     labels=dict(labels or {}), **spec)


def make_pods(prefix: str, count: int, **kwargs: Any) -> list[pod.Pod]:
    return [make_pod(f"{prefix}-{i}", **kwargs) for i in range(count)]


def kind_pods(kind: str, i: int, count: int, cpu: str, mem: str | None = None) -> list[pod.Pod]:
    """``count`` pods of group ``i`` of one kind of the scheduling benchmark's mix: ``zonal`` or
    ``hostname`` spread, hostname ``anti``-affinity, hostname ``affinity`` (to its own group), or
    ``generic``."""
    value = f"v{i % 2}"
    labels = {"my-label": value}
    extra: dict[str, Any] = {}
    if kind == "zonal":
        extra = {"topologySpreadConstraints": [spread(wk.ZONE, {"my-label": value})]}
    elif kind == "hostname":
        extra = {"topologySpreadConstraints": [spread(wk.HOSTNAME, {"my-label": value})]}
    elif kind == "anti":
        labels = {"app": "nginx"}
        extra = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            affinity_term(wk.HOSTNAME, {"app": "nginx"})]}}}
    elif kind == "affinity":
        labels = {"my-affinity": value}
        extra = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            affinity_term(wk.HOSTNAME, {"my-affinity": value})]}}}
    if mem is not None:
        extra["memory"] = mem
    return make_pods(f"{kind}-{i}", count, cpu=cpu, labels=labels, **extra)


def make_nodepool(name: str = "default", *, requirements: Sequence[Mapping[str, Any]] = (),
                  taints: Sequence[Mapping[str, Any]] = (), startup_taints: Sequence[Mapping[str, Any]] = (),
                  labels: Mapping[str, str] | None = None, limits: Mapping[str, str] | None = None,
                  weight: int | None = None) -> nodepool.NodePool:
    spec: dict[str, Any] = {
        "requirements": [dict(r) for r in requirements],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    }
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if startup_taints:
        spec["startupTaints"] = [dict(t) for t in startup_taints]
    template: dict[str, Any] = {"spec": spec}
    if labels:
        template["metadata"] = {"labels": dict(labels)}
    body: dict[str, Any] = {"template": template}
    if limits:
        body["limits"] = dict(limits)
    if weight is not None:
        body["weight"] = weight
    return nodepool.NodePool.from_manifest({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                            "metadata": {"name": name}, "spec": body})


def requirement(key: str, operator: str, *values: str, min_values: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    if min_values is not None:
        out["minValues"] = min_values
    return out


def make_type(name: str, *, cpu: float, memory_gi: float, pods: int = 110, price: float | None = None,
              arch: str = "amd64", family: str | None = None, zones: Sequence[str] = ZONES,
              capacity_types: Sequence[str] = (wk.CAPACITY_TYPE_ON_DEMAND,),
              labels: Mapping[str, str] | None = None) -> instancetype.InstanceType:
    """A hand-built instance type with no kubelet overhead (allocatable == capacity).

    The default price is proportional to its size (0.04 per cpu + 0.005 per GiB)."""
    type_labels = {wk.INSTANCE_TYPE: name, wk.ARCH: arch, wk.OS: "linux"}
    if family is not None:
        type_labels[wk.AWS_INSTANCE_FAMILY] = family
    type_labels.update(labels or {})
    if price is None:
        price = 0.04 * cpu + 0.005 * memory_gi
    capacity = {"cpu": int(cpu * quantity.MILLI), "memory": int(memory_gi * GI), "pods": pods * quantity.MILLI}
    offerings = tuple(instancetype.Offering(zone=z, capacity_type=ct, price=price)
                      for z in zones for ct in capacity_types)
    return instancetype.InstanceType(name, type_labels, capacity, instancetype.Overhead(), offerings)


def small_catalog() -> list[instancetype.InstanceType]:
    """Three sizes of one amd64 family in every zone: 2, 4 and 16 cpus."""
    return [
        make_type("small", cpu=2, memory_gi=4, family="m"),
        make_type("medium", cpu=4, memory_gi=16, family="m"),
        make_type("large", cpu=16, memory_gi=64, family="m"),
    ]


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> node.Taint:
    return node.Taint(key=key, value=value, effect=effect)


def existing_node(name: str, *, cpu: float = 4, memory_gi: float = 16, pods: int = 110,
                  zone: str = "zone-a", labels: Mapping[str, str] | None = None,
                  taints: Sequence[node.Taint] = (), running: Sequence[pod.Pod] = (),
                  nodepool_name: str | None = "default", in_flight: bool = False,
                  schedulable: bool = True) -> results.ExistingNode:
    node_labels = {wk.HOSTNAME: name, wk.ZONE: zone, wk.ARCH: "amd64", wk.OS: "linux",
                   wk.CAPACITY_TYPE: wk.CAPACITY_TYPE_ON_DEMAND}
    if nodepool_name is not None:
        node_labels[wk.NODEPOOL] = nodepool_name
    node_labels.update(labels or {})
    allocatable = {"cpu": int(cpu * quantity.MILLI), "memory": int(memory_gi * GI), "pods": pods * quantity.MILLI}
    return results.ExistingNode(name=name, labels=node_labels, taints=tuple(taints), allocatable=allocatable,
                                pods=list(running), nodepool=nodepool_name, in_flight=in_flight,
                                schedulable=schedulable)


def daemonset_pod(name: str, *, cpu: str = "100m", memory: str = "128Mi", **spec: Any) -> pod.Pod:
    """A DaemonSet's template pod (owned by DaemonSet ``name``)."""
    manifest = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "kube-system",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                                          "controller": True}]},
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
                 **spec},
    }
    return pod.Pod.from_manifest(manifest)


def spread(key: str, selector: Mapping[str, str], *, max_skew: int = 1, when: str = "DoNotSchedule",
           min_domains: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
                           "labelSelector": {"matchLabels": dict(selector)}}
    if min_domains is not None:
        out["minDomains"] = min_domains
    return out


def affinity_term(key: str, selector: Mapping[str, str]) -> dict[str, Any]:
    return {"topologyKey": key, "labelSelector": {"matchLabels": dict(selector)}}


def solve(pods: Sequence[pod.Pod], *, nodepools: Sequence[nodepool.NodePool] | None = None,
          types: Sequence[instancetype.InstanceType] | Mapping[str, Sequence[instancetype.InstanceType]]
          | None = None, existing: Sequence[results.ExistingNode] = (),
          daemonsets: Sequence[pod.Pod] = (), usage: Mapping[str, Mapping[str, int]] | None = None,
          ) -> results.Results:
    """One scheduling run; ``types`` is one catalog for every NodePool or a per-NodePool mapping."""
    pools = list(nodepools) if nodepools is not None else [make_nodepool()]
    catalog_ = small_catalog() if types is None else types
    if isinstance(catalog_, Mapping):
        per_pool = {k: list(v) for k, v in catalog_.items()}
    else:
        per_pool = {p.name: list(catalog_) for p in pools}
    return scheduler.Scheduler(pools, per_pool, existing, daemonsets, usage).solve(pods)


# -- reading results -------------------------------------------------------------------------------


def describe(res: results.Results) -> str:
    lines = [f"existing: {{{', '.join(f'{k}: {len(v)}' for k, v in res.existing.items())}}}"]
    for c in res.new_claims:
        lines.append(f"claim {c.hostname} ({c.nodepool}): {len(c.pods)} pods, types "
                     f"{c.instance_type_names()[:5]}, zones {claim_zones(c)}")
    for k, v in res.errors.items():
        lines.append(f"error {k}: {v}")
    if res.relaxed:
        lines.append(f"relaxed: {res.relaxed}")
    return "\n".join(lines)


def claim_of(res: results.Results, p: pod.Pod) -> results.NewNodeClaim | None:
    for c in res.new_claims:
        if any(q.key == p.key for q in c.pods):
            return c
    return None


def node_of(res: results.Results, p: pod.Pod) -> str | None:
    """Where ``p`` went: an existing node's name, a new claim's placeholder hostname, or None."""
    for name, pods in res.existing.items():
        if any(q.key == p.key for q in pods):
            return name
    c = claim_of(res, p)
    return c.hostname if c is not None else None


def claim_zones(c: results.NewNodeClaim) -> set[str]:
    """Zones the claim may launch in: its zone requirement and its types' offerings."""
    r = c.requirements.get(wk.ZONE)
    zones = {z for t in c.instance_types for z in t.zones}
    return {z for z in zones if r is None or r.has(z)}


def claim_values(c: results.NewNodeClaim, key: str) -> set[str]:
    """The values of instance-type label ``key`` across the claim's options."""
    return {t.labels[key] for t in c.instance_types if key in t.labels}


def zone_counts(res: results.Results, pods: Iterable[pod.Pod],
                existing: Sequence[results.ExistingNode] = ()) -> Counter[str]:
    """Per zone, how many of ``pods`` were placed there (new claims must be narrowed to one zone)."""
    node_zone = {n.name: n.labels.get(wk.ZONE, "") for n in existing}
    out: Counter[str] = Counter()
    for p in pods:
        c = claim_of(res, p)
        if c is not None:
            zones = claim_zones(c)
            assert len(zones) == 1, f"claim {c.hostname} of {p.key} is not narrowed to one zone: {zones}"
            out[next(iter(zones))] += 1
            continue
        where = node_of(res, p)
        if where is not None:
            out[node_zone[where]] += 1
    return out


# -- expectations ----------------------------------------------------------------------------------


def expect_all_placed(res: results.Results, pods: Sequence[pod.Pod]) -> None:
    missing = [p.key for p in pods if node_of(res, p) is None]
    assert not missing, f"not placed: {missing}\n{describe(res)}"
    assert not res.errors, describe(res)


def expect_claims(res: results.Results, n: int, *, types: Iterable[str] | None = None,
                  nodepool_name: str | None = None) -> None:
    """Exactly ``n`` new claims; with ``types`` every claim's cheapest option is one of them."""
    assert len(res.new_claims) == n, f"expected {n} claims, got {len(res.new_claims)}\n{describe(res)}"
    allowed = set(types) if types is not None else None
    for c in res.new_claims:
        assert c.instance_types, f"claim {c.hostname} has no instance types"
        if allowed is not None:
            assert c.instance_types[0].name in allowed, describe(res)
        if nodepool_name is not None:
            assert c.nodepool == nodepool_name, describe(res)


def expect_unschedulable(res: results.Results, p: pod.Pod, *, containing: Iterable[str] = ()) -> str:
    assert node_of(res, p) is None, f"{p.key} was placed on {node_of(res, p)}\n{describe(res)}"
    assert p.key in res.errors, f"{p.key} has no explanation\n{describe(res)}"
    message = res.errors[p.key]
    for part in containing:
        assert part in message, f"{part!r} not in the explanation of {p.key}: {message}"
    return message


def expect_zone_skew(res: results.Results, pods: Sequence[pod.Pod], *, max_skew: int,
                     zones: Iterable[str] = ZONES, existing: Sequence[results.ExistingNode] = ()) -> Counter[str]:
    counts = zone_counts(res, pods, existing)
    values = [counts.get(z, 0) for z in zones]
    assert max(values) - min(values) <= max_skew, f"zone counts {dict(counts)} exceed skew {max_skew}"
    return counts


def expect_claims_hold_their_pods(res: results.Results, daemonsets: Sequence[pod.Pod] = ()) -> None:
    """Each claim's cheapest type holds the pods' requests plus the overhead of the DaemonSets."""
    for c in res.new_claims:
        need: dict[str, int] = dict(c.daemon_overhead)
        for p in c.pods:
            need = quantity.add(need, p.requests)
        for t in c.instance_types[:1]:
            for k, v in need.items():
                assert t.allocatable.get(k, 0) >= v, (
                    f"claim {c.hostname}: {t.name} has {k} {t.allocatable.get(k, 0)} < {v}")
        expected_overhead: dict[str, int] = {}
        for d in daemonsets:
            expected_overhead = quantity.add(expected_overhead, d.requests)
        if daemonsets:
            assert c.daemon_overhead == expected_overhead, (c.daemon_overhead, expected_overhead)


def expect_not_overcommitted(res: results.Results, existing: Sequence[results.ExistingNode]) -> None:
    for n in existing:
        used: dict[str, int] = {}
        for p in [*n.pods, *res.existing.get(n.name, [])]:
            used = quantity.add(used, p.requests)
        for k, v in used.items():
            assert v <= n.allocatable.get(k, 0), f"{n.name} over-committed on {k}: {v} > {n.allocatable.get(k, 0)}"
