"""The declarations of karpy's event-updated metrics: Karpenter v1.14's names, types, label names and
buckets (``sigs.k8s.io/karpenter`` and ``karpenter-provider-aws`` v1.14.3), one row per metric.

A row is ``(attribute, type, name, help, labels, buckets)``; :class:`karpy.observability.metrics.Metrics`
creates one attribute per row. The scrape-time gauges are in :data:`GAUGES` (created by the state
collector, :mod:`karpy.controllers.state_metrics`, and registered empty here when no state is attached).
"""

from __future__ import annotations

from typing import NamedTuple

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
                    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30,
                    40, 50, 60, 120, 150, 300, 450, 600)
"""Karpenter's ``metrics.DurationBuckets()`` (controller-runtime's, extended to 10 minutes)."""
_MIN, _HOUR, _DAY = 60.0, 3600.0, 86400.0
LIFETIME_BUCKETS = (15 * _MIN, 30 * _MIN, 45 * _MIN, _HOUR, 2 * _HOUR, 4 * _HOUR, 6 * _HOUR, 8 * _HOUR,
                    10 * _HOUR, 12 * _HOUR, 16 * _HOUR, 20 * _HOUR, _DAY, 2 * _DAY, 3 * _DAY, 5 * _DAY,
                    10 * _DAY, 15 * _DAY, 20 * _DAY, 25 * _DAY, 30 * _DAY)
INSTANCE_TERMINATION_BUCKETS = tuple(float(2 ** i) for i in range(11))
NODECLAIM_TERMINATION_BUCKETS = tuple(float(2 ** i) for i in range(12))
SCORE_BUCKETS = (0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0)
BATCH_SIZE_BUCKETS = (1, 2, 4, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 60, 70, 80, 90, 100, 125, 150, 175, 200,
                      225, 250, 275, 300, 350, 400, 450, 500, 550, 600, 700, 800, 900, 1000)

NODE_LABELS = ("arch", "capacity_type", "instance_type", "nodepool", "os", "region", "windows_build", "zone",
               "node_name", "phase", "managed")
"""Karpenter's node metric labels: the well-known node labels in snake case, then name, phase, managed."""
POD_STATE_LABELS = ("name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch",
                    "capacity_type", "instance_type", "phase", "ready", "managed")


class Row(NamedTuple):
    attr: str
    kind: str  # counter | histogram | summary | gauge
    name: str
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()


_C, _H, _S, _G = "counter", "histogram", "summary", "gauge"
_CTP = ("controller", "method", "provider")
_DRC = ("decision", "reason", "consolidation_type")

ROWS: tuple[Row, ...] = (
    Row("nodeclaims_created", _C, "karpenter_nodeclaims_created_total",
        "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created, the "
        "owning nodepool, and if min values was relaxed for this nodeclaim.",
        ("reason", "nodepool", "min_values_relaxed")),
    Row("nodeclaims_terminated", _C, "karpenter_nodeclaims_terminated_total",
        "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool, capacity type, "
        "and zone.", ("nodepool", "capacity_type", "zone")),
    Row("nodeclaims_disrupted", _C, "karpenter_nodeclaims_disrupted_total",
        "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted "
        "and the owning nodepool.", ("reason", "nodepool", "capacity_type")),
    Row("nodeclaims_unhealthy_disrupted", _C, "karpenter_nodeclaims_unhealthy_disrupted_total",
        "Number of unhealthy nodeclaims disrupted in total by Karpenter. Labeled by condition on the node was "
        "disrupted, the owning nodepool, and the image ID.", ("condition", "nodepool", "capacity_type", "image_id")),
    Row("nodeclaims_launched", _C, "karpenter_nodeclaims_launched_total",
        "Number of nodeclaims launched in total by karpy (Karpenter v0.3x's metric).", ("nodepool",)),
    Row("nodeclaims_registered", _C, "karpenter_nodeclaims_registered_total",
        "Number of nodeclaims registered in total by karpy (Karpenter v0.3x's metric).", ("nodepool",)),
    Row("nodeclaims_initialized", _C, "karpenter_nodeclaims_initialized_total",
        "Number of nodeclaims initialized in total by karpy (Karpenter v0.3x's metric).", ("nodepool",)),
    Row("nodeclaims_termination_duration", _H, "karpenter_nodeclaims_termination_duration_seconds",
        "Duration of NodeClaim termination in seconds.", ("nodepool",), NODECLAIM_TERMINATION_BUCKETS),
    Row("nodeclaims_instance_termination_duration", _H, "karpenter_nodeclaims_instance_termination_duration_seconds",
        "Duration of CloudProvider Instance termination in seconds.", ("nodepool",), INSTANCE_TERMINATION_BUCKETS),
    Row("nodes_created", _C, "karpenter_nodes_created_total",
        "Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone.", ("nodepool", "zone")),
    Row("nodes_terminated", _C, "karpenter_nodes_terminated_total",
        "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and zone.",
        ("nodepool", "zone")),
    Row("nodes_drained", _C, "karpenter_nodes_drained_total", "The total number of nodes drained by Karpenter",
        ("nodepool",)),
    Row("nodes_lifetime_duration", _H, "karpenter_nodes_lifetime_duration_seconds",
        "The lifetime duration of the nodes since creation.", ("nodepool",), LIFETIME_BUCKETS),
    Row("nodes_termination_duration", _S, "karpenter_nodes_termination_duration_seconds",
        "The time taken between a node's deletion request and the removal of its finalizer", ("nodepool",)),
    Row("pods_startup_duration", _S, "karpenter_pods_startup_duration_seconds",
        "The time from pod creation until the pod is running.", ()),
    Row("pods_bound_duration", _H, "karpenter_pods_bound_duration_seconds",
        "The time from pod creation until the pod is bound.", (), DURATION_BUCKETS),
    Row("pods_provisioning_bound_duration", _H, "karpenter_pods_provisioning_bound_duration_seconds",
        "The time from when Karpenter first thinks the pod can schedule until it binds.", (), DURATION_BUCKETS),
    Row("pods_provisioning_startup_duration", _H, "karpenter_pods_provisioning_startup_duration_seconds",
        "The time from when Karpenter first thinks the pod can schedule until the pod is running.", (),
        DURATION_BUCKETS),
    Row("pods_scheduling_decision_duration", _H, "karpenter_pods_scheduling_decision_duration_seconds",
        "The time it takes for Karpenter to first try to schedule a pod after it's been seen.", (),
        DURATION_BUCKETS),
    Row("pods_drained", _C, "karpenter_pods_drained_total",
        "The total number of pods drained during node termination by Karpenter, labeled by reason", ("reason",)),
    Row("pods_eviction_requests", _C, "karpenter_pods_eviction_requests_total",
        "The total number of pod eviction requests made by Karpenter, labeled by response code", ("code",)),
    Row("cloudprovider_errors", _C, "karpenter_cloudprovider_errors_total",
        "Total number of errors returned from CloudProvider calls.", (*_CTP, "error")),
    Row("cloudprovider_duration", _H, "karpenter_cloudprovider_duration_seconds",
        "Duration of cloud provider method calls. Labeled by the controller, method name and provider.", _CTP,
        DURATION_BUCKETS),
    Row("instance_launch_failures", _C, "karpenter_cloudprovider_instance_launch_failures_total",
        "The number of instance launch failures, labeled by zone, zone ID, capacity type and reason.",
        ("zone", "zone_id", "capacity_type", "reason")),
    Row("instance_termination_failures", _C, "karpenter_cloudprovider_instance_termination_failures_total",
        "The number of instance termination failures, labeled by zone and zone ID.", ("zone", "zone_id")),
    Row("batcher_batch_size", _H, "karpenter_cloudprovider_batcher_batch_size",
        "Size of the request batch per batcher", ("batcher",), BATCH_SIZE_BUCKETS),
    Row("batcher_batch_time", _H, "karpenter_cloudprovider_batcher_batch_time_seconds",
        "Duration of the batching window per batcher", ("batcher",), DURATION_BUCKETS),
    Row("scheduling_duration", _H, "karpenter_scheduler_scheduling_duration_seconds",
        "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.", ("controller",),
        DURATION_BUCKETS),
    Row("interruption_received", _C, "karpenter_interruption_received_messages_total",
        "Count of messages received from the interruption queue. Broken down by message type and whether the "
        "message was actionable.", ("message_type",)),
    Row("interruption_deleted", _C, "karpenter_interruption_deleted_messages_total",
        "Count of messages deleted from the interruption queue.", ()),
    Row("interruption_queue_duration", _H, "karpenter_interruption_message_queue_duration_seconds",
        "Amount of time an interruption message is on the queue before it is processed by karpenter.", (),
        DURATION_BUCKETS),
    Row("interruption_unhealthy", _C, "karpenter_interruption_instance_status_unhealthy_total",
        "Count of instance status checks that are unhealthy, labeled by category.", ("category",)),
    Row("disruption_decisions", _C, "karpenter_voluntary_disruption_decisions_total",
        "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation "
        "type.", _DRC),
    Row("disruption_decisions_by_nodepool", _C, "karpenter_voluntary_disruption_decisions_by_nodepool_total",
        "Number of disruption decisions performed by nodepool. Labeled by nodepool name, disruption decision, "
        "reason, and consolidation type.", ("nodepool", *_DRC)),
    Row("disruption_evaluation_duration", _H, "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
        "Duration of the disruption decision evaluation process in seconds. Labeled by method and consolidation "
        "type.", ("reason", "consolidation_type"), DURATION_BUCKETS),
    Row("disruption_consolidation_timeouts", _C, "karpenter_voluntary_disruption_consolidation_timeouts_total",
        "Number of times the Consolidation algorithm has reached a timeout. Labeled by consolidation type.",
        ("consolidation_type",)),
    Row("disruption_failed_validations", _C, "karpenter_voluntary_disruption_failed_validations_total",
        "Number of candidates that were selected for disruption but failed validation. Labeled by consolidation "
        "type.", ("consolidation_type",)),
    Row("disruption_queue_failures", _C, "karpenter_voluntary_disruption_queue_failures_total",
        "The number of times that an enqueued disruption decision failed. Labeled by disruption method.", _DRC),
    Row("consolidation_score", _H, "karpenter_consolidation_score",
        "Score of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
        ("decision", "nodepool", "policy"), SCORE_BUCKETS),
    Row("consolidation_moves", _C, "karpenter_consolidation_moves_total",
        "Number of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
        ("decision", "nodepool", "policy")),
    Row("nodepool_cost_tracker_errors", _C, "karpenter_nodepools_cost_tracker_errors_total",
        "Number of errors encountered by the cost tracker, labeled by nodepool.", ("nodepool",)),
    Row("disruption_eligible_nodes", _G, "karpenter_voluntary_disruption_eligible_nodes",
        "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.", ("reason",)),
    Row("nodepool_allowed_disruptions", _G, "karpenter_nodepools_allowed_disruptions",
        "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. "
        "Labeled by NodePool.", ("nodepool", "reason")),
    Row("nodepool_nodes_consuming_budgets", _G, "karpenter_nodepools_nodes_consuming_budgets",
        "The number of nodes consuming the budget of a nodepool at a point in time. Labeled by NodePool.",
        ("nodepool", "reason")),
    Row("scheduler_unschedulable_pods", _G, "karpenter_scheduler_unschedulable_pods_count",
        "The number of unschedulable Pods.", ("controller",)),
    Row("scheduler_pending_by_zone", _G, "karpenter_scheduler_pending_pods_by_effective_zone_count",
        "The number of pending pods by effective zone.", ("controller", "zone")),
    Row("scheduler_queue_depth", _G, "karpenter_scheduler_queue_depth",
        "The number of pods currently waiting to be scheduled.", ("controller", "scheduling_id")),
    Row("scheduler_unfinished_work", _G, "karpenter_scheduler_unfinished_work_seconds",
        "How many seconds of work has been done that is in progress and hasn't been considered in the "
        "scheduling duration.", ("controller", "scheduling_id")),
    Row("scheduler_ignored_pods", _G, "karpenter_scheduler_ignored_pods_count",
        "Number of pods ignored during scheduling by Karpenter", ()),
    Row("ec2nodeclass_userdata_bytes", _G, "karpenter_ec2nodeclasses_userdata_bytes",
        "The size of the user data of an EC2NodeClass in bytes.", ("nodeclass",)),
    Row("build_info", _G, "karpenter_build_info",
        "A metric with a constant '1' value labeled by version from which karpenter was built.",
        ("version", "goversion", "goarch", "commit")),
)

GAUGES: tuple[Row, ...] = (
    Row("", _G, "karpenter_cluster_state_node_count", "Current count of nodes in cluster state", ()),
    Row("", _G, "karpenter_cluster_state_synced",
        "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are "
        "stored in the APIServer have the same representation as Karpenter's cluster state", ()),
    Row("", _G, "karpenter_cluster_state_unsynced_time_seconds",
        "The time for which cluster state is not synced", ()),
    Row("", _G, "karpenter_cluster_utilization_percent", "Utilization of allocatable resources by pod requests",
        ("resource_type",)),
    Row("", _G, "karpenter_nodepools_usage",
        "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and "
        "resource type.", ("resource_type", "nodepool")),
    Row("", _G, "karpenter_nodepools_limit",
        "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by "
        "nodepool name and resource type.", ("resource_type", "nodepool")),
    Row("", _G, "karpenter_nodepools_cost_total",
        "The hourly cost of the nodes of a nodepool, labeled by nodepool.", ("nodepool",)),
    Row("", _G, "karpenter_nodes_allocatable", "Node allocatable are the resources allocatable by nodes.",
        (*NODE_LABELS, "resource_type")),
    Row("", _G, "karpenter_nodes_total_pod_requests",
        "Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet "
        "pods.", (*NODE_LABELS, "resource_type")),
    Row("", _G, "karpenter_nodes_total_pod_limits",
        "Node total pod limits are the resources specified by pod limits, including the DaemonSet pods.",
        (*NODE_LABELS, "resource_type")),
    Row("", _G, "karpenter_nodes_total_daemon_requests",
        "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
        (*NODE_LABELS, "resource_type")),
    Row("", _G, "karpenter_nodes_total_daemon_limits",
        "Node total daemon limits are the resources specified by DaemonSet pod limits.",
        (*NODE_LABELS, "resource_type")),
    Row("", _G, "karpenter_nodes_system_overhead",
        "Node system daemon overhead are the resources reserved for system overhead, the difference between "
        "the node's capacity and allocatable values are reported by the status.", (*NODE_LABELS, "resource_type")),
    Row("", _G, "karpenter_nodes_current_lifetime_seconds", "Node age in seconds", NODE_LABELS),
    Row("", _G, "karpenter_pods_state", "Pod state is the current state of pods.", POD_STATE_LABELS),
    Row("", _G, "karpenter_pods_unbound_time_seconds", "The time from pod creation until the pod is bound.",
        ("name", "namespace")),
    Row("", _G, "karpenter_pods_unstarted_time_seconds", "The time from pod creation until the pod is running.",
        ("name", "namespace")),
    Row("", _G, "karpenter_pods_provisioning_unbound_time_seconds",
        "The time from when Karpenter first thinks the pod can schedule until it binds.", ("name", "namespace")),
    Row("", _G, "karpenter_pods_provisioning_unstarted_time_seconds",
        "The time from when Karpenter first thinks the pod can schedule until the pod is running.",
        ("name", "namespace")),
    Row("", _G, "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
        "The time from when Karpenter has seen a pod without making a scheduling decision for the pod.",
        ("name", "namespace")),
    Row("", _G, "karpenter_cloudprovider_instance_type_cpu_cores",
        "VCPUs cores for a given instance type.", ("instance_type",)),
    Row("", _G, "karpenter_cloudprovider_instance_type_memory_bytes",
        "Memory, in bytes, for a given instance type.", ("instance_type",)),
    Row("", _G, "karpenter_cloudprovider_instance_type_offering_available",
        "Instance type offering availability, based on instance type, capacity type, and zone",
        ("instance_type", "capacity_type", "zone")),
    Row("", _G, "karpenter_cloudprovider_instance_type_offering_price_estimate",
        "Instance type offering estimated hourly price used when making informed decisions on node cost "
        "calculation, based on instance type, capacity type, and zone.", ("instance_type", "capacity_type", "zone")),
)
"""Gauges computed at scrape time from the cluster state (:mod:`karpy.controllers.state_metrics`)."""

CONTROLLER_RUNTIME: tuple[Row, ...] = (
    Row("reconcile_total", _C, "controller_runtime_reconcile_total",
        "Total number of reconciliations per controller", ("controller", "result")),
    Row("reconcile_time", _H, "controller_runtime_reconcile_time_seconds",
        "Length of time per reconciliation per controller", ("controller",), DURATION_BUCKETS),
)
"""controller-runtime's reconcile metrics, which Karpenter's performance dashboard reads."""
