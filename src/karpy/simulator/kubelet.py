"""The simulated kubelet: cloud instances become Nodes, bound pods start running.

In ``karpy simulate`` there are no machines. The simulated cloud tells this module when an instance
is launched or terminated, and :class:`SimulatedKubelet` does what a node's kubelet (plus the cloud
node lifecycle and pod garbage collection controllers) would do in the cluster:

* :meth:`SimulatedKubelet.instance_launched` registers a Node after the launch latency
  (``launch_latency`` +- a seeded uniform ``jitter``). The Node is named as the cloud names it:
  AWS ``ip-10-a-b-c.ec2.internal`` (``ip-10-a-b-c.<region>.compute.internal`` outside us-east-1,
  the address drawn from the seeded rng, never repeated); Azure the VM name (the last segment of
  the provider id, else ``aks-<nodeclaim>``, as Karpenter's Azure provider names VMs); kwok, fake
  and anything else the NodeClaim's name. It carries the instance's labels, the NodeClaim's labels
  and decided (single-valued) requirements, the well-known instance-type / zone / capacity-type /
  arch / os labels and ``kubernetes.io/hostname``; ``spec.providerID``; ``spec.taints`` = the
  NodeClaim's taints + startup taints + ``karpenter.sh/unregistered:NoExecute`` (Karpenter v1
  nodes register with it, karpy's lifecycle controller removes it); capacity and allocatable as
  Kubernetes quantities; ``nodeInfo`` and addresses. It is ``Ready`` at once with
  ``ready_delay=0``; otherwise ``Ready=False`` with ``node.kubernetes.io/not-ready:NoSchedule``
  until ``ready_delay`` has passed. ``startup_taint_delay`` after registration the startup taints
  are removed, as the daemon that owns them (a CNI agent, say) would.
* :meth:`SimulatedKubelet.instance_terminated` cancels a launch that has not registered yet, or
  marks the node's pods ``Failed`` (reason ``NodeLost``) and deletes the Node (finalizers are
  respected: karpy's termination controller removes them). Once the Node is gone its pods are
  deleted (pod garbage collection).
* :meth:`SimulatedKubelet.add_node` creates a scenario's pre-existing node as given.
* A pod bound to an existing, Ready node (``spec.nodeName``, set by the simulated scheduler or the
  DaemonSet controller) becomes ``Running`` with ``PodScheduled``, ``Initialized``,
  ``ContainersReady`` and ``Ready`` all ``True`` ``pod_start_delay`` seconds later.

Pod faults (``spec.faults.pods``, off by default; :mod:`karpy.simulator.pod_faults`): ``start_failure``
fails a starting pod at that rate (``failure_rng``; counted in ``injected``), and a pod the cluster
keeps terminating (``InMemoryCluster.graceful_pods``) is confirmed stopped when its grace period ends.

Everything is driven through the controller runtime: the kubelet registers two controllers
(:data:`NODE_CONTROLLER`, :data:`POD_CONTROLLER`) and schedules its timers with
``Manager.enqueue``; it never reads the wall clock. Same rng seed and same calls give the same
node names, addresses and timings.
"""

from __future__ import annotations

import contextlib
import copy
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels, nodeclaim, quantity
from karpy.controllers import runtime
from karpy.kube import errors, interface
from karpy.scheduling import requirements
from karpy.simulator import pod_faults

NODE_CONTROLLER = "simulator.kubelet.node"
POD_CONTROLLER = "simulator.kubelet.pod"

_LAUNCH = "launch:"
_READY = "ready:"
_STARTUP = "startup:"

UNREGISTERED_TAINT = {"key": labels.TAINT_UNREGISTERED, "effect": "NoExecute"}
NOT_READY_TAINT = {"key": labels.TAINT_NOT_READY, "effect": "NoSchedule"}

_AWS_REGION = re.compile(r"^([a-z]{2}(?:-gov)?-[a-z]+-\d+)")
_AZURE_REGION = re.compile(r"^([a-z0-9]+)-\d+$")
_OS_IMAGES = {"aws": "Amazon Linux 2023", "azure": "Ubuntu 22.04.5 LTS"}
_POD_CONDITIONS = ("PodScheduled", "Initialized", "ContainersReady", "Ready")


@dataclass(frozen=True, slots=True)
class InstanceInfo:
    """What the simulated cloud knows about a launched instance. Resources in milli-units."""

    provider_id: str
    instance_type: str
    zone: str
    capacity_type: str
    capacity: Mapping[str, int] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""
    """The node name when the cloud decides it; empty to let the kubelet name it."""
    karpenter: bool = True
    """Launched for a NodeClaim: the Node registers with Karpenter's ``karpenter.sh/unregistered`` taint,
    which the NodeClaim lifecycle removes. False for nodes of other autoscalers (a node group's)."""

    @property
    def provider(self) -> str:
        """The provider id's scheme: ``aws``, ``azure``, ``kwok``, ``fake``... (``""`` when none)."""
        scheme, sep, _ = self.provider_id.partition("://")
        return scheme if sep else ""


@dataclass
class _Launch:
    claim: nodeclaim.NodeClaim
    instance: InstanceInfo
    node_name: str
    address: str


def _replace_conditions(existing: Iterable[Mapping[str, Any]],
                        updates: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``existing`` with each condition of ``updates`` put in by type; an unchanged status keeps
    its ``lastTransitionTime``."""
    out = [dict(c) for c in existing]
    for new in updates:
        for i, c in enumerate(out):
            if c.get("type") == new["type"]:
                if c.get("status") == new["status"] and c.get("lastTransitionTime"):
                    new = {**new, "lastTransitionTime": c["lastTransitionTime"]}
                out[i] = new
                break
        else:
            out.append(new)
    return out


def _same_taint(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.get("key") == b.get("key") and \
        (a.get("effect") or "NoSchedule") == (b.get("effect") or "NoSchedule")


def region_of(provider: str, zone: str) -> str:
    """``us-west-2a`` -> ``us-west-2`` (AWS), ``eastus-1`` -> ``eastus`` (Azure), else ``""``."""
    if provider == "aws":
        m = _AWS_REGION.match(zone)
        return m.group(1) if m else ""
    if provider == "azure":
        m = _AZURE_REGION.match(zone)
        return m.group(1) if m else ""
    return ""


class SimulatedKubelet:
    """Every simulated node's kubelet at once; see the module docstring. Call :meth:`register`."""

    def __init__(
        self,
        cluster: interface.Cluster,
        clock: clock_mod.Clock,
        rng: random.Random,
        *,
        launch_latency: float = 60.0,
        jitter: float = 10.0,
        startup_taint_delay: float = 5.0,
        ready_delay: float = 0.0,
        pod_start_delay: float = 2.0,
        region: str = "",
        kubelet_version: str = "v1.31.0",
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.rng = rng
        self.launch_latency = launch_latency
        self.jitter = jitter
        self.startup_taint_delay = startup_taint_delay
        self.ready_delay = ready_delay
        self.pod_start_delay = pod_start_delay
        self.region = region
        self.kubelet_version = kubelet_version
        self._manager: runtime.Manager | None = None
        self._launches: dict[str, _Launch] = {}
        self._startup: dict[str, list[dict[str, Any]]] = {}
        self._addresses: dict[str, str] = {}
        self._used_addresses: set[str] = set()
        self._dead: set[str] = set()
        self._pod_start: dict[str, float] = {}
        self.start_failure = 0.0
        """Rate at which a bound pod fails to start (``spec.faults.pods.startFailure``)."""
        self.failure_rng = random.Random(0)
        self.injected: dict[str, int] = {}
        """Faults injected by name (``podStartFailure``)."""

    # ------------------------------------------------------------------------------ wiring

    def controllers(self) -> list[runtime.Controller]:
        return [
            runtime.Controller(NODE_CONTROLLER, self._reconcile_node, [("Node", self._map_node)]),
            runtime.Controller(POD_CONTROLLER, self._reconcile_pod, [("Pod", self._map_pod)]),
        ]

    def register(self, manager: runtime.Manager) -> None:
        """Register the kubelet's controllers; needed before :meth:`instance_launched`."""
        self._manager = manager
        for c in self.controllers():
            manager.register(c)

    def _enqueue(self, controller: str, key: str, after: float = 0.0) -> None:
        if self._manager is None:
            raise RuntimeError("SimulatedKubelet.register(manager) was not called")
        self._manager.enqueue(controller, key, after)

    # --------------------------------------------------------------------------- cloud API

    def instance_launched(self, claim: Mapping[str, Any], instance: InstanceInfo) -> str:
        """Schedule the instance's Node registration; returns the name the Node will have.

        Raises :class:`karpy.api.errors.ValidationError` at once when ``claim`` is not a valid
        NodeClaim.
        """
        parsed = nodeclaim.NodeClaim.from_manifest(claim)
        address = self._new_address()
        name = instance.node_name or self._node_name(parsed.name, instance, address)
        self._launches[instance.provider_id] = _Launch(parsed, instance, name, address)
        latency = max(0.0, self.launch_latency + self.rng.uniform(-self.jitter, self.jitter))
        self._enqueue(NODE_CONTROLLER, _LAUNCH + instance.provider_id, latency)
        return name

    def instance_terminated(self, provider_id: str) -> None:
        """The instance is gone: cancel its registration, or fail its pods and delete its Node."""
        if self._launches.pop(provider_id, None) is not None:
            return
        for n in self.cluster.list("Node"):
            if (n.get("spec") or {}).get("providerID") != provider_id:
                continue
            name = interface.name_of(n)
            self._dead.add(name)
            for p in self.cluster.list("Pod", field_selector=f"spec.nodeName={name}"):
                if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    continue
                failed = copy.deepcopy(p)
                status = failed.setdefault("status", {})
                status.update(phase="Failed", reason="NodeLost",
                              message=f"The instance of node {name} was terminated")
                status["conditions"] = _replace_conditions(
                    status.get("conditions") or (), [self._condition("Ready", "False", "NodeLost")])
                with contextlib.suppress(errors.NotFound):
                    self.cluster.update_status(failed)
            with contextlib.suppress(errors.NotFound):
                self.cluster.delete("Node", name)

    def lose_registration(self, provider_id: str) -> bool:
        """The instance's Node will never register (a broken bootstrap); True if it was pending."""
        return self._launches.pop(provider_id, None) is not None

    def add_node(self, node: Mapping[str, Any]) -> dict[str, Any]:
        """Create a scenario's pre-existing node exactly as given."""
        for address in (node.get("status") or {}).get("addresses") or ():
            if address.get("type") == "InternalIP":
                self._used_addresses.add(str(address.get("address")))
        return self.cluster.create(copy.deepcopy(dict(node)))

    def pending_launches(self) -> dict[str, str]:
        """Provider id -> future node name, for instances whose Node is not registered yet."""
        return {pid: launch.node_name for pid, launch in self._launches.items()}

    # ------------------------------------------------------------------------------ naming

    def _new_address(self) -> str:
        while True:
            address = f"10.{self.rng.randrange(256)}.{self.rng.randrange(256)}.{self.rng.randrange(1, 255)}"
            if address not in self._used_addresses:
                self._used_addresses.add(address)
                return address

    def _node_name(self, claim_name: str, instance: InstanceInfo, address: str) -> str:
        provider = instance.provider
        if provider == "aws":
            region = self.region or region_of("aws", instance.zone) or "us-east-1"
            host = "ip-" + address.replace(".", "-")
            return f"{host}.ec2.internal" if region == "us-east-1" else f"{host}.{region}.compute.internal"
        if provider == "azure":
            vm = instance.provider_id.rstrip("/").rsplit("/", 1)[-1]
            if "/virtualMachines/" in instance.provider_id and vm:
                return vm.lower()
            return f"aks-{claim_name}"
        return claim_name

    # ------------------------------------------------------------------------------- nodes

    def _map_node(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        # Registration and removal matter; status churn does not (the kubelet's own timers
        # re-enqueue the node when it becomes Ready).
        return (interface.name_of(obj),) if event in (interface.ADDED, interface.DELETED) else ()

    def _reconcile_node(self, key: str) -> float | None:
        if key.startswith(_LAUNCH):
            self._register(key[len(_LAUNCH):])
        elif key.startswith(_READY):
            self._mark_ready(key[len(_READY):])
        elif key.startswith(_STARTUP):
            self._remove_startup_taints(key[len(_STARTUP):])
        else:
            self._sync_node(key)
        return None

    def _register(self, provider_id: str) -> None:
        launch = self._launches.pop(provider_id, None)
        if launch is None:
            return  # terminated before it registered
        claim = launch.claim
        try:
            self.cluster.create(self._build_node(launch, claim))
        except errors.AlreadyExists:
            return
        self._addresses[launch.node_name] = launch.address
        if claim.spec.startup_taints:
            self._startup[launch.node_name] = [t.to_dict() for t in claim.spec.startup_taints]
            self._enqueue(NODE_CONTROLLER, _STARTUP + launch.node_name, self.startup_taint_delay)
        if self.ready_delay > 0:
            self._enqueue(NODE_CONTROLLER, _READY + launch.node_name, self.ready_delay)

    def _build_node(self, launch: _Launch, claim: nodeclaim.NodeClaim) -> dict[str, Any]:
        inst = launch.instance
        name = launch.node_name
        node_labels: dict[str, str] = dict(inst.labels)
        # a NodeClaim karpy wrote has valid requirements; be lenient with hand-written ones
        with contextlib.suppress(ValueError):
            node_labels.update(
                requirements.Requirements.from_node_selector_requirements(claim.spec.requirements).labels())
        node_labels.update(claim.labels)
        for key, value in ((labels.INSTANCE_TYPE, inst.instance_type), (labels.ZONE, inst.zone),
                           (labels.CAPACITY_TYPE, inst.capacity_type)):
            if value:
                node_labels[key] = value
        node_labels.setdefault(labels.ARCH, "amd64")
        node_labels.setdefault(labels.OS, "linux")
        region = self.region or region_of(inst.provider, inst.zone)
        if region:
            node_labels.setdefault(labels.REGION, region)
        node_labels[labels.HOSTNAME] = name

        taints: list[dict[str, Any]] = []
        for t in (*claim.spec.taints, *claim.spec.startup_taints):
            d = t.to_dict()
            if not any(_same_taint(d, x) for x in taints):
                taints.append(d)
        extra = ([UNREGISTERED_TAINT] if inst.karpenter else []) + ([NOT_READY_TAINT] if self.ready_delay > 0 else [])
        taints.extend(dict(t) for t in extra if not any(_same_taint(t, x) for x in taints))

        ready = self.ready_delay <= 0
        now = self.clock.now()
        addresses = [{"type": "InternalIP", "address": launch.address}, {"type": "Hostname", "address": name}]
        if inst.provider == "aws":
            addresses.append({"type": "InternalDNS", "address": name})
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": node_labels},
            "spec": {"providerID": inst.provider_id, "taints": taints},
            "status": {
                "capacity": quantity.format_list(inst.capacity),
                "allocatable": quantity.format_list(inst.allocatable or inst.capacity),
                "conditions": [
                    self._condition("Ready", "True" if ready else "False",
                                    "KubeletReady" if ready else "KubeletNotReady", now),
                    self._condition("MemoryPressure", "False", "KubeletHasSufficientMemory", now),
                    self._condition("DiskPressure", "False", "KubeletHasNoDiskPressure", now),
                    self._condition("PIDPressure", "False", "KubeletHasSufficientPID", now),
                ],
                "addresses": addresses,
                "nodeInfo": {
                    "architecture": node_labels[labels.ARCH],
                    "operatingSystem": node_labels[labels.OS],
                    "kubeletVersion": self.kubelet_version,
                    "kubeProxyVersion": self.kubelet_version,
                    "containerRuntimeVersion": "containerd://1.7.22",
                    "osImage": _OS_IMAGES.get(inst.provider, "simulated"),
                },
            },
        }

    def _condition(self, type_: str, status: str, reason: str, now: float | None = None) -> dict[str, Any]:
        ts = clock_mod.rfc3339(self.clock.now() if now is None else now)
        return {"type": type_, "status": status, "reason": reason,
                "lastHeartbeatTime": ts, "lastTransitionTime": ts}

    def _mark_ready(self, name: str) -> None:
        try:
            node = self.cluster.get("Node", name)
        except errors.NotFound:
            return
        status = node.setdefault("status", {})
        status["conditions"] = _replace_conditions(status.get("conditions") or (),
                                                   [self._condition("Ready", "True", "KubeletReady")])
        node = self.cluster.update_status(node)
        taints = (node.get("spec") or {}).get("taints") or []
        kept = [t for t in taints if not _same_taint(t, NOT_READY_TAINT)]
        if len(kept) != len(taints):
            updated = copy.deepcopy(node)
            updated["spec"]["taints"] = kept
            self.cluster.update(updated)
        self._enqueue(NODE_CONTROLLER, name)  # start the pods waiting for it

    def _remove_startup_taints(self, name: str) -> None:
        startup = self._startup.get(name)
        if not startup:
            return
        try:
            node = self.cluster.get("Node", name)
        except errors.NotFound:
            self._startup.pop(name, None)
            return
        taints = (node.get("spec") or {}).get("taints") or []
        kept = [t for t in taints if not any(_same_taint(t, s) for s in startup)]
        if len(kept) != len(taints):
            node["spec"]["taints"] = kept
            self.cluster.update(node)  # a Conflict is retried by the runtime
        self._startup.pop(name, None)

    def _sync_node(self, name: str) -> None:
        pods = self.cluster.list("Pod", field_selector=f"spec.nodeName={name}")
        try:
            self.cluster.get("Node", name)
        except errors.NotFound:
            # pod garbage collection: pods bound to a node that no longer exists are deleted
            self._dead.discard(name)
            self._startup.pop(name, None)
            self._addresses.pop(name, None)
            for p in pods:
                with contextlib.suppress(errors.NotFound):
                    if interface.is_terminating(p):
                        self.cluster.update_status(pod_faults.stopped(p))  # force: no kubelet is left to wait for
                    else:
                        self.cluster.delete("Pod", interface.name_of(p), interface.namespace_of(p))
            return
        for p in pods:
            if self._wants_start(p):
                self._enqueue(POD_CONTROLLER, f"{interface.namespace_of(p)}/{interface.name_of(p)}")

    # -------------------------------------------------------------------------------- pods

    @staticmethod
    def _wants_start(pod: Mapping[str, Any]) -> bool:
        phase = (pod.get("status") or {}).get("phase", "Pending")
        return bool((pod.get("spec") or {}).get("nodeName")) and phase in ("Pending", "Unknown") \
            and not interface.is_terminating(pod)

    def _map_pod(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        if event == interface.DELETED or self._wants_start(obj) or pod_faults.lingering(obj):
            return (f"{interface.namespace_of(obj)}/{interface.name_of(obj)}",)
        return ()

    def _reconcile_pod(self, key: str) -> float | None:
        ns, _, name = key.partition("/")
        try:
            pod = self.cluster.get("Pod", name, ns)
        except errors.NotFound:
            self._pod_start.pop(key, None)
            return None
        if pod_faults.lingering(pod):
            self._pod_start.pop(key, None)
            end = pod_faults.grace_ends(pod)
            node_gone = not self.cluster.list("Node", field_selector=f"metadata.name={pod['spec'].get('nodeName')}")
            if self.clock.now() < end and not node_gone:  # pod garbage collection does not wait
                return end - self.clock.now()
            with contextlib.suppress(errors.NotFound):
                self.cluster.update_status(pod_faults.stopped(pod))
            return None
        if not self._wants_start(pod):
            self._pod_start.pop(key, None)
            return None
        node_name = str(pod["spec"]["nodeName"])
        if node_name in self._dead:
            return None
        try:
            node = self.cluster.get("Node", node_name)
        except errors.NotFound:
            return None  # started when the node registers
        if not any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (node.get("status") or {}).get("conditions") or ()):
            return None  # started when the node becomes ready
        now = self.clock.now()
        start = self._pod_start.setdefault(key, now + self.pod_start_delay)
        if now < start:
            return start - now
        self._pod_start.pop(key, None)
        if self.start_failure > 0 and self.failure_rng.random() < self.start_failure:
            self.cluster.update_status(pod_faults.start_failed(pod, self.clock.now()))
            self.injected["podStartFailure"] = self.injected.get("podStartFailure", 0) + 1
            return None
        self.cluster.update_status(self._running(pod, node))
        return None

    def _running(self, pod: dict[str, Any], node: Mapping[str, Any]) -> dict[str, Any]:
        ts = clock_mod.rfc3339(self.clock.now())
        addresses = (node.get("status") or {}).get("addresses") or ()
        host_ip = next((a.get("address") for a in addresses if a.get("type") == "InternalIP"), None) \
            or self._addresses.get(interface.name_of(node), "")
        status = pod.setdefault("status", {})
        status.pop("reason", None)
        status.pop("message", None)
        status.pop("nominatedNodeName", None)
        status["phase"] = "Running"
        status["startTime"] = ts
        if host_ip:
            status["hostIP"] = host_ip
            status["hostIPs"] = [{"ip": host_ip}]
        status["conditions"] = _replace_conditions(
            status.get("conditions") or (),
            [{"type": t, "status": "True", "lastTransitionTime": ts}
             for t in _POD_CONDITIONS])
        status["containerStatuses"] = [
            {"name": c.get("name", ""), "image": c.get("image", ""), "ready": True, "started": True,
             "restartCount": 0, "state": {"running": {"startedAt": ts}}}
            for c in (pod.get("spec") or {}).get("containers") or ()
        ]
        return pod
