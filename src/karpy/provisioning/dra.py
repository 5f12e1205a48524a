"""Dynamic Resource Allocation (DRA): which pods claim devices, and what the scheduler does with them.

Karpenter v1.14 (``pkg/controllers/provisioning/scheduling/scheduler.go``, ``pkg/utils/pod``) treats a
pod as having DRA requirements when ``spec.resourceClaims`` is set or any container or init container
lists ``resources.claims``. With ``IGNORE_DRA_REQUESTS`` on (its default) the scheduler refuses such a
pod with a ``DRAError`` ("pod has Dynamic Resource Allocation requirements that are not yet supported by
Karpenter"), never relaxes its preferences for it, publishes ``FailedScheduling`` and logs "skipping pod
with Dynamic Resource Allocation requirements, not yet supported by Karpenter"; DaemonSet pods with DRA
requirements are left out of the daemon overhead of new nodes. With the setting off Karpenter allocates
devices from ResourceSlices; karpy does not model devices, so it refuses these pods the same way in both
cases (:data:`NOT_ALLOCATED` says so when the setting is off): a DRA pod stays pending with a clear reason
and is never placed as if it claimed nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from karpy.api import pod as pod_mod

MESSAGE = "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter"
"""Karpenter's DRAError text (the FailedScheduling event's explanation)."""
LOG_MESSAGE = "skipping pod with Dynamic Resource Allocation requirements, not yet supported by Karpenter"
"""Karpenter's info log line for each such pod."""
NOT_ALLOCATED = ("pod has Dynamic Resource Allocation requirements and karpy does not allocate DRA devices "
                 "(IGNORE_DRA_REQUESTS=false is not implemented)")
"""The explanation when ``ignoreDRARequests`` is false: Karpenter would allocate devices, karpy cannot."""


def has_requirements(p: pod_mod.Pod) -> bool:
    """Does ``p`` reference any ResourceClaim, at the pod level or from a container? (Karpenter's
    ``HasDRARequirements``)."""
    if p.resource_claims:
        return True
    return any(c.claims for c in p.containers) or any(c.claims for c in p.init_containers)


def split(pods: Iterable[pod_mod.Pod]) -> tuple[list[pod_mod.Pod], list[pod_mod.Pod]]:
    """(pods without DRA requirements, pods with), each in input order."""
    plain: list[pod_mod.Pod] = []
    claiming: list[pod_mod.Pod] = []
    for p in pods:
        (claiming if has_requirements(p) else plain).append(p)
    return plain, claiming


def is_dra_error(explanation: str) -> bool:
    """Is a scheduling explanation the DRA refusal (either wording)?"""
    return explanation in (MESSAGE, NOT_ALLOCATED)
