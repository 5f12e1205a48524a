"""Karpenter's Prometheus metrics, one registry per Manager / simulation run.

:class:`Metrics` owns a private ``prometheus_client.CollectorRegistry`` (never the global one, so
two runs in one process do not share counters) and every ``karpenter_*`` metric Karpenter v1.14
exports, with Karpenter's names, types and label names (``tests/fixtures/karpenter/metrics-v1.14.3.json``
lists them, read from Karpenter's source by ``scripts/karpenter_metrics.py``). The metrics updated
when something happens (counters, histograms, summaries) are attributes here, declared in
:mod:`karpy.observability.catalog`; the gauges read from the cluster state at scrape time
(``karpenter_nodes_allocatable``, ``karpenter_nodepools_limit``, ``karpenter_pods_state`` ...) come
from a collector the controllers attach (:mod:`karpy.controllers.state_metrics`), so a scrape always
shows the current state. Which metric is updated where, and which describe a behaviour karpy does not
have, is in ``docs/metrics.md``.

karpy keeps three counters Karpenter v1 dropped (``karpenter_nodeclaims_launched_total``,
``..._registered_total``, ``..._initialized_total``) and adds ``karpy_cluster_cost_per_hour``.

:meth:`Metrics.snapshot` gives every sample as plain data for the simulator's JSON report:
``{sample name: [{"labels": {...}, "value": float}, ...]}``; :meth:`Metrics.value` reads one.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar

import prometheus_client
from prometheus_client import core as prom_core

from karpy import clock as clock_mod
from karpy.api import meta
from karpy.kube import interface
from karpy.observability import catalog, summary

T = TypeVar("T")

# Go's client exports no ``_created`` series; Karpenter has none
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]


class StateCollector(Protocol):
    """The scrape-time gauges of :data:`catalog.GAUGES` (``karpy.controllers.state_metrics``)."""

    def families(self, wanted: Callable[[str], bool] | None = None) -> Iterable[Any]:
        """One ``prometheus_client`` metric family per name of :data:`catalog.GAUGES`; ``wanted``:
        families none of whose names it accepts may be left out."""
        ...


class _Collected:
    """The scrape-time gauges: from the attached state, or empty families (names still exported)."""

    def __init__(self, owner: Metrics) -> None:
        self.owner = owner

    def describe(self) -> list[Any]:
        return []  # unchecked collector: families are only known at collect time

    def collect(self) -> Iterator[Any]:
        view = self.owner.view
        if view is not None:
            yield from view.families(self.owner.wanted)
        else:
            for row in catalog.GAUGES:
                yield prom_core.GaugeMetricFamily(row.name, row.help, labels=list(row.labels))
        if self.owner.cost is not None:
            cost = prom_core.GaugeMetricFamily(
                "karpy_cluster_cost_per_hour", "US dollars per hour of the running instances karpy launched.")
            cost.add_metric([], float(self.owner.cost()))
            yield cost


def _create(row: catalog.Row, registry: prometheus_client.CollectorRegistry, now: Callable[[], float]) -> Any:
    if row.kind == "counter":
        return prometheus_client.Counter(row.name, row.help, list(row.labels), registry=registry)
    if row.kind == "gauge":
        return prometheus_client.Gauge(row.name, row.help, list(row.labels), registry=registry)
    if row.kind == "histogram":
        return prometheus_client.Histogram(row.name, row.help, list(row.labels), buckets=row.buckets,
                                           registry=registry)
    metric = summary.QuantileSummary(row.name, row.help, row.labels, now)
    registry.register(metric)
    return metric


class Metrics:
    """karpy's metrics in a dedicated registry; see the module docstring.

    One attribute per row of :data:`karpy.observability.catalog.ROWS` (``nodeclaims_created``,
    ``nodes_drained``...); ``controller_runtime`` reconcile metrics as ``reconcile_total`` and
    ``reconcile_time``. ``clock``: the clock of summaries' windows (the run's clock).
    """

    nodeclaims_created: Any
    nodeclaims_terminated: Any
    nodeclaims_disrupted: Any
    nodeclaims_unhealthy_disrupted: Any
    nodeclaims_launched: Any
    nodeclaims_registered: Any
    nodeclaims_initialized: Any
    nodeclaims_termination_duration: Any
    nodeclaims_instance_termination_duration: Any
    nodes_created: Any
    nodes_terminated: Any
    nodes_drained: Any
    nodes_lifetime_duration: Any
    nodes_termination_duration: summary.QuantileSummary
    pods_startup_duration: summary.QuantileSummary
    pods_bound_duration: Any
    pods_provisioning_bound_duration: Any
    pods_provisioning_startup_duration: Any
    pods_scheduling_decision_duration: Any
    pods_drained: Any
    pods_eviction_requests: Any
    cloudprovider_errors: Any
    cloudprovider_duration: Any
    instance_launch_failures: Any
    instance_termination_failures: Any
    batcher_batch_size: Any
    batcher_batch_time: Any
    scheduling_duration: Any
    interruption_received: Any
    interruption_deleted: Any
    interruption_queue_duration: Any
    interruption_unhealthy: Any
    disruption_decisions: Any
    disruption_decisions_by_nodepool: Any
    disruption_evaluation_duration: Any
    disruption_consolidation_timeouts: Any
    disruption_failed_validations: Any
    disruption_queue_failures: Any
    consolidation_score: Any
    consolidation_moves: Any
    nodepool_cost_tracker_errors: Any
    disruption_eligible_nodes: Any
    nodepool_allowed_disruptions: Any
    nodepool_nodes_consuming_budgets: Any
    scheduler_unschedulable_pods: Any
    scheduler_pending_by_zone: Any
    scheduler_queue_depth: Any
    scheduler_unfinished_work: Any
    scheduler_ignored_pods: Any
    ec2nodeclass_userdata_bytes: Any
    build_info: Any
    reconcile_total: Any
    reconcile_time: Any
    pods: PodStartupRecorder | None = None
    """The pod lifecycle recorder feeding this registry, when one is registered."""

    def __init__(self, registry: prometheus_client.CollectorRegistry | None = None, *,
                 pod_state: bool = True, clock: clock_mod.Clock | None = None) -> None:
        self.registry = registry if registry is not None else prometheus_client.CollectorRegistry()
        self.clock: clock_mod.Clock = clock if clock is not None else clock_mod.WallClock()
        self.view: StateCollector | None = None
        self.cost: Callable[[], float] | None = None
        self.pod_state_enabled = pod_state
        self.cluster_state_enabled = True
        """False with DISABLE_CLUSTER_STATE_OBSERVABILITY: the scrape-time state gauges carry no samples."""
        for row in (*catalog.ROWS, *catalog.CONTROLLER_RUNTIME):
            setattr(self, row.attr, _create(row, self.registry, self._now))
        from karpy import __version__

        self.build_info.labels(__version__, "python" + platform.python_version(), platform.machine(), "").set(1)
        for kind in ("multi", "single"):  # Karpenter starts these at 0
            self.disruption_consolidation_timeouts.labels(kind)
        # karpy's own (the interruption queue's poller health, issue 22)
        self.interruption_malformed = prometheus_client.Counter(
            "karpy_interruption_malformed_messages",
            "Messages of the interruption queue that could not be parsed (each logged and deleted).",
            registry=self.registry)
        self.interruption_poller_alive = prometheus_client.Gauge(
            "karpy_interruption_poller_alive", "1 while the interruption queue's receiving thread runs, else 0.",
            registry=self.registry)
        self.interruption_poller_restarts = prometheus_client.Counter(
            "karpy_interruption_poller_restarts",
            "Times the interruption queue's receiving loop failed and started again after a backoff.",
            registry=self.registry)
        self._reconcile_children: dict[Any, Any] = {}
        """(controller, result) -> its ``reconcile_total`` child, controller -> its ``reconcile_time`` child."""
        self.wanted: Callable[[str], bool] | None = None
        """While :meth:`snapshot` collects: the sample names it keeps (the state's families may skip the rest)."""
        self.registry.register(_Collected(self))

    def _now(self) -> float:
        return self.clock.now()

    def attach(self, view: StateCollector | None = None, cost: Callable[[], float] | None = None) -> None:
        """Compute the scrape-time gauges from ``view`` and the cost gauge from ``cost`` (either may be None)."""
        if view is not None:
            self.view = view
        if cost is not None:
            self.cost = cost

    # ------------------------------------------------------------------------------- reading

    def snapshot(self, wanted: Callable[[str], bool] | None = None) -> dict[str, list[dict[str, Any]]]:
        """Every sample: ``{sample name: [{"labels": {...}, "value": float}]}`` (no ``_created``, no NaN);
        ``wanted``: only the samples whose name it accepts (the others are never copied: a cluster's
        per-pod samples run to hundreds of MB)."""
        out: dict[str, list[dict[str, Any]]] = {}
        self.wanted = wanted
        try:
            for family in self.registry.collect():
                for sample in family.samples:
                    if sample.name.endswith("_created") or math.isnan(sample.value) or \
                            (wanted is not None and not wanted(sample.name)):
                        continue
                    out.setdefault(sample.name, []).append(
                        {"labels": dict(sample.labels), "value": float(sample.value)})
        finally:
            self.wanted = None
        return out

    def value(self, name: str, /, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
        total = 0.0
        for family in self.registry.collect():
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()) \
                        and not math.isnan(sample.value):
                    total += float(sample.value)
        return total

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric (what ``/metrics`` serves)."""
        return bytes(prometheus_client.generate_latest(self.registry))

    # ------------------------------------------------------------------------------- helpers

    def cloud_error(self, controller: str, method: str, provider: str, exc: BaseException) -> None:
        error = str(getattr(exc, "reason", "") or type(exc).__name__)
        self.cloudprovider_errors.labels(controller, method, provider, error).inc()

    def cloud_call(self, controller: str, method: str, provider: str, seconds: float) -> None:
        """``karpenter_cloudprovider_duration_seconds`` of one call (real seconds)."""
        self.cloudprovider_duration.labels(controller, method, provider).observe(max(0.0, seconds))

    def timed(self, controller: str, method: str, provider: str, call: Callable[[], T]) -> T:
        """Run one cloud provider call, observing its ``karpenter_cloudprovider_duration_seconds`` (as
        Karpenter's metrics decorator does, whether it returns or raises)."""
        started = clock_mod.perf_counter()
        try:
            return call()
        finally:
            self.cloud_call(controller, method, provider, clock_mod.perf_counter() - started)

    def reconciled(self, controller: str, result: str, seconds: float) -> None:
        """controller-runtime's reconcile metrics: ``result`` is success, error, requeue or requeue_after."""
        total = self._reconcile_children.get((controller, result))
        if total is None:  # a child is looked up once: labels() validates and locks on every call
            total = self._reconcile_children[controller, result] = self.reconcile_total.labels(controller, result)
        timer = self._reconcile_children.get(controller)
        if timer is None:
            timer = self._reconcile_children[controller] = self.reconcile_time.labels(controller)
        total.inc()
        timer.observe(max(0.0, seconds))



class PodStartupRecorder:
    """Karpenter's pod lifecycle metrics, fed by Pod watch events (:meth:`handle`) and the provisioner.

    Once per pod: ``karpenter_pods_bound_duration_seconds`` when ``spec.nodeName`` is first seen set and
    ``karpenter_pods_startup_duration_seconds`` at its first Running state (from its creation time);
    ``karpenter_pods_provisioning_{bound,startup}_duration_seconds`` from when the provisioner first
    decided where it goes (:meth:`decided`); ``karpenter_pods_scheduling_decision_duration_seconds`` from
    when the provisioner first saw it (:meth:`seen`) to that decision. Now is the cluster clock.
    """

    def __init__(self, metrics: Metrics, clock: clock_mod.Clock) -> None:
        self.metrics = metrics
        self.clock = clock
        self._started: set[str] = set()
        self._bound: set[str] = set()
        self.first_seen: dict[str, float] = {}
        self.decided_at: dict[str, float] = {}
        metrics.pods = self

    def seen(self, uid: str) -> None:
        self.first_seen.setdefault(uid, self.clock.now())

    def decided(self, uid: str) -> None:
        if uid in self.decided_at:
            return
        now = self.decided_at[uid] = self.clock.now()
        self.metrics.pods_scheduling_decision_duration.observe(max(0.0, now - self.first_seen.get(uid, now)))

    def handle(self, event: str, obj: dict[str, Any]) -> None:
        uid = interface.uid_of(obj) or "/".join(interface.meta_key(obj)[1:])
        if event == interface.DELETED:
            for held in (self._started, self._bound):
                held.discard(uid)
            self.first_seen.pop(uid, None)
            self.decided_at.pop(uid, None)
            return
        running = (obj.get("status") or {}).get("phase") == "Running"
        bound = bool((obj.get("spec") or {}).get("nodeName"))
        if (not bound or uid in self._bound) and (not running or uid in self._started):
            return  # most events (created, unschedulable, already counted) need nothing
        created = meta.created_at(obj)
        now = self.clock.now()
        decided = self.decided_at.get(uid)
        if bound and uid not in self._bound:
            self._bound.add(uid)
            if created is not None:
                self.metrics.pods_bound_duration.observe(max(0.0, now - created))
            if decided is not None:
                self.metrics.pods_provisioning_bound_duration.observe(max(0.0, now - decided))
        if running and uid not in self._started:
            self._started.add(uid)
            if created is not None:
                self.metrics.pods_startup_duration.observe(max(0.0, now - created))
            if decided is not None:
                self.metrics.pods_provisioning_startup_duration.observe(max(0.0, now - decided))
