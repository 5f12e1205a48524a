"""The simulation engine of ``karpy simulate``: karpy's controllers against a simulated world.

:class:`Simulation` wires one run together, all on one :class:`karpy.clock.VirtualClock`:

* the cluster - :class:`karpy.kube.memory.InMemoryCluster`;
* the cloud - :class:`karpy.cloudprovider.fake.provider.SimulatedCloud` with the scenario's
  catalog, region and zones, seen by karpy through :class:`karpy.simulator.cloud_bridge.CloudBridge`,
  which tells the simulated kubelet about every launch and termination (a launched instance registers
  as a Node after the launch latency; a terminated one takes its Node and pods with it);
* one :class:`karpy.controllers.runtime.Manager` running karpy's controllers
  (``karpy.operator.register_all``) and the world's: the simulated kubelet, the ReplicaSet,
  Deployment and DaemonSet controllers and the simulated kube-scheduler.

The scenario's objects are applied at time 0 (pre-existing Nodes through the kubelet); its steps
run at their times. The event loop jumps the clock to the earliest of: the Manager's next due
work, the next step, the next timeline sample, the next cloud event (a spot reclaim), and stops at
``until``. Every ``sample_interval`` virtual seconds it records a :class:`Sample` (nodes by
NodePool and by instance type, pending pods, NodeClaims, $/h).

A caller may rely on: one seed gives the same run - the same names, times, events and outputs,
byte for byte (nothing reads the wall clock; every random choice comes from a ``random.Random``
derived from the seed). :meth:`Simulation.run` returns a :class:`Result` with the final objects
(as the API returns them, sorted), the events in the order they happened, metrics and the
timeline. Problems a step meets at run time (a node to interrupt that does not exist...) are
recorded in ``Result.notes``, never raised.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from karpy import clock as clock_mod
from karpy import settings as settings_mod
from karpy.api import duration, labels, nodeclass, nodepool
from karpy.cloudprovider import errors as cp_errors
from karpy.cloudprovider.azure import nap
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.cloudprovider.fake import reservations as fake_reservations
from karpy.controllers import runtime
from karpy.kube import errors, interface, memory
from karpy.observability import logs
from karpy.observability import metrics as metrics_mod
from karpy.simulator import (
    cloud_bridge,
    csinodes,
    daemonsets,
    gcpolicy,
    history,
    kube_scheduler,
    kubelet,
    limits,
    pdb_status,
    provider_bridge,
    real_cloud,
    run_result,
    scenario,
    scenario_steps,
    statefulsets,
    volume_attachments,
    volumes,
    workloads,
)

Progress = Callable[[float, float], None]
"""``progress(virtual seconds done, virtual seconds in total)``."""

UNMANAGED = "(unmanaged)"

AUTOSCALERS = ("karpy", "cluster-autoscaler")
"""The NodePool column of nodes karpy does not own (pre-existing nodes)."""

_APPLY_ORDER = {
    "Namespace": 0, "EC2NodeClass": 1, "AKSNodeClass": 1, "NodePool": 2, "Node": 3,
    "PriorityClass": 4, "StorageClass": 4, "PersistentVolume": 4, "PersistentVolumeClaim": 5,
    "PodDisruptionBudget": 5, "DaemonSet": 6, "Deployment": 7, "ReplicaSet": 7, "StatefulSet": 7, "Pod": 8,
}


# ------------------------------------------------------------------------------------ results

Sample = run_result.Sample
Result = run_result.Result
"""Kept here too: :mod:`karpy.simulator.run_result`."""


# ------------------------------------------------------------------------------ karpy wiring


def register_karpy(manager: runtime.Manager, *, cluster: interface.Cluster, cloud: Any, clock: clock_mod.Clock,
                   settings: settings_mod.Settings, metrics: metrics_mod.Metrics) -> list[str]:
    """Register karpy's controllers with ``manager`` through the one composition root,
    :func:`karpy.operator.register_all` (as ``karpy controller`` does); the names of the controllers registered."""
    from karpy import operator

    before = set(manager.controllers)
    operator.register_all(manager, cluster, cloud, clock, settings, metrics=metrics)
    return sorted(set(manager.controllers) - before)


# ----------------------------------------------------------------------------------- the run


class Simulation:
    """One run of a scenario; see the module docstring."""

    def __init__(self, scn: scenario.Scenario, *, seed: int | None = None, until: float | None = None,
                 sample_interval: float | None = None, progress: Progress | None = None,
                 karpy: bool = True, scheduler_events: bool = True, autoscaler: str = "karpy",
                 notify: Callable[[str], None] | None = None) -> None:
        """``autoscaler``: ``"karpy"`` (karpy's controllers) or ``"cluster-autoscaler"`` (a model of Cluster
        Autoscaler over node groups, :mod:`karpy.simulator.cluster_autoscaler`, instead of karpy).
        ``notify`` hears when the run nears its pod or node limit (:mod:`karpy.simulator.limits`)."""
        self.scenario = scn
        self.seed = seed if seed is not None else (scn.seed if scn.seed is not None else 0)
        self.until = float(until if until is not None else scn.until)
        self.sample_interval = sample_interval or run_result.default_sample_interval(self.until)
        self.progress = progress
        self.limit_watch = limits.Watch(scn.limits, notify)
        rngs = random.Random(self.seed)
        seeds = [rngs.getrandbits(64) for _ in range(6)]
        self.clock = clock_mod.VirtualClock()
        logs.VIRTUAL_TIME.use(self.clock)  # `karpy simulate --logs` stamps lines with simulated time
        self.start = self.clock.now()
        self.cluster = memory.InMemoryCluster(self.clock, rng=random.Random(seeds[0]))
        self.manager = runtime.Manager(self.cluster, self.clock)
        self.cloud = fake_provider.SimulatedCloud(
            self.clock, random.Random(seeds[1]), catalog=scn.cloud.catalog, reserved_enis=scn.settings.reserved_enis,
            region=scn.cloud.region, zones=scn.cloud.zones or None, cluster_name=scn.cluster_name,
            node_classes=self._node_class, commitments=scn.cloud.commitments or scn.settings.commitments,
            reservations=fake_reservations.SimulatedReservations(
                [dataclasses.replace(r, end_time=None if r.end_time is None else self.start + r.end_time)
                 for r in scn.cloud.capacity_reservations],
                enabled=scn.settings.feature_gate("ReservedCapacity")),
            volume_limits=dict(scn.cloud.volume_limits))
        self.kubelet = kubelet.SimulatedKubelet(
            self.cluster, self.clock, random.Random(seeds[2]), launch_latency=scn.launch_latency,
            jitter=min(10.0, scn.launch_latency / 6), region=self.cloud.region if scn.cloud.catalog in
            ("aws", "azure") else "")
        if scn.faults.start_failure or scn.faults.graceful_termination:  # spec.faults.pods (opt-in)
            self.cluster.graceful_pods = scn.faults.graceful_termination
            self.kubelet.start_failure = scn.faults.start_failure
            self.kubelet.failure_rng = random.Random(seeds[2] ^ 0x5EED)
        self.bridge: cloud_bridge.CloudBridge | provider_bridge.ProviderBridge
        if scn.cloud.endpoint_url:  # the cloud's real provider against an endpoint; the cluster stays simulated
            self.bridge = real_cloud.bridge(scn, self.clock, self.cluster, self.kubelet)
        else:
            self.bridge = cloud_bridge.CloudBridge(self.cloud, self.kubelet)
        self.metrics = metrics_mod.Metrics(clock=self.clock)
        self.metrics.attach(cost=self.bridge.cost_per_hour)
        self.kube_scheduler = kube_scheduler.KubeScheduler(self.cluster, self.clock,
                                                           record_events=scheduler_events)
        if autoscaler not in AUTOSCALERS:
            raise ValueError(f"autoscaler must be one of {', '.join(AUTOSCALERS)}, not {autoscaler!r}")
        self.autoscaler = autoscaler
        self._karpy = karpy and autoscaler == "karpy"
        self.cluster_autoscaler: Any = None
        self._seeds = seeds
        self._events: dict[tuple[str, str], tuple[int, float, dict[str, Any]]] = {}
        self._event_seq = 0
        self._pods: dict[str, str] = {}
        self._fleet_revision = 0
        """Bumped by every Node or NodeClaim change: a sample recounts them only after one."""
        self._fleet: tuple[int, dict[str, int], dict[str, int], int] | None = None
        """(revision, nodes by NodePool, nodes by instance type, NodeClaims) as last counted."""
        self.history = history.NodeClaimHistory(self.clock.now, self.start)
        self.notes: list[dict[str, Any]] = []
        self.timeline: list[Sample] = []
        self.karpy_controllers: list[str] = []
        self._wired = False
        self.chaos: Any = None
        """The karpy process of a scenario with ``spec.faults`` (:mod:`karpy.simulator.chaos`)."""
        self._node_classes: dict[tuple[str, str], tuple[dict[str, Any], fake_provider.NodeClass]] = {}
        """(kind, name) -> (the stored object, its parse)."""

    # ------------------------------------------------------------------------------- wiring

    def _node_class(self, name: str) -> fake_provider.NodeClass | None:
        """The NodeClass called ``name``, parsed once per stored version."""
        for kind, parse in (("EC2NodeClass", nodeclass.EC2NodeClass.from_manifest),
                            ("AKSNodeClass", nodeclass.AKSNodeClass.from_manifest)):
            obj = self.cluster.stored(kind, name)
            if obj is None:
                continue
            key = (kind, name)
            cached = self._node_classes.get(key)
            if cached is None or cached[0] is not obj:  # stored objects change only by being replaced
                cached = (obj, parse(obj))
                self._node_classes[key] = cached
            return cached[1]
        return None

    def wire(self) -> None:
        """Register every controller and watch; apply the scenario's objects (time 0)."""
        if self._wired:
            return
        self._wired = True
        self.cluster.watch("Event", self._on_event)
        self.cluster.watch("NodeClaim", interface.Filtered(self.history.handle, interface.MESSAGES_ONLY))
        self.cluster.watch("Pod", interface.Filtered(self.history.pod, interface.MESSAGES_ONLY))
        self.cluster.watch("Pod", interface.Filtered(self._on_pod, interface.MESSAGES_ONLY))
        for kind in ("Node", "NodeClaim"):
            self.cluster.watch(kind, interface.Filtered(self._on_fleet, interface.MESSAGES_ONLY))
        self.cluster.watch("Pod", interface.Filtered(metrics_mod.PodStartupRecorder(self.metrics, self.clock).handle,
                                                     interface.MESSAGES_ONLY))
        if self._karpy and self.scenario.faults.any:  # karpy as a process that faults hit (spec.faults)
            from karpy.simulator import chaos

            self.chaos = chaos.KarpyProcess(self, self.scenario.faults, random.Random(self._seeds[5] ^ 0xFA17),
                                            self._register_faulty)
            self.karpy_controllers = self.chaos.start()
        elif self._karpy:
            self.karpy_controllers = register_karpy(self.manager, cluster=self.cluster, cloud=self.bridge,
                                                    clock=self.clock, settings=self.scenario.settings,
                                                    metrics=self.metrics)
        if self.autoscaler == "cluster-autoscaler":
            self.cluster_autoscaler = self._cluster_autoscaler()
            self.cluster_autoscaler.register(self.manager)
        self.kubelet.register(self.manager)
        workloads.ReplicaSetController(self.cluster, random.Random(self._seeds[3])).register(self.manager)
        workloads.DeploymentController(self.cluster).register(self.manager)
        statefulsets.StatefulSetController(self.cluster).register(self.manager)
        pdb_status.PdbStatusController(self.cluster, self.clock).register(self.manager)
        daemonsets.DaemonSetController(self.cluster, random.Random(self._seeds[4])).register(self.manager)
        self.kube_scheduler.register(self.manager)
        volumes.VolumeBinder(self.cluster).register(self.manager)
        volume_attachments.AttachDetachController(self.cluster, self.clock).register(self.manager)
        bridge = self.bridge
        csinodes.CSINodePublisher(self.cluster, lambda: bridge.get_instance_types(None)).register(self.manager)
        self._apply(self.scenario.objects, at_start=True)
        if self.scenario.cloud.nap_mode:  # AKS NAP: its own pools, unless the scenario brought its own
            nap.ensure(self.cluster)

    def _register_faulty(self, manager: runtime.Manager, cluster: Any, cloud: Any) -> list[str]:
        return register_karpy(manager, cluster=cluster, cloud=cloud, clock=self.clock,
                              settings=self.scenario.settings, metrics=self.metrics)

    def _cluster_autoscaler(self) -> Any:
        """Cluster Autoscaler over the scenario's node groups (``spec.clusterAutoscaler`` or derived)."""
        from karpy.simulator import ca_config, cluster_autoscaler

        pools = [nodepool.NodePool.from_manifest(o) for o in self.scenario.objects if o.get("kind") == "NodePool"]
        nodes = [o for o in self.scenario.objects if o.get("kind") == "Node"]
        raw = (self.scenario.raw.get("spec") or {}).get("clusterAutoscaler") if self.scenario.raw else None
        config = ca_config.read(raw, pools=pools, nodes=nodes, types=self.cloud.get_instance_types(None))
        return cluster_autoscaler.ClusterAutoscaler(self.cluster, self.clock, self.cloud, self.kubelet, self.bridge,
                                                    config, random.Random(self._seeds[5] ^ 0xCA))

    def _on_event(self, event: str, obj: dict[str, Any]) -> None:
        key = (interface.namespace_of(obj), interface.name_of(obj))
        if event == interface.DELETED:
            return  # keep what happened
        known = self._events.get(key)
        if known is None:
            self._event_seq += 1
            self._events[key] = (self._event_seq, self.clock.now() - self.start, obj)
        else:
            self._events[key] = (known[0], known[1], obj)

    def _on_pod(self, event: str, obj: dict[str, Any]) -> None:
        uid = interface.uid_of(obj)
        if event == interface.DELETED:
            self._pods.pop(uid, None)
        else:
            self._pods[uid] = str((obj.get("status") or {}).get("phase") or "Pending")

    def _on_fleet(self, _event: str, _obj: dict[str, Any]) -> None:
        self._fleet_revision += 1

    def _apply(self, objects: Sequence[Mapping[str, Any]], *, at_start: bool = False) -> None:
        ordered = sorted(enumerate(objects),
                         key=lambda io: (_APPLY_ORDER.get(str(io[1].get("kind")), 5), io[0]))
        for _, obj in ordered:
            kind = str(obj.get("kind"))
            try:
                if kind == "Node" and at_start:
                    self.kubelet.add_node(obj)
                else:
                    self._create_or_replace(dict(obj))
            except (errors.KubeError, ValueError) as exc:
                self.note(f"could not apply {kind}/{interface.name_of(obj)}: {exc}")

    def _create_or_replace(self, obj: dict[str, Any]) -> None:
        kind, ns, name = interface.meta_key(obj)
        try:
            current = self.cluster.get(kind, name, ns)
        except errors.NotFound:
            self.cluster.create(obj)
            return
        new = memory.copy_dict(obj)
        md = new.setdefault("metadata", {})
        md["resourceVersion"] = current["metadata"]["resourceVersion"]
        stored = self.cluster.update(new)
        if "status" in obj:
            self.cluster.update_status({**stored, "metadata": dict(stored["metadata"]), "status": obj["status"]})

    def note(self, message: str) -> None:
        self.notes.append({"t": round(self.clock.now() - self.start, 3), "message": message})

    # -------------------------------------------------------------------------------- steps

    def _run_step(self, step: scenario_steps.Step) -> None:
        a = step.action
        self.note(f"step {step.index}: {step.describe}")
        if isinstance(a, scenario_steps.Scale):
            try:
                self.cluster.patch(a.kind, a.name, {"spec": {"replicas": a.replicas}}, a.namespace)
            except errors.NotFound:
                self.note(f"step {step.index}: {a.kind} {a.namespace}/{a.name} does not exist")
        elif isinstance(a, scenario_steps.Apply):
            self._apply(a.objects)
        elif isinstance(a, scenario_steps.Delete):
            try:
                self.cluster.delete(a.kind, a.name, a.namespace)
            except errors.NotFound:
                self.note(f"step {step.index}: {a.kind} {a.name} does not exist")
        elif isinstance(a, scenario_steps.Interrupt):
            self._interrupt(step, a)
        else:
            until = self.clock.now() + a.duration
            self.bridge.mark_insufficient(a.instance_type, a.zone, a.capacity_type, until)

    def _interrupt(self, step: scenario_steps.Step, a: scenario_steps.Interrupt) -> None:
        if a.node:
            try:
                n = self.cluster.get("Node", a.node)
            except errors.NotFound:
                self.note(f"step {step.index}: node {a.node} does not exist")
                return
        else:
            matching = [o for o in self.cluster.objects("Node") if not interface.is_terminating(o)
                        and all(interface.labels_of(o).get(k) == v for k, v in a.node_selector)]
            if not matching:
                self.note(f"step {step.index}: no node matches the nodeSelector")
                return
            n = matching[0]
        self.note(f"step {step.index}: {a.kind} for node {interface.name_of(n)}")
        pid = str((n.get("spec") or {}).get("providerID") or "")
        try:
            self.bridge.interrupt(pid, a.kind)
        except (cp_errors.NodeClaimNotFoundError, ValueError) as exc:
            self.note(f"step {step.index}: cannot interrupt node {interface.name_of(n)}: {exc}")

    # -------------------------------------------------------------------------------- loop

    def run(self) -> Result:
        """Run to ``until`` and return the :class:`Result` (no automatic garbage collection meanwhile:
        :mod:`karpy.simulator.gcpolicy`)."""
        with gcpolicy.tuned():
            return self._run()

    def _run(self) -> Result:
        self.wire()
        end = self.start + self.until
        steps = list(self.scenario.steps)
        step_times = [self.start + s.at for s in steps]
        si = 0
        next_sample = self.start
        while True:
            now = self.clock.now()
            t = end
            due = self.manager.next_due()
            if due is not None:
                t = min(t, due)
            if si < len(steps):
                t = min(t, step_times[si])
            t = min(t, next_sample)
            reclaim = self.bridge.next_reclaim()
            if reclaim is not None:
                t = min(t, reclaim)
            if self.chaos is not None and (chaos_due := self.chaos.next_due()) is not None:
                t = min(t, chaos_due)
            if t > now:
                self.clock.set(t)
                now = t
            while si < len(steps) and step_times[si] <= now:
                self._run_step(steps[si])
                si += 1
            self.bridge.settle()
            self.manager.run_due()
            if self.chaos is not None:
                self.chaos.run_due()
            self.bridge.settle()
            if now >= next_sample:
                self.timeline.append(self.sample())
                next_sample = self.start + self.sample_interval * len(self.timeline)
                next_sample = min(next_sample, end) if now < end else next_sample
            if self.progress is not None:
                self.progress(now - self.start, self.until)
            if now >= end:
                break
        if not self.timeline or self.timeline[-1].t < self.until:
            self.timeline.append(self.sample())
        return self._result()

    def sample(self) -> Sample:
        by_pool, by_type, nodeclaims = self._fleet_counts()
        phases = list(self._pods.values())
        self.limit_watch.observe(len(phases), sum(by_pool.values()),
                                 duration.format_duration(self.clock.now() - self.start))
        return Sample(
            t=self.clock.now() - self.start, nodes_by_nodepool=by_pool, nodes_by_instance_type=by_type,
            pending_pods=phases.count("Pending"), running_pods=phases.count("Running"),
            nodeclaims=nodeclaims, cost_per_hour=self.bridge.cost_per_hour())

    def _fleet_counts(self) -> tuple[dict[str, int], dict[str, int], int]:
        """Nodes by NodePool and by instance type (in node name order of first appearance) and the
        NodeClaim count; counted again only when a Node or NodeClaim changed since the last sample."""
        fleet = self._fleet
        if fleet is None or fleet[0] != self._fleet_revision:
            by_pool: dict[str, int] = {}
            by_type: dict[str, int] = {}
            for n in self.cluster.objects("Node"):
                lb = interface.labels_of(n)
                pool = lb.get(labels.NODEPOOL) or UNMANAGED
                by_pool[pool] = by_pool.get(pool, 0) + 1
                it = lb.get(labels.INSTANCE_TYPE) or "(unknown)"
                by_type[it] = by_type.get(it, 0) + 1
            fleet = self._fleet = (self._fleet_revision, by_pool, by_type, len(self.cluster.objects("NodeClaim")))
        return dict(fleet[1]), dict(fleet[2]), fleet[3]

    # ------------------------------------------------------------------------------ result

    def _result(self) -> Result:
        from karpy.simulator import drains

        for message in drains.stuck(self.cluster, self.clock.now()):
            self.note(message)
        # the stored objects themselves, read-only: the store never changes them in place, so they stay
        # this run's final state even if the cluster went on (a copy would double the run's memory)
        objects = {
            "nodes": self.cluster.objects("Node"),
            "nodeclaims": self.cluster.objects("NodeClaim"),
            "pods": self.cluster.objects("Pod"),
            "nodepools": self.cluster.objects("NodePool"),
        }
        buffers = self.cluster.objects("CapacityBuffer")
        if buffers:  # their status: replicas and conditions (gate CapacityBuffer)
            objects["capacitybuffers"] = buffers
        involved: dict[tuple[Any, ...], dict[str, Any]] = {}  # one record per involved object, shared
        evs = [run_result.event_record(seq, t, obj, self.start, involved)
               for seq, t, obj in sorted(self._events.values(), key=lambda e: e[0])]
        return Result(
            scenario=self.scenario, seed=self.seed, until=self.until, start=self.start, objects=objects,
            events=evs, metrics=self.metrics_summary(), timeline=list(self.timeline), notes=list(self.notes),
            reconciles=self.manager.reconciles, cost_per_hour=self.bridge.cost_per_hour(),
            accrued_cost=self.bridge.accrued_cost(), karpy_controllers=list(self.karpy_controllers),
            reconcile_errors=[r for f in self._failures() for r in f.summary()],
            unexpected_errors=sum(f.unexpected for f in self._failures()),
            error_lines=[line for f in self._failures() for line in f.lines(self.start)],
            nodeclaims=self.history.records())

    def _failures(self) -> list[Any]:
        return [self.manager.failures, *([self.chaos.failures] if self.chaos is not None else [])]

    def _commitments(self) -> dict[str, Any]:
        """With commitments: the bill now (on-demand equivalent, paid, utilisation) and over time."""
        billing = getattr(self.cloud, "billing", None)
        if not billing:
            return {}
        over_time = [{"t": round(t - self.start, 3), **summary} for t, summary in billing.history]
        return {"commitments": {**billing.summary(), "overTime": over_time}}

    def metrics_summary(self) -> dict[str, Any]:
        """Karpenter's metrics (deterministic ones only) plus the simulator's own counts."""
        return {
            "simulator": {
                "virtualSeconds": self.until,
                "reconciles": self.manager.reconciles,
                "reconcileErrors": sum(f.total for f in self._failures()),
                **({"faultsInjected": self.chaos.counts(), "restarts": self.chaos.restarts}
                   if self.chaos is not None else {}),
                "instancesLaunched": self.bridge.launched,
                "instancesTerminated": self.bridge.terminated,
                "podsBoundByKubeScheduler": self.kube_scheduler.bound,
                "kubeSchedulerRuns": self.kube_scheduler.runs,
                "costPerHour": round(self.bridge.cost_per_hour(), 6),
                "accruedCost": round(self.bridge.accrued_cost(), 6),
                **self._commitments(),
            },
            "karpenter": run_result.karpenter_metrics(self.metrics.snapshot(run_result.reported)),
        }


def run(scn: scenario.Scenario, *, seed: int | None = None, until: float | None = None,
        progress: Progress | None = None) -> Result:
    """Shorthand: ``Simulation(scn, seed=seed, until=until, progress=progress).run()``."""
    return Simulation(scn, seed=seed, until=until, progress=progress).run()


