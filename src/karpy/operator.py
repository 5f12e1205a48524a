"""The composition root of karpy's controllers (Karpenter's ``pkg/operator``): one layer above
:mod:`karpy.controllers` and :mod:`karpy.disruption`, used by the simulator's engine and by
:mod:`karpy.controller_run`.

:func:`register_all` wires the provisioner, NodeClaim lifecycle, termination, garbage collection,
interruption and disruption controllers (and, behind feature gates, node repair and static capacity)
onto one :class:`karpy.controllers.runtime.Manager` over one cluster and one cloud (with the
``NodeOverlay`` feature gate on, the cloud as
:class:`~karpy.cloudprovider.overlay_provider.OverlaidProvider` and the ``nodeoverlay`` controller), with
the shared pieces they need: the watch-fed
:class:`~karpy.controllers.state.ClusterState` (started before any controller registers, so it
sees every event first), an :class:`~karpy.kube.events.EventRecorder` (component ``karpenter``),
the :class:`~karpy.observability.metrics.Metrics` and the
:class:`~karpy.controllers.offerings.UnavailableOfferings` cache. The same wiring runs in the
simulator (virtual clock) and in a real cluster (wall clock).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from karpy import clock as clock_mod
    from karpy import settings as settings_mod
    from karpy.cloudprovider import interface as cp_interface
    from karpy.controllers import (
        capacitybuffer,
        gc,
        interruption,
        lifecycle,
        offerings,
        provisioner,
        runtime,
        state,
        termination,
    )
    from karpy.controllers import reservation_expiration as reservation_expiration_mod
    from karpy.controllers import static_capacity as static_capacity_mod
    from karpy.controllers import unimplemented as unimplemented_mod
    from karpy.disruption import controller as disruption_controller
    from karpy.kube import events, interface
    from karpy.observability import metrics as metrics_mod


@dataclass
class Controllers:
    """What :func:`register_all` built, for callers that want to inspect or drive it."""

    state: state.ClusterState
    recorder: events.EventRecorder
    metrics: metrics_mod.Metrics
    offerings: offerings.UnavailableOfferings
    provisioner: provisioner.Provisioner
    lifecycle: lifecycle.Lifecycle
    termination: termination.Termination
    gc: gc.GarbageCollector
    interruption: interruption.Interruption
    disruption: disruption_controller.DisruptionController | None = None
    unimplemented: unimplemented_mod.Unimplemented | None = None
    static_capacity: static_capacity_mod.StaticCapacity | None = None
    reservation_expiration: reservation_expiration_mod.ReservationExpiration | None = None
    buffers: capacitybuffer.Buffers | None = None
    """The CapacityBuffer controller (feature gate ``CapacityBuffer``)."""


def register_all(manager: runtime.Manager, cluster: interface.Cluster, cloud: cp_interface.CloudProvider,
                 clock: clock_mod.Clock, settings: settings_mod.Settings | None = None, *,
                 metrics: metrics_mod.Metrics | None = None, recorder: events.EventRecorder | None = None,
                 on_launched: lifecycle.LaunchHook | None = None,
                 nodeclass_kinds: Sequence[str] = ()) -> Controllers:
    """Register the provisioner, lifecycle, termination, garbage-collection, disruption and NodePool
    counter controllers.

    ``metrics`` defaults to a fresh :class:`Metrics` (which then also records pod startup
    durations and, when the cloud has ``cost_per_hour()``, the cost gauge); a caller passing its
    own is expected to have done that. ``on_launched(nodeclaim dict)`` is called after each launch
    (see :mod:`karpy.controllers.lifecycle`). The garbage collector's first sweep is queued at once.
    ``nodeclass_kinds``: the NodeClass kinds the cloud serves (``("EC2NodeClass",)`` on AWS); only those
    are watched, so a cluster without the other clouds' CRDs still syncs. Default: EC2NodeClass and
    AKSNodeClass.
    """
    from karpy import settings as settings_mod
    from karpy.controllers import (
        gc,
        interruption,
        lifecycle,
        nodepool_counter,
        offerings,
        provisioner,
        state,
        termination,
    )
    from karpy.disruption import controller as disruption_controller
    from karpy.kube import events, interface
    from karpy.observability import metrics as metrics_mod

    settings = settings if settings is not None else settings_mod.Settings()
    undecorated = cloud
    overlaid = None
    if settings.feature_gate("NodeOverlay"):  # every controller sees the overlays' prices and capacity
        from karpy.cloudprovider import overlay_provider

        overlaid = overlay_provider.OverlaidProvider(cloud)
        cloud = overlaid
    own_metrics = metrics is None
    metrics = metrics if metrics is not None else metrics_mod.Metrics(clock=clock)
    recorder = recorder if recorder is not None else events.EventRecorder(cluster, clock, "karpenter")
    cluster_state = state.ClusterState(cluster).start()
    if own_metrics:
        cost = getattr(cloud, "cost_per_hour", None)
        if callable(cost):
            metrics.attach(cost=cost)
        cluster.watch("Pod", interface.Filtered(metrics_mod.PodStartupRecorder(metrics, clock).handle,
                                                interface.MESSAGES_ONLY))
    cache = offerings.UnavailableOfferings(clock, settings.ice_cache_ttl)
    built = Controllers(
        state=cluster_state, recorder=recorder, metrics=metrics, offerings=cache,
        provisioner=provisioner.Provisioner(cluster, cluster_state, cloud, clock, settings, recorder, metrics, cache),
        lifecycle=lifecycle.Lifecycle(cluster, cluster_state, cloud, clock, settings, recorder, metrics, cache,
                                      on_launched=on_launched, calls=manager.calls),
        termination=termination.Termination(cluster, cluster_state, cloud, clock, recorder, metrics,
                                             calls=manager.calls),
        gc=gc.GarbageCollector(cluster, cluster_state, cloud, clock, recorder, metrics),
        interruption=interruption.Interruption(cluster, cluster_state, cloud, clock, recorder, metrics),
    )
    from karpy.controllers import state_metrics

    metrics.attach(view=state_metrics.StateMetrics(cluster_state, clock, metrics,
                                                   instance_types=built.provisioner.last_instance_types))
    manager.observer = metrics.reconciled
    metrics.cluster_state_enabled = not settings.disable_cluster_state_observability
    report = getattr(cloud, "report_metrics_to", None)  # a provider's own metrics (AWS: batcher, user data)
    if callable(report):
        report(metrics)
    manager.register(built.provisioner.controller())
    manager.register(built.lifecycle.controller())
    manager.register(built.termination.controller())
    manager.register(built.gc.controller())
    manager.register(built.interruption.controller())
    built.disruption = disruptor = disruption_controller.new(
        cluster, clock, recorder, metrics, cluster_state=cluster_state, cloud=cloud, settings=settings,
        instance_types=built.provisioner.instance_types, nodeclass_kinds=nodeclass_kinds)
    disruption_controller.register(manager, disruptor)
    if settings.feature_gate("CapacityBuffer"):
        _register_buffers(manager, cluster, clock, built)
    nodepool_counter.register(manager, nodepool_counter.NodePoolCounter(cluster, cluster_state))
    if overlaid is not None:
        from karpy.controllers import nodeoverlay

        nodeoverlay.register(manager, cluster, undecorated, overlaid, clock, nodeclass_kinds=nodeclass_kinds,
                             on_change=disruptor.mark_unconsolidated)
    from karpy.controllers import unimplemented

    built.unimplemented = unimplemented.register(
        manager, cluster, recorder, nodeclass_kinds or ("EC2NodeClass", "AKSNodeClass"))
    from karpy.controllers import nodeclass_status

    nodeclass_status.register(manager, cluster, cloud, clock, kinds=nodeclass_kinds)
    from karpy.controllers import nodepool_hash, registration_health

    nodepool_hash.register(manager, cluster)
    from karpy.controllers import reservation_expiration

    built.reservation_expiration = reservation_expiration.register(manager, cluster, cluster_state, cloud)
    built.lifecycle.on_liveness_failure = registration_health.register(manager, cluster, clock).failed
    if settings.feature_gate("StaticCapacity"):
        from karpy.controllers import static_capacity

        built.static_capacity = static_capacity.register(manager, static_capacity.StaticCapacity(
            cluster, cluster_state, cloud, clock, cache, metrics, built.provisioner.nodeclass_hash))
    if settings.feature_gate("NodeRepair"):
        from karpy.controllers import repair

        repair.register(manager, cluster, cluster_state, cloud, clock, recorder, metrics)
    manager.enqueue(gc.NAME, gc.KEY)
    manager.enqueue(interruption.NAME, interruption.KEY)
    _enqueue_existing(manager, cluster_state)
    return built


def _register_buffers(manager: runtime.Manager, cluster: interface.Cluster, clock: clock_mod.Clock,
                      built: Controllers) -> None:
    """CapacityBuffers: their controller, their virtual pods in the provisioner and in disruption."""
    from karpy.controllers import capacitybuffer, provisioner

    def trigger() -> None:
        built.provisioner.trigger()
        manager.enqueue(provisioner.NAME, provisioner.BATCH_KEY)

    capacitybuffer.register_kind()
    built.buffers = capacitybuffer.Buffers(cluster, clock, trigger)
    built.provisioner.buffers = built.buffers
    if built.disruption is not None:
        built.disruption.observer.buffers = built.buffers
        built.buffers.on_change = built.disruption.mark_unconsolidated
    manager.register(built.buffers.controller())
    manager.enqueue(capacitybuffer.NAME, capacitybuffer.KEY)


def _enqueue_existing(manager: runtime.Manager, cluster_state: state.ClusterState) -> None:
    """Objects that existed before the watches started get their first reconcile too."""
    from karpy.api import labels as wk
    from karpy.controllers import lifecycle, provisioner, termination
    from karpy.kube import interface

    for obj in cluster_state.raws("NodeClaim"):
        name = interface.name_of(obj)
        if interface.is_terminating(obj):
            manager.enqueue(termination.NAME, termination.NODECLAIM + name)
        else:
            manager.enqueue(lifecycle.NAME, name)
    for obj in cluster_state.raws("Node"):
        if interface.is_terminating(obj) and interface.has_finalizer(obj, wk.FINALIZER_TERMINATION):
            manager.enqueue(termination.NAME, termination.NODE + interface.name_of(obj))
    if cluster_state.pending_pod_count():
        manager.enqueue(provisioner.NAME, provisioner.BATCH_KEY)
