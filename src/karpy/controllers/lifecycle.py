"""The NodeClaim lifecycle: launch, registration, initialization and liveness, as Karpenter v1 does.

One reconcile per NodeClaim (key: its name), triggered by NodeClaim events and by events of the
Node that has the NodeClaim's provider ID. NodeClaims being deleted belong to
:mod:`karpy.controllers.termination`. Steps, each written back before the next:

1. **Launch** (no ``status.providerID``): ``cloud.create``. On success the NodeClaim gets the
   cloud's labels, the single-valued requirement labels and its own labels (its own win), the
   cloud's annotations, ``status.providerID / imageID / capacity / allocatable`` and
   ``Launched=True``; ``karpenter_nodeclaims_launched_total`` counts it and the optional
   ``on_launched(nodeclaim)`` hook is called (the simulator starts its kubelet there).
   ``InsufficientCapacityError``: every offering it names goes into the shared
   :class:`~karpy.controllers.offerings.UnavailableOfferings` cache, a Warning
   ``InsufficientCapacityError`` event is published and the NodeClaim is deleted, so the
   provisioner plans its pods again on other offerings. ``NodeClassNotReadyError`` (event
   ``NodeClassNotReady``) and other retryable errors: ``Launched=False`` and a retry with
   exponential backoff (1 s doubling, at most 60 s). A non-retryable error: Warning event
   ``LaunchFailed`` and the NodeClaim is deleted. A launch that succeeded but whose status write
   failed is remembered by uid and never launched twice. The lookup of an instance launched before,
   ``create`` and the two writes that record the launch are one op on the executor seam
   (:mod:`karpy.controllers.launch_record`): inline in the simulator, on the pool in a real cluster,
   where the loop only counts, logs and hooks the outcome. A launch written whose watch event has
   not arrived yet is not looked up again for :data:`RECORDED_WAIT` seconds.
2. **Registration** (a Node with the same provider ID exists): the Node gets the NodeClaim's labels
   and annotations (the NodeClaim's win, so a template ``karpenter.sh/do-not-disrupt`` protects it),
   ``karpenter.sh/registered=true``, the ``karpenter.sh/termination`` finalizer and an
   ownerReference to the NodeClaim; the ``karpenter.sh/unregistered`` taint is removed (the
   NodeClaim's taints and startup taints are added if missing at that moment). The NodeClaim gets
   ``status.nodeName`` and ``Registered=True``; ``karpenter_nodeclaims_registered_total`` and
   ``karpenter_nodes_created_total`` count it. These writes, and initialization's, are one op each on
   the executor seam (:mod:`karpy.controllers.registration_writes`), as a launch's are: the lifecycle
   writes nothing else to the NodeClaim while one is in flight, takes its outcome on the loop when it
   finishes (whatever the cache shows by then), and does not redo a step whose writes the watch has
   not shown yet.
3. **Initialization**: the Node is Ready, none of the NodeClaim's startup taints and no ephemeral
   taint (not-ready, unreachable, unregistered, uninitialized) is left, and every extended resource
   the NodeClaim requests has allocatable > 0. Then the Node gets ``karpenter.sh/initialized=true``
   and the NodeClaim ``Initialized=True`` and ``Ready=True``.
4. **Liveness**: not launched within ``settings.launch_ttl`` or not registered within
   ``settings.registration_ttl`` of its creation, the NodeClaim is deleted (Warning event
   ``LaunchTimeout`` / ``RegistrationTimeout``, ``karpenter_nodeclaims_disrupted_total{reason=
   "launch_timeout" | "registration_timeout"}``, the ``on_liveness_failure`` hook: NodePool health).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from karpy import clock as clock_mod
from karpy import settings as settings_mod
from karpy.api import labels as wk
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import quantity
from karpy.cloudprovider import errors as cp_errors
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import (
    claim_status,
    cloudcalls,
    launch_idempotency,
    launch_record,
    ownership,
    registration_writes,
    runtime,
    state,
)
from karpy.controllers import offerings as offerings_mod
from karpy.kube import errors as kube_errors
from karpy.kube import events, interface
from karpy.observability import logs
from karpy.observability import metrics as metrics_mod
from karpy.provisioning import scheduler

log = logging.getLogger("karpy.controllers.lifecycle")

NAME = "nodeclaim.lifecycle"
BASE_BACKOFF = 1.0
MAX_BACKOFF = 60.0
LAUNCH, REGISTER, INITIALIZE = "create", "register", "initialize"
"""The lifecycle's steps whose writes run as one op each (the op id is ``<step>/<uid>``)."""
RECORDED_WAIT = 10.0
"""Seconds a launch written onto its NodeClaim waits for the watch to show it before it is looked up again."""
WELL_KNOWN_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})

REASON_ICE = "InsufficientCapacityError"
REASON_NODECLASS_NOT_READY = "NodeClassNotReady"
REASON_LAUNCH_FAILED = "LaunchFailed"
REASON_LAUNCH_TIMEOUT = "LaunchTimeout"
REASON_REGISTRATION_TIMEOUT = "RegistrationTimeout"
REASON_INVALID = "InvalidNodeClaim"
LaunchHook = Callable[[dict[str, Any]], None]


def _started_already() -> dict[str, Any]:
    """The function of an op taken over once started: never run (the op is in flight or finished)."""
    raise AssertionError("a lifecycle write op was taken over but had not been started")


class Lifecycle:
    """See the module docstring. Register :meth:`controller` with a Manager."""

    def __init__(self, cluster: interface.Cluster, cluster_state: state.ClusterState,
                 cloud: cp_interface.CloudProvider, clock: clock_mod.Clock,
                 settings: settings_mod.Settings, recorder: events.EventRecorder,
                 metrics: metrics_mod.Metrics, offerings: offerings_mod.UnavailableOfferings,
                 on_launched: LaunchHook | None = None, calls: cloudcalls.CloudCalls | None = None) -> None:
        self.cluster = cluster
        self.calls: cloudcalls.CloudCalls = calls if calls is not None else cloudcalls.Inline()
        self.state = cluster_state
        self.cloud = cloud
        self.clock = clock
        self.settings = settings
        self.recorder = recorder
        self.metrics = metrics
        self.offerings = offerings
        self.on_launched = on_launched
        self.on_liveness_failure: LaunchHook | None = None  # a NodeClaim deleted for a launch/registration timeout
        self._launched: dict[str, nodeclaim_mod.NodeClaim] = {}
        self._attempts: dict[str, int] = {}
        self._tried: set[str] = set()
        """NodeClaims this process called ``create`` for (launch idempotency looks before trying again)."""
        self._on_written: dict[tuple[str, str], Callable[[], None]] = {}
        """(step, NodeClaim name) -> what follows the step's writes in flight (counting, logging)."""
        self._written: dict[tuple[str, str], tuple[str, float]] = {}
        """(step, NodeClaim name) -> (uid, when) of a step's writes whose watch event has not been seen yet."""

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [("NodeClaim", self._map_claim), ("Node", self._map_node)])

    def _map_claim(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        if event == interface.DELETED or interface.is_terminating(obj):
            return ()
        return (interface.name_of(obj),)

    def _map_node(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        if event == interface.DELETED:
            return ()
        node_labels = interface.labels_of(obj)
        if node_labels.get(wk.INITIALIZED) == "true" and node_labels.get(wk.REGISTERED) == "true":
            return ()
        for ref in interface.owner_references(obj):
            if ref.get("kind") == "NodeClaim":
                return (str(ref.get("name")),)
        claim = self.state.nodeclaim_name_for_provider_id(str((obj.get("spec") or {}).get("providerID") or ""))
        return (claim,) if claim else ()

    # ------------------------------------------------------------------------------ reconcile

    def reconcile(self, name: str) -> float | None:
        obj = self.state.raw("NodeClaim", name)
        if obj is None:
            self._forget(name)
            return None
        if interface.is_terminating(obj):
            return None
        claim = self.state.nodeclaim(name)
        if claim is None:  # unparsable: say so on the object, once per version (events aggregate)
            try:
                self.recorder.publish(obj, events.WARNING, REASON_INVALID,
                                      f"NodeClaim {name} cannot be read: {self.state.parse_error('NodeClaim', name)}")
            except Exception as exc:
                log.warning("lifecycle: cannot publish %s on NodeClaim %s: %s", REASON_INVALID, name, exc)
            return None
        if not interface.has_finalizer(obj, wk.FINALIZER_TERMINATION):
            finalizers = [*(obj["metadata"].get("finalizers") or ()), wk.FINALIZER_TERMINATION]
            self.cluster.patch("NodeClaim", name, {"metadata": {
                "finalizers": finalizers, "resourceVersion": obj["metadata"]["resourceVersion"]}})
        uid = claim.metadata.uid
        if not claim.status.provider_id or self.calls.pending(f"{LAUNCH}/{uid}"):
            return self._launch(claim)  # a launch, or the outcome of one in flight (the cache may show it already)
        for step in (REGISTER, INITIALIZE):
            if self.calls.pending(f"{step}/{uid}"):
                return self._take_writes(step, claim)
        self._written.pop((LAUNCH, name), None)
        if not claim.is_true(nodeclaim_mod.LAUNCHED):
            self._write_status(name, lambda s, now: claim_status.set_condition(s, nodeclaim_mod.LAUNCHED, "True", now))
        if not claim.is_true(nodeclaim_mod.REGISTERED):
            return self._register(name)
        self._written.pop((REGISTER, name), None)
        if not claim.is_true(nodeclaim_mod.INITIALIZED):
            return self._initialize(name)
        self._written.pop((INITIALIZE, name), None)
        return None

    def _forget(self, name: str) -> None:
        for uid in [u for u, c in self._launched.items() if c.name == name]:
            del self._launched[uid]
        self._attempts.pop(name, None)
        self._tried.discard(name)
        for step in (LAUNCH, REGISTER, INITIALIZE):
            self._written.pop((step, name), None)
            self._on_written.pop((step, name), None)

    def _created(self, claim: nodeclaim_mod.NodeClaim) -> float:
        created = claim.metadata.creation_timestamp
        return self.clock.now() if created is None else created

    def _unseen(self, step: str, claim: nodeclaim_mod.NodeClaim) -> float | None:
        """Seconds to wait for the watch to show ``step``'s writes for ``claim`` (made by this process and
        handed over), or ``None`` when there are none, or they were made :data:`RECORDED_WAIT` seconds ago."""
        written = self._written.get((step, claim.name))
        if written is None or written[0] != claim.metadata.uid:
            return None
        elapsed = self.clock.now() - written[1]
        return RECORDED_WAIT - elapsed if elapsed < RECORDED_WAIT else None

    def _run_writes(self, step: str, claim: nodeclaim_mod.NodeClaim, fn: Callable[[], dict[str, Any]],
                    done: Callable[[], None]) -> dict[str, Any] | None:
        """Run ``step``'s writes for ``claim`` on the executor seam: the NodeClaim as stored, ``None`` while
        in flight (the completion requeues the NodeClaim and :meth:`_take_writes` finishes it, whatever the
        cache shows by then); the writes' error is raised here. ``done()`` (counting, logging) follows them."""
        self._on_written[(step, claim.name)] = done
        outcome = self.calls.call(f"{step}/{claim.metadata.uid}", fn, (NAME, claim.name))
        return None if outcome is None else self._finish(step, claim, outcome)

    def _finish(self, step: str, claim: nodeclaim_mod.NodeClaim, outcome: cloudcalls.Outcome[Any]) -> dict[str, Any]:
        done = self._on_written.pop((step, claim.name), None)
        stored: dict[str, Any] = outcome.result()
        self._written[(step, claim.name)] = (claim.metadata.uid, self.clock.now())
        if done is not None:
            done()
        return stored

    def _take_writes(self, step: str, claim: nodeclaim_mod.NodeClaim) -> float | None:
        """Finish ``step``'s writes started by :meth:`_run_writes` (``None`` while still in flight)."""
        outcome = self.calls.call(f"{step}/{claim.metadata.uid}", _started_already, (NAME, claim.name))
        if outcome is None:
            return None
        self._finish(step, claim, outcome)
        return self._initialize(claim.name) if step == REGISTER else None

    def _write_status(self, name: str, mutate: Callable[[dict[str, Any], float], None]) -> dict[str, Any]:
        """Mutate the NodeClaim's status and write it (:func:`claim_status.write`)."""
        return claim_status.write(self.cluster, self.clock, self.state.raw("NodeClaim", name), name, mutate)


    # --------------------------------------------------------------------------------- launch

    def _launch(self, claim: nodeclaim_mod.NodeClaim) -> float | None:
        now = self.clock.now()
        uid = claim.metadata.uid
        waiting = self._unseen(LAUNCH, claim)
        if waiting is not None:
            return waiting
        launched = self._launched.get(uid)
        deadline = self._created(claim) + self.settings.launch_ttl
        op = "create/" + uid
        if launched is None and now >= deadline and not self.calls.pending(op):
            launched = launch_idempotency.existing(self.cloud, claim, now, retry=claim.name in self._tried)
            if launched is None:
                self._delete_for_timeout(claim, REASON_LAUNCH_TIMEOUT, "launch_timeout",
                                         f"NodeClaim {claim.name} did not launch within "
                                         f"{self.settings.launch_ttl:g}s of its creation")
                return None
        if launched is None:
            retry = claim.name in self._tried
            self._tried.add(claim.name)
            cached = self.state.raw("NodeClaim", claim.name)
            outcome = self.calls.call(op, lambda: launch_record.launch(
                self.cluster, self.clock, self.cloud, claim, cached, retry=retry, now=now, create=lambda: (
                    self.metrics.timed(NAME, "Create", self.cloud.name, lambda: self.cloud.create(claim)))),
                (NAME, claim.name))
            if outcome is None:
                return None  # in flight: its completion requeues this NodeClaim
            result = outcome.result()
            if result.list_error is not None:
                raise result.list_error
            if result.launched is None:
                assert result.error is not None
                return self._create_failed(claim, result.error, deadline)
            if result.error is not None:  # the instance runs; its record is written again next time
                self._launched[uid] = result.launched
                raise result.error
            launched, stored = result.launched, result.stored or {}
        else:
            stored = launch_record.write(self.cluster, self.clock, claim, launched,
                                         self.state.raw("NodeClaim", claim.name))
        self._written[(LAUNCH, claim.name)] = (uid, now)
        self._launch_recorded(claim, launched, stored)
        self._launched.pop(uid, None)
        self._attempts.pop(claim.name, None)
        return self._register(claim.name)

    def _create_failed(self, claim: nodeclaim_mod.NodeClaim, exc: Exception, deadline: float) -> float | None:
        if not isinstance(exc, cp_errors.InsufficientCapacityError):
            return self._launch_failed(claim, exc, deadline)
        self.metrics.cloud_error(NAME, "Create", self.cloud.name, exc)
        for o in exc.offerings:
            self.metrics.instance_launch_failures.labels(
                getattr(o, "zone", ""), "", getattr(o, "capacity_type", ""), "InsufficientCapacity").inc()
        self.offerings.mark_unavailable(exc.offerings)
        log.warning("lifecycle: NodeClaim %s: %s", claim.name, exc)
        self._event(claim, events.WARNING, REASON_ICE,
                    f"NodeClaim {claim.name} event: {claim_status.truncate(str(exc))}")
        self._delete(claim.name)
        return None

    def _launch_failed(self, claim: nodeclaim_mod.NodeClaim, exc: Exception, deadline: float) -> float | None:
        self.metrics.cloud_error(NAME, "Create", self.cloud.name, exc)
        message = claim_status.truncate(str(exc) or type(exc).__name__)
        retryable = cp_errors.is_retryable(exc) or not isinstance(exc, cp_errors.CloudProviderError)
        if isinstance(exc, cp_errors.NodeClassNotReadyError):
            self._event(claim, events.WARNING, REASON_NODECLASS_NOT_READY, f"NodeClaim {claim.name} event: {message}")
        if not retryable:
            log.warning("lifecycle: NodeClaim %s cannot launch: %s", claim.name, message)
            self._event(claim, events.WARNING, REASON_LAUNCH_FAILED, f"NodeClaim {claim.name} event: {message}")
            self._delete(claim.name)
            return None
        reason = str(getattr(exc, "reason", "") or REASON_LAUNCH_FAILED)
        with contextlib.suppress(kube_errors.NotFound):
            self._write_status(claim.name, lambda s, now: claim_status.set_condition(
                s, nodeclaim_mod.LAUNCHED, "False", now, reason, message))
        attempts = self._attempts.get(claim.name, 0)
        self._attempts[claim.name] = attempts + 1
        backoff = min(MAX_BACKOFF, BASE_BACKOFF * float(2 ** min(attempts, 16)))
        log.info("lifecycle: launching NodeClaim %s failed (%s), retrying in %.0fs", claim.name, message, backoff)
        return max(0.0, min(backoff, deadline - self.clock.now()))

    def _launch_recorded(self, claim: nodeclaim_mod.NodeClaim, launched: nodeclaim_mod.NodeClaim,
                         stored: dict[str, Any]) -> None:
        """Count and log a launch written onto its NodeClaim; call the ``on_launched`` hook."""
        pool = claim.nodepool_name or ""
        self.metrics.nodeclaims_launched.labels(pool).inc()
        log.info("launched nodeclaim", extra=logs.fields(NAME, NodeClaim=claim.name, NodePool=pool or None, **{
            "provider-id": launched.status.provider_id, "instance-type": launched.labels.get(wk.INSTANCE_TYPE),
            "zone": launched.labels.get(wk.ZONE), "capacity-type": launched.labels.get(wk.CAPACITY_TYPE),
            "allocatable": quantity.format_list(launched.status.allocatable)}))
        if self.on_launched is not None:
            try:
                self.on_launched(stored)
            except Exception:
                log.exception("lifecycle: on_launched hook failed for NodeClaim %s", claim.name)

    # --------------------------------------------------------------------------- registration

    def _register(self, name: str) -> float | None:
        claim = self.state.nodeclaim(name)
        if claim is None:
            return None
        waiting = self._unseen(REGISTER, claim)
        if waiting is not None:
            return waiting
        node_name = self.state.node_name_for_provider_id(claim.status.provider_id)
        if node_name is None:
            now = self.clock.now()
            deadline = self._created(claim) + self.settings.registration_ttl
            if now >= deadline:
                self._delete_for_timeout(claim, REASON_REGISTRATION_TIMEOUT, "registration_timeout",
                                         f"NodeClaim {claim.name} did not register a node within "
                                         f"{self.settings.registration_ttl:g}s of its creation")
                return None
            return deadline - now
        node = self.state.raw("Node", node_name)
        if node is None:
            node = self.cluster.get("Node", node_name)
        if not ownership.may_adopt(node, claim.nodepool_name):  # never take a Node karpy did not launch
            self._event(claim, events.WARNING, ownership.REASON_FOREIGN_NODE,
                        f"Node {node_name} has provider ID {claim.status.provider_id} but was not launched by "
                        "karpy; not registering it")
            deadline = self._created(claim) + self.settings.registration_ttl
            if self.clock.now() >= deadline:
                self._delete_for_timeout(claim, REASON_REGISTRATION_TIMEOUT, "registration_timeout",
                                         f"NodeClaim {claim.name} did not register a node within "
                                         f"{self.settings.registration_ttl:g}s of its creation")
                return None
            return deadline - self.clock.now()
        claim_obj = self.state.raw("NodeClaim", name)

        def registered() -> None:
            pool = claim.nodepool_name or ""
            self.metrics.nodeclaims_registered.labels(pool).inc()
            self.metrics.nodes_created.labels(pool, claim.labels.get(wk.ZONE, "")).inc()
            log.info("registered nodeclaim", extra=logs.fields(NAME, NodeClaim=name, NodePool=pool or None,
                                                               Node=node_name))

        if self._run_writes(REGISTER, claim, lambda: registration_writes.register(
                self.cluster, self.clock, node, claim, claim_obj), registered) is None:
            return None  # in flight
        return self._initialize(name)

    # ------------------------------------------------------------------------- initialization

    def _initialize(self, name: str) -> float | None:
        claim = self.state.nodeclaim(name)
        if claim is None or not claim.status.node_name:
            return None
        waiting = self._unseen(INITIALIZE, claim)
        if waiting is not None:
            return waiting
        node = self.state.node(claim.status.node_name)
        if node is None or not self._initialized(claim, node):
            return None
        label, claim_obj = node.labels.get(wk.INITIALIZED) != "true", self.state.raw("NodeClaim", name)

        def initialized() -> None:
            self.metrics.nodeclaims_initialized.labels(claim.nodepool_name or "").inc()
            log.info("initialized nodeclaim", extra=logs.fields(
                NAME, NodeClaim=name, NodePool=claim.nodepool_name, Node=node.name,
                allocatable=quantity.format_list(node.allocatable)))

        self._run_writes(INITIALIZE, claim, lambda: registration_writes.initialize(
            self.cluster, self.clock, node.name, label, name, claim_obj), initialized)
        return None

    @staticmethod
    def _initialized(claim: nodeclaim_mod.NodeClaim, node: Any) -> bool:
        if not node.ready:
            return False
        for t in node.taints:
            if t.key in scheduler.EPHEMERAL_TAINTS:
                return False
            if any(s.key == t.key and s.effect == t.effect for s in claim.spec.startup_taints):
                return False
        for res, amount in claim.spec.resources_requests.items():
            if res not in WELL_KNOWN_RESOURCES and amount > 0 and node.allocatable.get(res, 0) <= 0:
                return False
        return True

    # -------------------------------------------------------------------------------- helpers

    def _delete_for_timeout(self, claim: nodeclaim_mod.NodeClaim, reason: str, metric_reason: str,
                            message: str) -> None:
        log.warning("lifecycle: %s; deleting it", message)
        self._event(claim, events.WARNING, reason, message)
        self.metrics.nodeclaims_disrupted.labels(
            metric_reason, claim.nodepool_name or "", claim.labels.get(wk.CAPACITY_TYPE, "")).inc()
        if self.on_liveness_failure is not None:
            self.on_liveness_failure(self.state.raw("NodeClaim", claim.name) or claim.to_manifest())
        self._delete(claim.name)

    def _delete(self, name: str) -> None:
        with contextlib.suppress(kube_errors.NotFound):  # gone already: forgotten all the same
            self.cluster.delete("NodeClaim", name)
        self._forget(name)

    def _event(self, claim: nodeclaim_mod.NodeClaim, type_: str, reason: str, message: str) -> None:
        obj = self.state.raw("NodeClaim", claim.name) or claim.to_manifest()
        try:
            self.recorder.publish(obj, type_, reason, message)
        except Exception as exc:
            log.warning("lifecycle: cannot publish %s on NodeClaim %s: %s", reason, claim.name, exc)
