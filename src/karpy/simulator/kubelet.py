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
  Kubernetes quantities (plus the extended resources the NodeClaim's status has and the instance type
  lacks, a NodeOverlay's ``capacity``, as a device plugin configured for them would advertise);
  ``nodeInfo`` and addresses. It is ``Ready`` at once with ``ready_delay=0``; otherwise ``Ready=False``
  with ``node.kubernetes.io/not-ready:NoSchedule`` until ``ready_delay`` has passed.
  ``startup_taint_delay`` after registration the startup taints are removed, as the daemon that owns
  them (a CNI agent, say) would.
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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy import clock as clock_mod
from karpy.api import nodeclaim
from karpy.controllers import runtime
from karpy.kube import errors, interface
from karpy.simulator import kubelet_objects, pod_faults

NODE_CONTROLLER = "simulator.kubelet.node"
POD_CONTROLLER = "simulator.kubelet.pod"

_LAUNCH = "launch:"
_READY = "ready:"
_STARTUP = "startup:"

UNREGISTERED_TAINT = kubelet_objects.UNREGISTERED_TAINT
NOT_READY_TAINT = kubelet_objects.NOT_READY_TAINT


InstanceInfo = kubelet_objects.InstanceInfo
"""Kept here too: :class:`karpy.simulator.kubelet_objects.InstanceInfo`."""
region_of = kubelet_objects.region_of


@dataclass
class _Launch:
    claim: nodeclaim.NodeClaim
    instance: InstanceInfo
    node_name: str
    address: str


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
        self._pods_seen: dict[str, dict[str, Any]] = {}
        """Pods that want to start or linger, as the watch last delivered them (shared, read-only)."""
        self._nodes_seen: dict[str, dict[str, Any]] = {}
        """Nodes as the watch last delivered them (shared, read-only)."""
        self._node_pid: dict[str, str] = {}
        """Node name -> its ``spec.providerID``, as the watch last delivered it."""
        self._nodes_by_pid: dict[str, dict[str, None]] = {}
        """``spec.providerID`` -> the names of the Nodes that carry it (in the order they appeared)."""
        self.start_failure = 0.0
        """Rate at which a bound pod fails to start (``spec.faults.pods.startFailure``)."""
        self.failure_rng = random.Random(0)
        self.injected: dict[str, int] = {}
        """Faults injected by name (``podStartFailure``)."""

    # ------------------------------------------------------------------------------ wiring

    def controllers(self) -> list[runtime.Controller]:
        return [
            runtime.Controller(NODE_CONTROLLER, self._reconcile_node, [("Node", self._map_node)]),
            runtime.Controller(POD_CONTROLLER, self._reconcile_pod, [("Pod", runtime.only(self._map_pod))]),
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

    def instance_launched(self, claim: Mapping[str, Any] | nodeclaim.NodeClaim, instance: InstanceInfo) -> str:
        """Schedule the instance's Node registration; returns the name the Node will have.

        ``claim``: the launched NodeClaim, as its model (no render and parse back) or its manifest;
        raises :class:`karpy.api.errors.ValidationError` at once when a manifest is not a valid NodeClaim.
        """
        parsed = claim if isinstance(claim, nodeclaim.NodeClaim) else nodeclaim.NodeClaim.from_manifest(claim)
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
        for name in self._node_names(provider_id):
            self._dead.add(name)
            for p in self.cluster.list("Pod", field_selector=f"spec.nodeName={name}"):
                if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    continue
                failed = copy.deepcopy(p)
                status = failed.setdefault("status", {})
                status.update(phase="Failed", reason="NodeLost",
                              message=f"The instance of node {name} was terminated")
                status["conditions"] = kubelet_objects.replace_conditions(
                    status.get("conditions") or (), [self._condition("Ready", "False", "NodeLost")])
                with contextlib.suppress(errors.NotFound):
                    self.cluster.update_status(failed)
            with contextlib.suppress(errors.NotFound):
                self.cluster.delete("Node", name)

    def _node_names(self, provider_id: str) -> list[str]:
        """The Nodes whose ``spec.providerID`` is ``provider_id``: from the watch's index once registered
        (no scan of every Node per termination), else from a list."""
        if self._manager is not None:
            return list(self._nodes_by_pid.get(provider_id, ()))
        return [interface.name_of(n) for n in self.cluster.list("Node")
                if (n.get("spec") or {}).get("providerID") == provider_id]

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
        name = interface.name_of(obj)
        pid = "" if event == interface.DELETED else str((obj.get("spec") or {}).get("providerID") or "")
        before = self._node_pid.get(name)
        if before is not None and before != pid:
            names = self._nodes_by_pid.get(before)
            if names is not None:
                names.pop(name, None)
                if not names:
                    del self._nodes_by_pid[before]
        if pid:
            self._node_pid[name] = pid
            self._nodes_by_pid.setdefault(pid, {})[name] = None
        else:
            self._node_pid.pop(name, None)
        if event == interface.DELETED:
            self._nodes_seen.pop(name, None)
        else:
            self._nodes_seen[name] = obj
        return (name,) if event in (interface.ADDED, interface.DELETED) else ()

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
            stored = self.cluster.get("NodeClaim", claim.name)
        except errors.KubeError:
            stored = None
        try:
            self.cluster.create(kubelet_objects.build_node(
                kubelet_objects.with_device_plugins(launch.instance, stored), claim, launch.node_name,
                launch.address, region=self.region, ready_delay=self.ready_delay, now=self.clock.now(),
                kubelet_version=self.kubelet_version))
        except errors.AlreadyExists:
            return
        self._addresses[launch.node_name] = launch.address
        if claim.spec.startup_taints:
            self._startup[launch.node_name] = [t.to_dict() for t in claim.spec.startup_taints]
            self._enqueue(NODE_CONTROLLER, _STARTUP + launch.node_name, self.startup_taint_delay)
        if self.ready_delay > 0:
            self._enqueue(NODE_CONTROLLER, _READY + launch.node_name, self.ready_delay)

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
        status["conditions"] = kubelet_objects.replace_conditions(status.get("conditions") or (),
                                                   [self._condition("Ready", "True", "KubeletReady")])
        node = self.cluster.update_status(node)
        taints = (node.get("spec") or {}).get("taints") or []
        kept = [t for t in taints if not kubelet_objects.same_taint(t, NOT_READY_TAINT)]
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
        kept = [t for t in taints if not any(kubelet_objects.same_taint(t, s) for s in startup)]
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
        key = f"{interface.namespace_of(obj)}/{interface.name_of(obj)}"
        if event != interface.DELETED and (self._wants_start(obj) or pod_faults.lingering(obj)):
            self._pods_seen[key] = obj
            return (key,)
        self._pods_seen.pop(key, None)
        return (key,) if event == interface.DELETED else ()

    def _stored_pod(self, key: str) -> dict[str, Any] | None:
        """The pod as the watch last saw it (shared, read-only); read from the cluster when untracked."""
        pod = self._pods_seen.get(key)
        if pod is None:
            ns, _, name = key.partition("/")
            try:
                pod = self.cluster.get("Pod", name, ns)
            except errors.NotFound:
                return None
        return pod

    def _stored_node(self, name: str) -> dict[str, Any] | None:
        node = self._nodes_seen.get(name)
        if node is None:
            try:
                node = self.cluster.get("Node", name)
            except errors.NotFound:
                return None
        return node

    def _reconcile_pod(self, key: str) -> float | None:
        pod = self._stored_pod(key)
        if pod is None:
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
        node = self._stored_node(node_name)
        if node is None:
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
        addresses = (node.get("status") or {}).get("addresses") or ()
        host_ip = next((a.get("address") for a in addresses if a.get("type") == "InternalIP"), None) \
            or self._addresses.get(node_name, "")
        status = kubelet_objects.running_status(pod, str(host_ip), now)
        with contextlib.suppress(errors.NotFound):
            self.cluster.patch_status("Pod", interface.name_of(pod), {"status": status}, interface.namespace_of(pod))
        return None
