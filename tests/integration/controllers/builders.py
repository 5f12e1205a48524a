"""A small world for controller tests: cluster, simulated cloud and kubelet, karpy's controllers.

:func:`make_world` wires an :class:`~karpy.kube.memory.InMemoryCluster`, a
:class:`~karpy.cloudprovider.fake.provider.SimulatedCloud` with a few benchmark instance types
(``fake-it-0`` = 1 vCPU ... ``fake-it-7`` = 8 vCPU, spot in two zones, on-demand in three), the
simulator's kubelet (nodes register ``launch_latency`` seconds after launch) and
:func:`karpy.operator.register_all`, all on one :class:`~karpy.clock.VirtualClock`.
:class:`Bridge` connects the cloud to the kubelet and can inject failures. :func:`register_recording`
registers the controllers on a :class:`RecordingCluster`, which remembers the kinds they list or watch.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy import clock, operator, settings
from karpy.api import nodeclaim
from karpy.cloudprovider.fake import instancetypes
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.controllers import runtime
from karpy.kube import interface, memory
from karpy.simulator import cloud_bridge, pdb_status
from karpy.simulator import kubelet as kubelet_mod

NODECLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}


class Bridge(cloud_bridge.CloudBridge):
    """The simulator's cloud bridge with failure injection and call counts for tests."""

    def __init__(self, cloud: fake_provider.SimulatedCloud, kubelet: kubelet_mod.SimulatedKubelet | None) -> None:
        super().__init__(cloud, kubelet)
        self.create_errors: list[Exception] = []
        self.delete_errors: list[Exception] = []
        self.creates = 0
        self.deletes = 0

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        self.creates += 1
        if self.create_errors:
            raise self.create_errors.pop(0)
        return super().create(claim)

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        self.deletes += 1
        if self.delete_errors:
            raise self.delete_errors.pop(0)
        super().delete(claim)


@dataclass
class World:
    clock: clock.VirtualClock
    cluster: memory.InMemoryCluster
    manager: runtime.Manager
    cloud: fake_provider.SimulatedCloud
    bridge: Bridge
    kubelet: kubelet_mod.SimulatedKubelet | None
    karpy: operator.Controllers

    @property
    def t0(self) -> float:
        return self.clock.start

    def run_until(self, t: float) -> None:
        """Run every reconcile due up to ``t`` in order, moving the clock, then set it to ``t``."""
        while True:
            due = self.manager.next_due()
            if due is None or due > t:
                break
            if due > self.clock.now():
                self.clock.set(due)
            self.manager.run_due()
        if t > self.clock.now():
            self.clock.set(t)
        self.manager.run_due()

    def run_for(self, seconds: float) -> None:
        self.run_until(self.clock.now() + seconds)

    def at(self, seconds: float) -> None:
        """Run until ``t0 + seconds``."""
        self.run_until(self.t0 + seconds)

    def nodeclaims(self) -> list[dict[str, Any]]:
        return sorted(self.cluster.list("NodeClaim"), key=interface.name_of)

    def nodes(self) -> list[dict[str, Any]]:
        return sorted(self.cluster.list("Node"), key=interface.name_of)

    def events(self, reason: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
        out = [e for e in self.cluster.list("Event")
               if (reason is None or e.get("reason") == reason)
               and (name is None or e["involvedObject"].get("name") == name)]
        return sorted(out, key=lambda e: (e.get("firstTimestamp", ""), e["metadata"]["name"]))

    def running_instances(self) -> list[str]:
        return [i.provider_id for i in self.cloud.instances() if i.running]


def make_world(*, settings_: settings.Settings | None = None, with_kubelet: bool = True,
               launch_latency: float = 30.0, startup_taint_delay: float = 5.0, n_types: int = 8,
               seed: int = 1) -> World:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock, rng=random.Random(seed))
    manager = runtime.Manager(cluster, vclock)
    cloud = fake_provider.SimulatedCloud(vclock, random.Random(seed), catalog=instancetypes.benchmark(n_types),
                                         cluster_name="test")
    kubelet = None
    if with_kubelet:
        kubelet = kubelet_mod.SimulatedKubelet(cluster, vclock, random.Random(seed), launch_latency=launch_latency,
                                               jitter=0.0, startup_taint_delay=startup_taint_delay)
        kubelet.register(manager)
    bridge = Bridge(cloud, kubelet)
    pdb_status.PdbStatusController(cluster, vclock).register(manager)  # kube-controller-manager's part
    cluster.create(nodeclass_manifest())  # NodePools refer to it; a NodePool whose NodeClass is missing is not used
    karpy = operator.register_all(manager, cluster, bridge, vclock,
                                     settings_ or settings.Settings(cluster_name="test"))
    return World(vclock, cluster, manager, cloud, bridge, kubelet, karpy)


# ------------------------------------------------------------------------------------ objects


def nodeclass_manifest(name: str = "default") -> dict[str, Any]:
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole-test",
                     "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
                     "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}]}}


def nodepool_manifest(name: str = "default", *, requirements: list[dict[str, Any]] | None = None,
                      labels: Mapping[str, str] | None = None, taints: list[dict[str, Any]] | None = None,
                      startup_taints: list[dict[str, Any]] | None = None,
                      termination_grace_period: str | None = None,
                      limits: Mapping[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeClassRef": dict(NODECLASS_REF), "requirements": list(requirements or []),
                            "expireAfter": "720h"}
    if taints:
        spec["taints"] = taints
    if startup_taints:
        spec["startupTaints"] = startup_taints
    if termination_grace_period:
        spec["terminationGracePeriod"] = termination_grace_period
    template: dict[str, Any] = {"spec": spec}
    if labels:
        template["metadata"] = {"labels": dict(labels)}
    body: dict[str, Any] = {"template": template}
    if limits:
        body["limits"] = dict(limits)
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": body}


def pending_pod(name: str, *, cpu: str = "500m", memory: str = "256Mi", namespace: str = "default",
                **spec: Any) -> dict[str, Any]:
    """A pod the kube-scheduler marked Unschedulable."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"containers": [{"name": "app", "image": "app:1",
                                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **spec},
        "status": {"phase": "Pending", "conditions": [dict(UNSCHEDULABLE)]},
    }


def running_pod(name: str, node: str, *, namespace: str = "default", labels: Mapping[str, str] | None = None,
                annotations: Mapping[str, str] | None = None, owner: Mapping[str, Any] | None = None,
                **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {"app": name})}
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner:
        meta["ownerReferences"] = [dict(owner)]
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "app:1",
                                                   "resources": {"requests": {"cpu": "10m"}}}], **spec},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def daemonset_owner(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": f"uid-{name}", "controller": True}


def condition(obj: Mapping[str, Any], type_: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return str(c.get("status"))
    return None


def taint_keys(obj: Mapping[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t.get("effect", "")) for t in (obj.get("spec") or {}).get("taints") or ()}


def requirement(claim: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    for r in claim["spec"]["requirements"]:
        if r["key"] == key:
            return dict(r)
    return None


class RecordingCluster:
    """The in-memory cluster, remembering which kinds were listed or watched."""

    def __init__(self, inner: memory.InMemoryCluster) -> None:
        self.inner = inner
        self.kinds: set[str] = set()

    def list(self, kind: str, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        self.kinds.add(kind)
        return self.inner.list(kind, *args, **kwargs)

    def watch(self, kind: str, handler: interface.WatchHandler) -> interface.Unsubscribe:
        self.kinds.add(kind)
        return self.inner.watch(kind, handler)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def register_recording(config: settings.Settings | None = None, *,
                       nodeclass_kinds: tuple[str, ...] = ()) -> tuple[set[str], operator.Controllers]:
    """Every controller registered (:func:`karpy.operator.register_all`) on a :class:`RecordingCluster` with
    an AWS simulated cloud: the kinds they listed or watched, and the controllers."""
    vclock = clock.VirtualClock()
    cluster = RecordingCluster(memory.InMemoryCluster(vclock, rng=random.Random(1)))
    manager = runtime.Manager(cluster, vclock)
    cloud = fake_provider.SimulatedCloud(vclock, random.Random(2), catalog="aws")
    built = operator.register_all(manager, cluster, cloud, vclock, config, nodeclass_kinds=nodeclass_kinds)
    return cluster.kinds, built
