"""Plans hold at bind time: the independent validator (validator.py) on Karpenter's benchmark mix.

The validator is first shown to catch each kind of broken plan; then the scheduler's plans for the
benchmark mix (bench/scheduling.py's five classes) must pass it. 20,000 pods run with KARPY_SLOW=1
(marker ``slow``); CI runs 1,000 and 5,000.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

from karpy.api import labels as wk
from karpy.api import nodepool, pod
from karpy.cloudprovider.fake import instancetypes
from karpy.provisioning import results, scheduler

from . import validator

ZONE = validator.ZONE
HOST = validator.HOST
CPUS = ["100m", "250m", "500m", "1000m", "1500m"]
MEMS = ["100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"]
VALUES = [f"value-{i}" for i in range(7)]


def _pod(name: str, labels: dict[str, str], cpu: str = "1", **spec: Any) -> dict[str, Any]:
    return pod.build(name, namespace="default", labels=labels, requests={"cpu": cpu, "memory": "1Gi"},
                     **spec).to_manifest()


def _node(name: str, zone: str, cpu: int = 4000, zones: list[str] | None = None) -> dict[str, Any]:
    return {"name": name, "labels": {HOST: name, ZONE: zone}, "zones": zones or [zone],
            "allocatable": {"cpu": cpu, "memory": 64 * 2**30 * 1000, "pods": 110_000}}


def _spread(key: str) -> dict[str, Any]:
    return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "web"}}}]}


# ------------------------------------------------------------------------------ the validator


def test_the_validator_accepts_an_even_zonal_spread() -> None:
    nodes = [_node("a", "z1"), _node("b", "z2")]
    pods = [(_pod(f"w{i}", {"app": "web"}, **_spread(ZONE)), "ab"[i % 2]) for i in range(4)]
    assert validator.violations(nodes, pods) == []


def test_the_validator_counts_pods_without_the_constraint_that_match_its_selector() -> None:
    nodes = [_node("a", "z1"), _node("b", "z2")]
    pods = [(_pod("w0", {"app": "web"}, **_spread(ZONE)), "a"), (_pod("w1", {"app": "web"}, **_spread(ZONE)), "b"),
            (_pod("plain-0", {"app": "web"}), "a"), (_pod("plain-1", {"app": "web"}), "a")]
    found = validator.violations(nodes, pods)
    assert any("default/w0" in v and "maxSkew 1" in v for v in found)


def test_the_validator_counts_matching_pods_on_an_open_claim_in_every_zone_it_may_land_in() -> None:
    nodes = [_node("a", "z1"), _node("b", "z2"), _node("open", "z1", zones=["z1", "z2"])]
    pods = [(_pod("w0", {"app": "web"}, **_spread(ZONE)), "a"), (_pod("w1", {"app": "web"}, **_spread(ZONE)), "b"),
            (_pod("x0", {"app": "web"}), "open"), (_pod("x1", {"app": "web"}), "open")]
    assert validator.violations(nodes, pods)


def test_the_validator_finds_anti_affinity_resources_ports_and_split_affinity() -> None:
    anti: dict[str, Any] = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "solo"}}}]}}}
    aff: dict[str, Any] = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "team"}}}]}}}
    port = {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 80}],
                            "resources": {"requests": {"cpu": "100m"}}}]}
    nodes = [_node("a", "z1"), _node("b", "z2")]
    found = validator.violations(nodes, [
        (_pod("s0", {"app": "solo"}, **anti), "a"), (_pod("s1", {"app": "solo"}, **anti), "a"),
        (_pod("big", {}, cpu="3500m"), "b"), (_pod("big2", {}, cpu="1"), "b"),
        (pod.Pod.from_manifest({"metadata": {"name": "p0", "namespace": "default"}, "spec": port}).to_manifest(), "a"),
        (pod.Pod.from_manifest({"metadata": {"name": "p1", "namespace": "default"}, "spec": port}).to_manifest(), "a"),
        (_pod("t0", {"app": "team"}, cpu="10m", **aff), "a"), (_pod("t1", {"app": "team"}, cpu="10m", **aff), "b"),
    ])
    text = "\n".join(found)
    assert "anti-affinity" in text and "cpu requested" in text and "host port" in text
    assert "only the first pod of a group may start one" in text


# -------------------------------------------------------------------------- the scheduler's plans


def benchmark_mix(n: int, seed: int = 42) -> list[pod.Pod]:
    """Karpenter's scheduling benchmark pods (bench/scheduling.py's shapes)."""
    rng = random.Random(seed)
    per = n // 5

    def make(name: str, labels: dict[str, str], **spec: Any) -> pod.Pod:
        return pod.build(name, namespace="default", labels=labels,
                         requests={"cpu": rng.choice(CPUS), "memory": rng.choice(MEMS)}, **spec)

    out = [make(f"generic-{i}", {"my-label": rng.choice(VALUES)}) for i in range(n - 4 * per)]
    for key, kind in ((ZONE, "zonal"), (HOST, "hostname")):
        for i in range(per):
            value = rng.choice(VALUES)
            spread = [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                       "labelSelector": {"matchLabels": {"my-label": value}}}]
            out.append(make(f"{kind}-spread-{i}", {"my-label": value}, topologySpreadConstraints=spread))
    for i in range(per):
        value = rng.choice(VALUES)
        affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"my-affinity": value}}}]}}
        out.append(make(f"affinity-{i}", {"my-affinity": value}, affinity=affinity))
    for i in range(per):
        affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "nginx"}}}]}}
        out.append(make(f"anti-{i}", {"app": "nginx"}, affinity=affinity))
    return out


def plan_of(res: results.Results) -> tuple[list[dict[str, Any]], list[validator.Placement]]:
    """The scheduler's decisions as the validator's plain data (each claim as its own node)."""
    nodes: list[dict[str, Any]] = []
    placements: list[validator.Placement] = []
    for i, claim in enumerate(res.new_claims):
        name = claim.hostname or f"claim-{i}"
        zone_req = claim.requirements.get(wk.ZONE)
        offered = sorted({o.zone for t in claim.instance_types for o in t.offerings})
        zones = [z for z in offered if zone_req is None or zone_req.has(z)]
        alloc: dict[str, int] = {}
        for t in claim.instance_types:
            for k, v in t.allocatable.items():
                alloc[k] = min(alloc.get(k, v), v)
        nodes.append({"name": name, "labels": {**claim.labels, HOST: name}, "zones": zones, "allocatable": alloc})
        placements.extend((p.to_manifest(), name) for p in claim.pods)
    return nodes, placements


def _check(n: int) -> None:
    np_ = nodepool.NodePool.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {
            "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}})
    res = scheduler.Scheduler([np_], {"default": instancetypes.benchmark(400)}).solve(benchmark_mix(n))
    assert res.placed_count() == n and not res.errors
    nodes, placements = plan_of(res)
    found = validator.violations(nodes, placements)
    assert found == [], f"{len(found)} violations, first: {found[:5]}"


@pytest.mark.parametrize("n", [1000, 5000])
def test_the_benchmark_mix_plan_holds_at_bind_time(n: int) -> None:
    _check(n)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KARPY_SLOW"), reason="20,000 pods: set KARPY_SLOW=1")
def test_the_benchmark_mix_plan_of_twenty_thousand_pods_holds_at_bind_time() -> None:
    _check(20_000)
