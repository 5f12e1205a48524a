"""Pod-level resources in the effective request (component-helpers ``PodRequests``, API defaulting)."""

from __future__ import annotations

from typing import Any

from karpy.api import pod, quantity


def _pod(pod_resources: dict[str, Any], container: dict[str, Any], **spec: Any) -> pod.Pod:
    return pod.Pod.from_manifest({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"resources": pod_resources, "containers": [{"name": "a", "resources": container},
                                                           {"name": "b", "resources": container}], **spec}})


def test_a_pod_level_request_replaces_the_containers_sum_and_the_overhead_still_adds() -> None:
    p = _pod({"requests": {"cpu": "3"}}, {"requests": {"cpu": "1", "memory": "1Gi"}}, overhead={"cpu": "250m"})
    assert p.requests["cpu"] == 3250
    assert p.requests["memory"] == 2 * 2**30 * quantity.MILLI


def test_resources_kubernetes_does_not_support_at_pod_level_come_from_the_containers() -> None:
    p = _pod({"requests": {"ephemeral-storage": "50Gi", "hugepages-2Mi": "1Gi"},
              "limits": {"nvidia.com/gpu": "1"}}, {"requests": {"ephemeral-storage": "1Gi"}})
    assert p.requests["ephemeral-storage"] == 2 * 2**30 * quantity.MILLI
    assert p.requests["hugepages-2Mi"] == 2**30 * quantity.MILLI
    assert "nvidia.com/gpu" not in p.requests


def test_a_pod_level_limit_is_the_request_only_when_no_container_requests_the_resource() -> None:
    p = _pod({"limits": {"cpu": "8", "memory": "4Gi"}}, {"limits": {"cpu": "1"}})
    assert p.requests["cpu"] == 2000  # container limits default container requests: their sum
    assert p.requests["memory"] == 4 * 2**30 * quantity.MILLI


def test_pod_level_resources_survive_a_round_trip() -> None:
    p = _pod({"requests": {"cpu": "3"}, "limits": {"cpu": "4"}}, {})
    assert pod.Pod.from_manifest(p.to_manifest()) == p
    assert pod.Pod.from_manifest(p.to_manifest()).requests["cpu"] == 3000
