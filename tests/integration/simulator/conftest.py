"""Fixtures and builders for the simulated kubelet and workload controllers.

A :class:`World` is one Manager + InMemoryCluster + VirtualClock with the simulator's kubelet,
ReplicaSet, Deployment and DaemonSet controllers registered; :func:`run_until` drives it.
Tests import this module (``from . import conftest``) for the builders.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from karpy import clock
from karpy.controllers import runtime
from karpy.kube import interface, memory
from karpy.simulator import daemonsets, kubelet, workloads


def run_until(manager: runtime.Manager, vclock: clock.VirtualClock, t: float) -> None:
    """Run every reconcile due up to time ``t`` (in order, moving the clock), then set it to ``t``."""
    while True:
        due = manager.next_due()
        if due is None or due > t:
            break
        if due > vclock.now():
            vclock.set(due)
        manager.run_due()
    if t > vclock.now():
        vclock.set(t)
    manager.run_due()


@dataclass
class World:
    clock: clock.VirtualClock
    cluster: memory.InMemoryCluster
    manager: runtime.Manager
    kubelet: kubelet.SimulatedKubelet

    @property
    def t0(self) -> float:
        return self.clock.start

    def run_for(self, seconds: float) -> None:
        run_until(self.manager, self.clock, self.clock.now() + seconds)

    def pods(self, namespace: str = "default", **selector: str) -> list[dict[str, Any]]:
        return sorted(self.cluster.list("Pod", namespace, label_selector=selector or None),
                      key=interface.name_of)

    def node(self, name: str) -> dict[str, Any]:
        return self.cluster.get("Node", name)


def make_world(seed: int = 1, **kubelet_options: Any) -> World:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock, rng=random.Random(seed))
    manager = runtime.Manager(cluster, vclock)
    sim = kubelet.SimulatedKubelet(cluster, vclock, random.Random(seed), **kubelet_options)
    sim.register(manager)
    workloads.ReplicaSetController(cluster, random.Random(seed + 1)).register(manager)
    workloads.DeploymentController(cluster).register(manager)
    daemonsets.DaemonSetController(cluster, random.Random(seed + 2)).register(manager)
    return World(vclock, cluster, manager, sim)


@pytest.fixture
def world() -> World:
    return make_world()


# ------------------------------------------------------------------------------------ builders


def container(requests: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"name": "app", "image": "registry.example/app:1",
            "resources": {"requests": dict(requests or {"cpu": "100m", "memory": "128Mi"})}}


def deployment(name: str, replicas: int, *, namespace: str = "default",
               image: str = "registry.example/app:1") -> dict[str, Any]:
    labels = {"app": name}
    c = container()
    c["image"] = image
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [c]}},
        },
    }


def daemonset(name: str, *, namespace: str = "kube-system", tolerations: list[dict[str, Any]] | None = None,
              node_selector: Mapping[str, str] | None = None,
              affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    labels = {"app": name}
    spec: dict[str, Any] = {"containers": [container({"cpu": "50m", "memory": "64Mi"})]}
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = affinity
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": spec}},
    }


def node(name: str, *, labels: Mapping[str, str] | None = None, taints: list[dict[str, Any]] | None = None,
         ready: bool = True) -> dict[str, Any]:
    """A registered node as a scenario would give it."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                              **(labels or {})}},
        "spec": {"providerID": f"kwok://{name}", "taints": list(taints or [])},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(name: str, *, namespace: str = "default", node_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container()]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


def nodeclaim(name: str, *, nodepool: str = "default", taints: list[dict[str, Any]] | None = None,
              startup_taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "requirements": [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": [nodepool]},
            {"key": "team", "operator": "In", "values": ["payments"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In",
             "values": ["m5.xlarge", "m5.2xlarge"]},
        ],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    }
    if taints:
        spec["taints"] = taints
    if startup_taints:
        spec["startupTaints"] = startup_taints
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": nodepool,
                                              "example.com/owner": "platform"}},
        "spec": spec,
    }


def instance(provider_id: str = "aws:///us-east-1a/i-0123456789abcdef0", *, zone: str = "us-east-1a",
             instance_type: str = "m5.xlarge", capacity_type: str = "spot") -> kubelet.InstanceInfo:
    gib = 2**30 * 1000
    return kubelet.InstanceInfo(
        provider_id=provider_id,
        instance_type=instance_type,
        zone=zone,
        capacity_type=capacity_type,
        capacity={"cpu": 4000, "memory": 16 * gib, "pods": 58_000},
        allocatable={"cpu": 3920, "memory": 14 * gib, "pods": 58_000},
        labels={"kubernetes.io/arch": "amd64", "karpenter.k8s.aws/instance-family": "m5"},
    )


def bind(world: World, pod_: Mapping[str, Any], node_name: str) -> None:
    """What the (simulated) kube-scheduler does: set ``spec.nodeName``."""
    world.cluster.patch("Pod", interface.name_of(pod_), {"spec": {"nodeName": node_name}},
                        interface.namespace_of(pod_))


def phase(pod_: Mapping[str, Any]) -> str:
    return str((pod_.get("status") or {}).get("phase", ""))


def condition(obj: Mapping[str, Any], type_: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return str(c.get("status"))
    return None


def taint_keys(node_: Mapping[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t.get("effect", "")) for t in (node_.get("spec") or {}).get("taints") or ()}


def owned_by(objs: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    out = []
    for o in objs:
        ref = interface.owner(o)
        if ref is not None and ref.get("kind") == kind and ref.get("name") == name:
            out.append(o)
    return out
