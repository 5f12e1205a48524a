"""karpy's controllers as a process that faults can hit, inside ``karpy simulate``.

When a scenario has ``spec.faults`` (:mod:`karpy.simulator.faultspec`), the engine runs karpy's
controllers through a :class:`KarpyProcess` instead of wiring them straight onto the world:

* they talk to the cluster through a :class:`karpy.kube.faults.FaultyCluster` and to the cloud through
  a :class:`karpy.cloudprovider.fake.faults.FaultyCloud`, on their own
  :class:`karpy.controllers.runtime.Manager`;
* a restart (at the scenario's moments, or every ``restarts.every``) is a crash: every watch of the
  process stops, its manager and every controller (with all in-memory state: cluster-state cache,
  unavailable offerings, in-flight launches, batches) is dropped, and a new process is built from
  what the cluster and the cloud say;
* node faults: a launched instance whose Node never registers (rate ``nodes.neverRegister``), and a
  random Ready node of karpy's going ``Ready=Unknown`` every ``nodes.notReadyEvery`` (the kubelet stops
  posting status; it stays so until the node is replaced);
* pod faults are the world's (the simulated kubelet's ``startFailure``, counted here as ``podStartFailure``;
  graceful termination in the in-memory cluster), set up by the engine;
* ``plan`` entries (:mod:`karpy.simulator.faultspec`) make one fault certain: from its moment the
  kind's rate is 1 on the process's cluster or cloud (or for the next launch, ``neverRegisters``)
  until that kind has fired, checked before and after every step of the process (so every call of
  the step it fired in gets it: a burst), and across restarts; then the scenario's rate is back.
  Nothing of the plan draws from the seed, so the random faults of a run with a plan are those of
  the run without it until the first planned one fires.

The world (kubelet, kube-scheduler, workload controllers, the simulated cloud) is not part of the
process and never restarts. :attr:`KarpyProcess.injected` counts every fault by name;
:attr:`KarpyProcess.failures` collects every reconcile failure across restarts.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels as wk
from karpy.api import nodeclaim
from karpy.cloudprovider.fake import faults as cloud_faults
from karpy.controllers import reconcile_errors, runtime
from karpy.kube import errors as kube_errors
from karpy.kube import faults as kube_faults
from karpy.kube import interface
from karpy.simulator import faultspec

MAX_START_ATTEMPTS = 10


class KarpyProcess:
    """See the module docstring. ``sim`` is the :class:`karpy.simulator.engine.Simulation`."""

    def __init__(self, sim: Any, faults: faultspec.Faults, rng: random.Random,
                 register: Any) -> None:
        self.sim = sim
        self.faults = faults
        self.rng = rng
        self.register = register
        self.clock: clock_mod.VirtualClock = sim.clock
        self.failures = reconcile_errors.ReconcileErrors()
        self.injected: dict[str, int] = {}
        self.restarts = 0
        self.manager: runtime.Manager | None = None
        self.kube: kube_faults.FaultyCluster | None = None
        self.cloud: cloud_faults.FaultyCloud | None = None
        self.controllers: list[str] = []
        start = self.clock.now()
        self._restart_times = [start + t for t in faults.restart_at]
        self._next_every = start + faults.restart_every if faults.restart_every else None
        self._next_not_ready = start + faults.not_ready_every if faults.not_ready_every else None
        self.not_ready_nodes: list[str] = []
        self._plan = [(start + at, name) for at, name in faults.plan]
        self._armed: dict[str, int] = {}
        """Planned fault name -> its count when it was armed (armed until the count grows)."""

    # ----------------------------------------------------------------------------- process

    def start(self) -> list[str]:
        """Build the process; a start that fails on an API error crashes and starts again (as a pod in
        CrashLoopBackOff would), up to :data:`MAX_START_ATTEMPTS` times, the last without faults."""
        for attempt in range(MAX_START_ATTEMPTS):
            quiet = attempt == MAX_START_ATTEMPTS - 1
            self.kube = kube_faults.FaultyCluster(self.sim.cluster, kube_faults.KubeFaults() if quiet else
                                                  self.faults.api, random.Random(self.rng.getrandbits(64)),
                                                  self.clock)
            self.cloud = cloud_faults.FaultyCloud(self.sim.bridge, self.faults.cloud,
                                                  random.Random(self.rng.getrandbits(64)), on_launched=self._launched)
            self.manager = runtime.Manager(self.kube, self.clock)
            self.manager.failures = self.failures
            try:
                self.controllers = self.register(self.manager, self.kube, self.cloud)
                if quiet:
                    self.kube.faults = self.faults.api
                return self.controllers
            except kube_errors.KubeError as exc:
                self.failures.record("startup", "process", exc, self.clock.now())
                self._merge_counts()
                self.kube.close()
                self.injected["crashOnStart"] = self.injected.get("crashOnStart", 0) + 1
        raise AssertionError("unreachable: the last start runs without faults")

    def _merge_counts(self) -> None:
        for src in (self.kube.injected if self.kube else {}, self.cloud.injected if self.cloud else {},
                    self.sim.kubelet.injected):
            for k, v in src.items():
                self.injected[k] = self.injected.get(k, 0) + v
            src.clear()

    def restart(self) -> None:
        """Crash and restart: drop every controller and its state, rebuild from cluster and cloud."""
        self._merge_counts()
        if self.kube is not None:
            self.kube.close()
        self.restarts += 1
        self.injected["restart"] = self.injected.get("restart", 0) + 1
        self.sim.note(f"karpy's controllers crashed and restarted (restart {self.restarts})")
        self.start()

    def counts(self) -> dict[str, int]:
        self._merge_counts()
        return dict(sorted(self.injected.items()))

    # --------------------------------------------------------------------------------- plan

    def _count_of(self, name: str) -> int:
        return self.injected.get(name, 0) + sum(
            src.get(name, 0) for src in (self.kube.injected if self.kube else {},
                                         self.cloud.injected if self.cloud else {}))

    def _arm_plan(self, now: float) -> None:
        """Arm the plan entries now due, disarm those that fired, and set the rates to match."""
        while self._plan and self._plan[0][0] <= now:
            _, name = self._plan.pop(0)
            if name not in self._armed:
                self._armed[name] = self._count_of(name)
                self.sim.note(f"planned fault {name}: armed until it fires")
        for name, before in list(self._armed.items()):
            if self._count_of(name) > before:
                del self._armed[name]
                self.sim.note(f"planned fault {name}: fired")
        forced: dict[str, dict[str, Any]] = {"api": {}, "cloud": {}}
        for name in self._armed:
            layer, attr = faultspec.PLANNABLE[name]
            if layer in forced:
                forced[layer][attr] = 1.0
        if self.kube is not None:
            self.kube.faults = dataclasses.replace(self.faults.api, **forced["api"])
        if self.cloud is not None:
            self.cloud.faults = dataclasses.replace(self.faults.cloud, **forced["cloud"])

    # ------------------------------------------------------------------------------- faults

    def _launched(self, claim: nodeclaim.NodeClaim) -> None:
        forced = "neverRegisters" in self._armed and self._count_of("neverRegisters") == self._armed["neverRegisters"]
        if (forced or (self.faults.never_register and self.rng.random() < self.faults.never_register)) and \
                self.sim.kubelet.lose_registration(claim.status.provider_id):
            self.injected["neverRegisters"] = self.injected.get("neverRegisters", 0) + 1

    def _not_ready(self) -> None:
        candidates = sorted(
            interface.name_of(n) for n in self.sim.cluster.objects("Node")
            if wk.NODEPOOL in interface.labels_of(n) and not interface.is_terminating(n)
            and any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (n.get("status") or {}).get("conditions") or ()))
        if not candidates:
            return
        name = self.rng.choice(candidates)
        try:
            node = self.sim.cluster.get("Node", name)
        except kube_errors.NotFound:
            return
        ts = clock_mod.rfc3339(self.clock.now())
        conditions = [c for c in (node.get("status") or {}).get("conditions") or () if c.get("type") != "Ready"]
        conditions.append({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                           "message": "Kubelet stopped posting node status.", "lastHeartbeatTime": ts,
                           "lastTransitionTime": ts})
        updated = dict(node)
        updated["status"] = {**(node.get("status") or {}), "conditions": conditions}
        self.sim.cluster.update_status(updated)
        self.not_ready_nodes.append(name)
        self.injected["nodeNotReady"] = self.injected.get("nodeNotReady", 0) + 1
        self.sim.note(f"node {name} stopped posting status (Ready=Unknown)")

    # ---------------------------------------------------------------------------------- loop

    def next_due(self) -> float | None:
        times = [t for t in (self.manager.next_due() if self.manager else None,
                             self.kube.next_relist() if self.kube else None,
                             self._restart_times[0] if self._restart_times else None,
                             self._plan[0][0] if self._plan else None,
                             self._next_every, self._next_not_ready) if t is not None]
        return min(times) if times else None

    def run_due(self) -> None:
        now = self.clock.now()
        restart = False
        while self._restart_times and self._restart_times[0] <= now:
            self._restart_times.pop(0)
            restart = True
        if self._next_every is not None and self._next_every <= now:
            self._next_every = now + (self.faults.restart_every or 0.0)
            restart = True
        if restart:
            self.restart()
        if self._next_not_ready is not None and self._next_not_ready <= now:
            self._next_not_ready = now + (self.faults.not_ready_every or 0.0)
            self._not_ready()
        if self._armed or (self._plan and self._plan[0][0] <= now):
            self._arm_plan(now)
        if self.kube is not None:
            self.kube.pump()
        if self.manager is not None:
            self.manager.run_due()
        if self._armed:
            self._arm_plan(now)
