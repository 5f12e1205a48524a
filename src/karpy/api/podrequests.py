"""A pod's resource request as the kube-scheduler computes it (component-helpers ``PodRequests``).

:func:`effective_requests` is what :attr:`karpy.api.pod.Pod.requests` caches and what every bin-packing in
karpy subtracts from a node's allocatable: regular containers add up, init containers run one at a time
(but sidecars, init containers with ``restartPolicy: Always``, keep running and add to everything started
after them), pod-level ``spec.resources`` replace the containers' sum for the resources they may set
(:func:`is_pod_level_resource`), the pod's ``overhead`` is added, and every pod takes one of the node's
``pods`` (:data:`PODS_RESOURCE`). Quantities are milli-units (:mod:`karpy.api.quantity`); pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from karpy.api import podspec, quantity

PODS_RESOURCE = "pods"
"""The resource every pod takes one of (a node's ``pods`` capacity)."""


def is_pod_level_resource(name: str) -> bool:
    """Resources ``spec.resources`` may set (Kubernetes ``IsSupportedPodLevelResource``)."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def effective_requests(
    containers: tuple[podspec.Container, ...],
    init_containers: tuple[podspec.Container, ...],
    overhead: Mapping[str, int],
    pod_resources: podspec.PodResources | None = None,
) -> quantity.ResourceList:
    """The kube-scheduler's pod request (per resource, in milli-units).

    ``max(sum(regular) + sum(sidecars), max_i(init_i + sidecars started before i)) + overhead``,
    plus ``pods: 1000`` (the pod itself). Sidecars are init containers with ``restartPolicy:
    Always``; they keep running, so they add to everything that starts after them.

    Pod-level resources (``spec.resources``, Kubernetes 1.34, component-helpers ``PodRequests``
    and the API server's ``defaultPodRequests``): for cpu, memory and hugepages, a pod-level
    request replaces the containers' sum; a pod-level limit without a pod-level request is the
    request when no container requests that resource. The overhead is added after.
    """
    total: dict[str, int] = {}
    for c in containers:
        for k, v in c.requests.items():
            total[k] = total.get(k, 0) + v
    if init_containers:
        sidecars: dict[str, int] = {}
        init_peak: dict[str, int] = {}
        for c in init_containers:
            if c.restart_policy == "Always":
                for k, v in c.requests.items():
                    total[k] = total.get(k, 0) + v
                    sidecars[k] = sidecars.get(k, 0) + v
                step: Mapping[str, int] = sidecars
            else:
                step = quantity.add(c.requests, sidecars)
            for k, v in step.items():
                if v > init_peak.get(k, 0):
                    init_peak[k] = v
        for k, v in init_peak.items():
            if v > total.get(k, 0):
                total[k] = v
    if pod_resources is not None:
        for k, v in pod_resources.limits.items():
            if is_pod_level_resource(k) and k not in total and k not in pod_resources.requests:
                total[k] = v
        for k, v in pod_resources.requests.items():
            if is_pod_level_resource(k):
                total[k] = v
    for k, v in overhead.items():
        total[k] = total.get(k, 0) + v
    total[PODS_RESOURCE] = total.get(PODS_RESOURCE, 0) + quantity.MILLI
    return total
