"""Issue 21 item 2.8: pod-level resources (``spec.resources``, Kubernetes 1.34).

Karpenter sizes pods with ``resources.Ceiling`` (``pkg/utils/resources/resources.go``), which is
``k8s.io/component-helpers/resource.PodRequests``: for cpu, memory and hugepages a pod-level
request replaces the containers' sum; the API server (``pkg/apis/core/v1/defaults.go``,
``defaultPodRequests``) defaults a missing pod-level request to the containers' sum, or to the
pod-level limit when no container requests that resource. karpy summed the containers only and
put a pod asking 6 CPUs at pod level on a node with 2.
"""

from __future__ import annotations

import textwrap
from typing import Any

from karpy.api import pod as pod_mod
from karpy.api import quantity
from karpy.simulator import engine

from . import scenarios as sc

GI = 2**30 * quantity.MILLI


def _deployment(container_resources: str, pod_resources: str) -> str:
    return textwrap.dedent(f"""
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: big, namespace: default}}
    spec:
      replicas: 1
      selector: {{matchLabels: {{app: big}}}}
      template:
        metadata: {{labels: {{app: big}}}}
        spec:
          resources: {pod_resources}
          containers:
          - name: app
            image: registry.example/app:1
            resources: {container_resources}
          - name: sidecar
            image: registry.example/proxy:1
    """)


def _run(container_resources: str, pod_resources: str) -> tuple[engine.Result, dict[str, Any]]:
    result = sc.run(sc.docs(sc.nodepool(), _deployment(container_resources, pod_resources)), until="4m")
    (running,) = sc.running(result, "big-")
    return result, running


def _allocatable(result: engine.Result, node_name: str, resource: str) -> int:
    node = next(n for n in result.objects["nodes"] if n["metadata"]["name"] == node_name)
    return quantity.parse_milli(str(node["status"]["allocatable"][resource]))


def test_a_pod_level_cpu_request_sizes_the_node() -> None:
    result, running = _run("{requests: {cpu: 100m, memory: 128Mi}}", "{requests: {cpu: '6', memory: 1Gi}}")
    assert pod_mod.Pod.from_manifest(running).requests["cpu"] == 6 * quantity.MILLI
    assert _allocatable(result, running["spec"]["nodeName"], "cpu") >= 6 * quantity.MILLI


def test_a_pod_level_limit_is_the_request_only_of_resources_no_container_requests() -> None:
    result, running = _run("{requests: {cpu: 100m}}", "{limits: {cpu: '4', memory: 20Gi}}")
    requests = pod_mod.Pod.from_manifest(running).requests
    assert requests["cpu"] == 100  # the containers' sum: the API server's default pod-level request
    assert requests["memory"] == 20 * GI  # no container requests memory: the pod-level limit
    assert _allocatable(result, running["spec"]["nodeName"], "memory") >= 20 * GI
    assert sc.launched(result) == 1
