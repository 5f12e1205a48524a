"""The solves of the end-to-end loop: Deployments of the benchmark mix, first on an empty cluster,
then again with half of the NodeClaims registered (running their pods) and half in flight.

Every plan must hold at bind time (the independent validator), and the shortcuts that place a
whole group at once (a self-affine group after its first pod, the run's memos of instance type
choices) must give exactly the plan the pod-by-pod path gives.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from karpy.api import labels as wk
from karpy.api import nodepool, pod
from karpy.cloudprovider import catalog
from karpy.provisioning import claims, grouping_paths, placement, results, reuse, scheduler, templates

from . import validator
from .test_plan_validity import CPUS, HOST, MEMS, VALUES, ZONE, plan_of

KINDS = ("generic", "zonal", "hostname", "affinity", "anti")


def deployments_mix(n: int, seed: int = 42) -> list[pod.Pod]:
    """bench/e2e_scale.py's scenario: each class as 7 Deployments of one seeded shape."""
    rng = random.Random(seed)
    out: list[pod.Pod] = []
    per_class = n // 5
    for c, kind in enumerate(KINDS):
        total = n - 4 * per_class if c == 0 else per_class
        for i, value in enumerate(VALUES):
            replicas = total // 7 + (1 if i < total % 7 else 0)
            requests = {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMS)}
            labels = {"my-label": value}
            spec: dict[str, Any] = {}
            if kind in ("zonal", "hostname"):
                spec["topologySpreadConstraints"] = [{
                    "maxSkew": 1, "topologyKey": ZONE if kind == "zonal" else HOST,
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"my-label": value}}}]
            elif kind == "affinity":
                labels = {"my-affinity": value}
                spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": ZONE, "labelSelector": {"matchLabels": labels}}]}}
            elif kind == "anti":
                labels = {"app": "nginx"}
                spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": HOST, "labelSelector": {"matchLabels": labels}}]}}
            labels = {**labels, "deployment": f"{kind}-{i}"}
            out.extend(pod.build(f"{kind}-{i}-{j}", namespace="default", labels=labels, requests=requests, **spec)
                       for j in range(replicas))
    return out


@pytest.fixture(scope="module")
def pool_and_types() -> tuple[nodepool.NodePool, dict[str, list[Any]]]:
    np_ = nodepool.NodePool.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]}]}}}})
    reqs = templates.nodepool_requirements(np_)
    return np_, {"default": [t for t in catalog.load("aws") if templates._type_compatible(reqs, t)]}


def _registered(c: results.NewNodeClaim, i: int) -> results.ExistingNode:
    """The claim's Node: its cheapest type, the first zone it may land in, its own hostname."""
    t = c.instance_types[0]
    zone_req = c.requirements.get(wk.ZONE)
    zone = sorted(z for z in t.zones if zone_req is None or zone_req.has(z))[0]
    name = f"node-{i}"
    labels = {**c.requirements.labels(), **c.labels, **t.labels, wk.ZONE: zone, HOST: name}
    return results.ExistingNode(name=name, labels=labels, taints=(), allocatable=dict(t.allocatable),
                                pods=list(c.pods), nodepool=c.nodepool)


def _in_flight(c: results.NewNodeClaim, i: int) -> results.ExistingNode:
    return results.ExistingNode(name=f"claim-{i}", labels={**c.requirements.labels(), **c.labels},
                                taints=(), allocatable=dict(c.instance_types[0].allocatable), pods=[],
                                nodepool=c.nodepool, in_flight=True)


def _second_round(first: results.Results) -> tuple[list[results.ExistingNode], list[pod.Pod]]:
    existing: list[results.ExistingNode] = []
    pending: list[pod.Pod] = []
    for i, c in enumerate(first.new_claims):
        if i % 2 == 0:
            existing.append(_registered(c, i))
        else:
            existing.append(_in_flight(c, i))
            pending.extend(c.pods)
    return existing, pending


def _whole_plan(existing: list[results.ExistingNode], res: results.Results
                ) -> tuple[list[dict[str, Any]], list[validator.Placement]]:
    nodes, placements = plan_of(res)
    zones = sorted({z for e in existing if (z := e.labels.get(ZONE))})
    for e in existing:
        zone = e.labels.get(ZONE)
        nodes.append({"name": e.name, "labels": {**e.labels, HOST: e.name}, "zones": [zone] if zone else zones,
                      "allocatable": dict(e.allocatable)})
        placements.extend((p.to_manifest(), e.name) for p in [*e.pods, *res.existing.get(e.name, [])])
    return nodes, placements


def _plan_key(res: results.Results) -> tuple[Any, ...]:
    return (sorted((k, sorted(p.key for p in v)) for k, v in res.existing.items()),
            [(c.requirements, [t.name for t in c.instance_types], [p.key for p in c.pods], c.price)
             for c in res.new_claims], sorted(res.errors.items()))


def test_deployments_of_the_benchmark_mix_get_plans_that_hold_first_and_with_half_the_claims_registered(
        pool_and_types: tuple[nodepool.NodePool, dict[str, list[Any]]]) -> None:
    np_, types = pool_and_types
    pods = deployments_mix(3000)
    first = scheduler.Scheduler([np_], types).solve(pods)
    assert first.placed_count() == len(pods) and not first.errors
    found = validator.violations(*plan_of(first))
    assert found == [], f"{len(found)} violations, first: {found[:5]}"
    existing, pending = _second_round(first)
    again = scheduler.Scheduler([np_], types, existing, cache=reuse.SchedulingCache()).solve(pending)
    assert again.placed_count() == len(pending) and not again.errors
    running = [p.key for e in existing for p in e.pods]
    found = validator.violations(*_whole_plan(existing, again), bound=running)
    assert found == [], f"{len(found)} violations, first: {found[:5]}"


def test_a_self_affine_group_placed_at_once_gets_the_pod_by_pod_plan(
        pool_and_types: tuple[nodepool.NodePool, dict[str, list[Any]]], monkeypatch: pytest.MonkeyPatch) -> None:
    np_, types = pool_and_types
    pods = deployments_mix(1500)
    first = scheduler.Scheduler([np_], types).solve(pods)
    existing, pending = _second_round(first)
    calls: list[int] = []
    real_fill = grouping_paths.fill

    def counting_fill(*args: Any, **kwargs: Any) -> int:
        calls.append(1)
        return real_fill(*args, **kwargs)

    monkeypatch.setattr(grouping_paths, "fill", counting_fill)
    runs = []
    for stable in (True, False):
        monkeypatch.setattr(grouping_paths, "_stable", lambda run, g, s=stable: s and _really_stable(run, g))
        calls.clear()
        runs.append((_plan_key(scheduler.Scheduler([np_], types).solve(pods)),
                     _plan_key(scheduler.Scheduler([np_], types, existing).solve(pending)), len(calls)))
    assert runs[0][:2] == runs[1][:2]
    assert runs[0][2] > runs[1][2]  # the shortcut was taken


_really_stable = grouping_paths._stable


class _Forgetful(dict[Any, Any]):
    def __setitem__(self, key: Any, value: Any) -> None:
        return None


def test_the_runs_memos_of_instance_type_choices_change_no_plan(
        pool_and_types: tuple[nodepool.NodePool, dict[str, list[Any]]], monkeypatch: pytest.MonkeyPatch) -> None:
    np_, types = pool_and_types
    limited = nodepool.NodePool.from_manifest({**np_.to_manifest(), "spec": {
        **np_.to_manifest()["spec"], "limits": {"cpu": "300"}}})
    pods = deployments_mix(1200)
    with_memo = [_plan_key(scheduler.Scheduler([p], types).solve(pods)) for p in (np_, limited)]
    real_init = placement.Placement.__init__

    def forgetful_init(self: placement.Placement, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        self.choose_memo = _Forgetful()
        self.finalize_memo = _Forgetful()

    monkeypatch.setattr(placement.Placement, "__init__", forgetful_init)
    without = [_plan_key(scheduler.Scheduler([p], types).solve(pods)) for p in (np_, limited)]
    assert with_memo == without
    assert claims.MAX_INSTANCE_TYPES  # the options lists are compared whole above


def test_the_kube_schedulers_plan_on_the_registered_nodes_holds_and_fills_spreads_by_zone(
        pool_and_types: tuple[nodepool.NodePool, dict[str, list[Any]]], monkeypatch: pytest.MonkeyPatch) -> None:
    """No NodePools: a spread's shares go at once where the nodes surely in each zone take them.

    (Only pods that carry the spreads they match: the kube-scheduler checks a pod's own
    constraints when it binds, so the validator's worst order does not apply to the others.)"""
    np_, types = pool_and_types
    pods = [p for p in deployments_mix(2000) if not p.name.startswith(("generic", "hostname"))]
    first = scheduler.Scheduler([np_], types).solve(pods)
    empty = [results.ExistingNode(name=n.name, labels=n.labels, taints=(), allocatable=n.allocatable, pods=[],
                                  nodepool=n.nodepool)
             for n in (_registered(c, i) for i, c in enumerate(first.new_claims))]
    one_by_one: list[str] = []
    real = grouping_paths.pod_by_pod

    def watched(run: Any, g: Any, req: Any) -> int:
        one_by_one.append(g.sample.name)
        return int(real(run, g, req))

    monkeypatch.setattr(grouping_paths, "pod_by_pod", watched)
    res = scheduler.Scheduler(existing=empty).solve(pods)
    assert res.placed_count() > len(pods) * 0.9
    found = validator.violations(*_whole_plan(empty, res))
    assert found == [], f"{len(found)} violations, first: {found[:5]}"
    assert not [n for n in one_by_one if n.startswith("zonal")]
