"""Karpenter-compatible Prometheus metrics, one registry per Manager / simulation run.

:class:`Metrics` owns a private ``prometheus_client.CollectorRegistry`` (never the global one, so
two runs in one process do not share counters) and the metrics karpy's controllers update. Names
are Karpenter v1's (``reference/metrics``), so dashboards keep working:

* counters ``karpenter_nodeclaims_created_total{reason, nodepool}``,
  ``karpenter_nodeclaims_launched_total{nodepool}``, ``..._registered_total{nodepool}``,
  ``..._initialized_total{nodepool}``, ``..._terminated_total{nodepool}``,
  ``..._disrupted_total{reason, nodepool}``, ``karpenter_nodes_created_total{nodepool}``,
  ``karpenter_nodes_terminated_total{nodepool}``,
  ``karpenter_cloudprovider_errors_total{controller, method, provider, error}``;
* histograms ``karpenter_scheduler_scheduling_duration_seconds{controller}`` (real seconds,
  measured with :func:`karpy.clock.perf_counter`), ``karpenter_pods_startup_duration_seconds``,
  ``karpenter_nodes_termination_duration_seconds{nodepool}`` and
  ``karpenter_nodeclaims_termination_duration_seconds{nodepool}`` (cluster-clock seconds);
* gauges computed when collected from an attached :class:`ClusterView`:
  ``karpenter_cluster_state_node_count``, ``karpenter_nodepools_usage{nodepool, resource_type}``
  (cores, bytes, counts), ``karpenter_pods_state{...}`` (1 per pod), ``karpenter_scheduler_queue_depth``
  and ``karpy_cluster_cost_per_hour`` (US dollars per hour of running instances).

:meth:`Metrics.snapshot` gives every sample as plain data for the simulator's JSON report:
``{sample name: [{"labels": {...}, "value": float}, ...]}``; :meth:`Metrics.value` reads one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import prometheus_client
from prometheus_client import core as prom_core

from karpy import clock as clock_mod
from karpy.api import quantity
from karpy.kube import interface

POD_STARTUP_BUCKETS = (1, 5, 10, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1200, 1800, 3600)
TERMINATION_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 86400)
SCHEDULING_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

POD_STATE_LABELS = ("name", "namespace", "owner", "node", "nodepool", "zone", "arch", "capacity_type",
                    "instance_type", "phase")


class ClusterView(Protocol):
    """What the collected gauges read (karpy's :class:`karpy.controllers.state.ClusterState`)."""

    def node_count(self) -> int: ...

    def nodepool_usage(self) -> Mapping[str, Mapping[str, int]]:
        """NodePool -> resource -> milli-units of capacity launched or in flight."""
        ...

    def pod_states(self) -> Iterable[Mapping[str, str]]:
        """One label set (:data:`POD_STATE_LABELS`) per pod."""
        ...

    def pending_pod_count(self) -> int: ...


def natural_units(resource: str, milli: int) -> float:
    """Milli-units as Prometheus reports resources: cores, bytes, counts."""
    return milli / quantity.MILLI


class _Collected:
    """A collector whose gauges are computed from the attached view at scrape time."""

    def __init__(self, owner: Metrics) -> None:
        self.owner = owner

    def describe(self) -> list[Any]:
        return []  # unchecked collector: families are only known at collect time

    def collect(self) -> Iterator[Any]:
        view = self.owner.view
        if view is not None:
            count = prom_core.GaugeMetricFamily(
                "karpenter_cluster_state_node_count", "Current count of nodes in cluster state")
            count.add_metric([], float(view.node_count()))
            yield count
            usage = prom_core.GaugeMetricFamily(
                "karpenter_nodepools_usage",
                "The amount of resources that have been provisioned for a nodepool.",
                labels=["nodepool", "resource_type"])
            for pool, resources in sorted(view.nodepool_usage().items()):
                for res, milli in sorted(resources.items()):
                    usage.add_metric([pool, res], natural_units(res, milli))
            yield usage
            depth = prom_core.GaugeMetricFamily(
                "karpenter_scheduler_queue_depth", "The number of pods currently waiting to be scheduled.")
            depth.add_metric([], float(view.pending_pod_count()))
            yield depth
            if self.owner.pod_state_enabled:
                state = prom_core.GaugeMetricFamily(
                    "karpenter_pods_state", "Pod state is the current state of pods.",
                    labels=list(POD_STATE_LABELS))
                for labels in view.pod_states():
                    state.add_metric([str(labels.get(k, "")) for k in POD_STATE_LABELS], 1.0)
                yield state
        if self.owner.cost is not None:
            cost = prom_core.GaugeMetricFamily(
                "karpy_cluster_cost_per_hour", "US dollars per hour of the running instances karpy launched.")
            cost.add_metric([], float(self.owner.cost()))
            yield cost


class Metrics:
    """karpy's metrics in a dedicated registry; see the module docstring."""

    def __init__(self, registry: prometheus_client.CollectorRegistry | None = None, *,
                 pod_state: bool = True) -> None:
        self.registry = registry if registry is not None else prometheus_client.CollectorRegistry()
        self.view: ClusterView | None = None
        self.cost: Callable[[], float] | None = None
        self.pod_state_enabled = pod_state
        r = self.registry
        self.nodeclaims_created = prometheus_client.Counter(
            "karpenter_nodeclaims_created_total",
            "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was "
            "created and the owning nodepool.", ["reason", "nodepool"], registry=r)
        self.nodeclaims_launched = prometheus_client.Counter(
            "karpenter_nodeclaims_launched_total", "Number of nodeclaims launched in total by Karpenter.",
            ["nodepool"], registry=r)
        self.nodeclaims_registered = prometheus_client.Counter(
            "karpenter_nodeclaims_registered_total", "Number of nodeclaims registered in total by Karpenter.",
            ["nodepool"], registry=r)
        self.nodeclaims_initialized = prometheus_client.Counter(
            "karpenter_nodeclaims_initialized_total",
            "Number of nodeclaims initialized in total by Karpenter.", ["nodepool"], registry=r)
        self.nodeclaims_terminated = prometheus_client.Counter(
            "karpenter_nodeclaims_terminated_total",
            "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool.",
            ["nodepool"], registry=r)
        self.nodeclaims_disrupted = prometheus_client.Counter(
            "karpenter_nodeclaims_disrupted_total",
            "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was "
            "disrupted and the owning nodepool.", ["reason", "nodepool"], registry=r)
        self.nodes_created = prometheus_client.Counter(
            "karpenter_nodes_created_total",
            "Number of nodes created in total by Karpenter. Labeled by owning nodepool.",
            ["nodepool"], registry=r)
        self.nodes_terminated = prometheus_client.Counter(
            "karpenter_nodes_terminated_total",
            "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool.",
            ["nodepool"], registry=r)
        self.cloudprovider_errors = prometheus_client.Counter(
            "karpenter_cloudprovider_errors_total",
            "Total number of errors returned from CloudProvider calls.",
            ["controller", "method", "provider", "error"], registry=r)
        self.scheduling_duration = prometheus_client.Histogram(
            "karpenter_scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
            ["controller"], buckets=SCHEDULING_BUCKETS, registry=r)
        self.pods_startup_duration = prometheus_client.Histogram(
            "karpenter_pods_startup_duration_seconds", "The time from pod creation until the pod is running.",
            buckets=POD_STARTUP_BUCKETS, registry=r)
        self.nodes_termination_duration = prometheus_client.Histogram(
            "karpenter_nodes_termination_duration_seconds",
            "The time taken between a node's deletion request and the removal of its finalizer",
            ["nodepool"], buckets=TERMINATION_BUCKETS, registry=r)
        self.nodeclaims_termination_duration = prometheus_client.Histogram(
            "karpenter_nodeclaims_termination_duration_seconds",
            "Duration of NodeClaim termination in seconds.",
            ["nodepool"], buckets=TERMINATION_BUCKETS, registry=r)
        self.interruption_received = prometheus_client.Counter(
            "karpenter_interruption_received_messages", "Count of messages received from the interruption queue.",
            ["message_type"], registry=r)
        self.interruption_deleted = prometheus_client.Counter(
            "karpenter_interruption_deleted_messages", "Count of messages deleted from the interruption queue.",
            registry=r)
        self.interruption_malformed = prometheus_client.Counter(
            "karpy_interruption_malformed_messages",
            "Messages of the interruption queue that could not be parsed (each logged and deleted).", registry=r)
        self.interruption_poller_alive = prometheus_client.Gauge(
            "karpy_interruption_poller_alive", "1 while the interruption queue's receiving thread runs, else 0.",
            registry=r)
        self.interruption_poller_restarts = prometheus_client.Counter(
            "karpy_interruption_poller_restarts",
            "Times the interruption queue's receiving loop failed and started again after a backoff.", registry=r)
        self.disruption_decisions = prometheus_client.Counter(
            "karpenter_voluntary_disruption_decisions", "Number of disruption decisions performed.",
            ["decision", "reason", "consolidation_type"], registry=r)
        self.disruption_eligible_nodes = prometheus_client.Gauge(
            "karpenter_voluntary_disruption_eligible_nodes", "Number of nodes eligible for disruption.",
            ["reason"], registry=r)
        self.registry.register(_Collected(self))

    def attach(self, view: ClusterView | None = None, cost: Callable[[], float] | None = None) -> None:
        """Compute the collected gauges from ``view`` and ``cost`` (either may be ``None``)."""
        if view is not None:
            self.view = view
        if cost is not None:
            self.cost = cost

    # ------------------------------------------------------------------------------- reading

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Every sample: ``{sample name: [{"labels": {...}, "value": float}]}`` (no ``_created``)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for family in self.registry.collect():
            for sample in family.samples:
                if sample.name.endswith("_created"):
                    continue
                out.setdefault(sample.name, []).append(
                    {"labels": dict(sample.labels), "value": float(sample.value)})
        return out

    def value(self, name: str, /, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
        total = 0.0
        for family in self.registry.collect():
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += float(sample.value)
        return total

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric (what ``/metrics`` serves)."""
        return bytes(prometheus_client.generate_latest(self.registry))

    # ------------------------------------------------------------------------------- helpers

    def cloud_error(self, controller: str, method: str, provider: str, exc: BaseException) -> None:
        error = str(getattr(exc, "reason", "") or type(exc).__name__)
        self.cloudprovider_errors.labels(controller, method, provider, error).inc()


class PodStartupRecorder:
    """Observes ``karpenter_pods_startup_duration_seconds`` once per pod, at its first Running state.

    Register :meth:`handle` as a Pod watch handler; creation time comes from the pod, now from the
    cluster clock.
    """

    def __init__(self, metrics: Metrics, clock: clock_mod.Clock) -> None:
        self.metrics = metrics
        self.clock = clock
        self._seen: set[str] = set()

    def handle(self, event: str, obj: dict[str, Any]) -> None:
        if event != interface.DELETED and (obj.get("status") or {}).get("phase") != "Running":
            return  # most events (created, unschedulable, bound) need no key at all
        uid = interface.uid_of(obj) or "/".join(interface.meta_key(obj))
        if event == interface.DELETED:
            self._seen.discard(uid)
            return
        if uid in self._seen:
            return
        self._seen.add(uid)
        created = (obj.get("metadata") or {}).get("creationTimestamp")
        if not created:
            return
        try:
            started = clock_mod.parse_rfc3339(str(created))
        except ValueError:
            return
        self.metrics.pods_startup_duration.observe(max(0.0, self.clock.now() - started))
